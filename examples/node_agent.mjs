// The reference task, as a Node agent would write it: plain fetch, no dependency, no credential.
// Open one ticket, close t1 and t2 into it (mergedInto the new id), delete t3.
//
//   reviewer run --api http://127.0.0.1:8480 -- node examples/node_agent.mjs
//
// REVIEWER_API_URL is the gate `reviewer run` opens on loopback; the gate holds the API's credential.
// In the dry run a write's answer carries placeholders (id "<id from call 1>"): pass them on unchanged.

const api = process.env.REVIEWER_API_URL;
if (!api) {
  console.error("node_agent: REVIEWER_API_URL is not set; run me under `reviewer run`");
  process.exit(2);
}

async function call(method, path, body) {
  const response = await fetch(api + path, {
    method,
    headers: body === undefined ? {} : { "content-type": "application/json" },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  const answer = text ? JSON.parse(text) : null;
  console.log(`${method} ${path} -> ${response.status} ${text}`);
  return { status: response.status, answer };
}

const listed = await call("GET", "/v1/tickets");
const open = listed.answer.tickets.filter((ticket) => ticket.status === "open").map((ticket) => ticket.id);
console.log(`open tickets: ${open.join(", ")}`);

const created = await call("POST", "/v1/tickets", { title: "Printer on fire" });
const id = created.answer.id;
for (const ticket of ["t1", "t2"]) {
  await call("PATCH", `/v1/tickets/${ticket}`, { status: "closed", mergedInto: id });
}
await call("DELETE", "/v1/tickets/t3");
