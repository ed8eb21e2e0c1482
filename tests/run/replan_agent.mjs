// A Node agent that re-plans from a reviewer's words: it closes t1, and closes and deletes t3 unless
// REVIEWER_FEEDBACK (set by `reviewer run --max-revisions N` on a re-plan) asks to keep t3.
// Each run appends the feedback it got (or "none") as a JSON line to the file named by its argument.

import { appendFileSync } from "node:fs";

const api = process.env.REVIEWER_API_URL;
const feedback = process.env.REVIEWER_FEEDBACK;
appendFileSync(process.argv[2], JSON.stringify(feedback ?? "none") + "\n");

async function call(method, path, body) {
  const response = await fetch(api + path, {
    method,
    headers: { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  console.log(`${method} ${path} -> ${response.status}`);
  if (response.status >= 500) process.exit(4);
}

await call("PATCH", "/v1/tickets/t1", { status: "closed" });
if (!/keep t3/i.test(feedback ?? "")) {
  await call("PATCH", "/v1/tickets/t3", { status: "closed" });
  await call("DELETE", "/v1/tickets/t3");
}
