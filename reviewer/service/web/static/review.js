// The review page's buttons and the enrolment page's: each decision is asked of the passkey as an
// assertion over the SHA-256 of the decision statement the queue made, then sent with it. Nothing
// here reads the agent's text; every message shown is set as text, never as markup.
"use strict";

const page = document.getElementById("page");
const status = document.getElementById("status");
const REVIEWER = "reviewer.name";

function say(text) {
  if (status) status.textContent = text;
}

function bytes(base64url) {
  const text = atob(base64url.replace(/-/g, "+").replace(/_/g, "/"));
  return Uint8Array.from(text, (c) => c.charCodeAt(0));
}

function base64url(buffer) {
  let text = "";
  for (const byte of new Uint8Array(buffer)) text += String.fromCharCode(byte);
  return btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
}

async function post(url, body) {
  const answer = await fetch(url, {
    method: "POST",
    headers: { "Content-Type": "application/json" },
    body: JSON.stringify(body),
    credentials: "omit",
    cache: "no-store",
  });
  const value = await answer.json().catch(() => ({ message: `the queue answered ${answer.status}` }));
  if (!answer.ok) throw new Error(value.message || `the queue answered ${answer.status}`);
  return value;
}

function credentialJSON(credential) {
  const response = credential.response;
  const json = { id: credential.id, rawId: base64url(credential.rawId), type: credential.type, response: {} };
  for (const name of ["clientDataJSON", "authenticatorData", "signature", "userHandle", "attestationObject"]) {
    if (response[name]) json.response[name] = base64url(response[name]);
  }
  if (response.getTransports) json.response.transports = response.getTransports();
  json.clientExtensionResults = credential.getClientExtensionResults();
  return json;
}

async function register() {
  const button = document.getElementById("register");
  button.disabled = true;
  const link = page.dataset.link;
  try {
    say("Asking your device for a new passkey…");
    const options = await post(`/passkeys/register/${link}/options`, {});
    options.challenge = bytes(options.challenge);
    options.user.id = bytes(options.user.id);
    for (const item of options.excludeCredentials || []) item.id = bytes(item.id);
    const credential = await navigator.credentials.create({ publicKey: options });
    const label = document.getElementById("label").value;
    const done = await post(`/passkeys/register/${link}`, { credential: credentialJSON(credential), label });
    localStorage.setItem(REVIEWER, done.reviewer);
    say(`Registered: this passkey now decides as ${done.reviewer}. You can close this page.`);
  } catch (error) {
    say(`Not registered: ${error.message}`);
    button.disabled = false;
  }
}

async function decide(decision, buttons) {
  const reviewer = document.getElementById("reviewer").value.trim();
  const reason = document.getElementById("reason").value;
  if (!reviewer) return say("Nothing was decided: say who you are (your reviewer name) first.");
  if (decision !== "approve" && !reason.trim()) return say("Nothing was decided: say why in the reason box first.");
  const base = `/review/${encodeURIComponent(page.dataset.proposal)}/${page.dataset.revision}`;
  const key = page.dataset.key;
  buttons.forEach((button) => (button.disabled = true));
  try {
    say("Unlock your passkey to sign the decision…");
    const asked = await post(`${base}/statement`, { key, decision, reviewer });
    const options = asked.publicKey;
    options.challenge = bytes(options.challenge);
    for (const item of options.allowCredentials) item.id = bytes(item.id);
    const assertion = await navigator.credentials.get({ publicKey: options });
    const state = await post(`${base}/decision`, {
      key,
      statement: asked.statement,
      reason,
      assertion: credentialJSON(assertion),
    });
    localStorage.setItem(REVIEWER, reviewer);
    const so_far = state.state === "pending" ? ` (${state.approvals.length} of ${state.approvals_required} approvals)` : "";
    say(`Done: the proposal is ${state.state}${so_far}.`);
  } catch (error) {
    say(`Nothing was decided: ${error.message}`);
    buttons.forEach((button) => (button.disabled = false));
  }
}

if (page && page.dataset.page === "register") {
  document.getElementById("register").addEventListener("click", register);
}

if (page && page.dataset.page === "review") {
  const buttons = Array.from(document.querySelectorAll("button[data-decision]"));
  const name = document.getElementById("reviewer");
  if (name) name.value = localStorage.getItem(REVIEWER) || "";
  if (!window.PublicKeyCredential) {
    say("This browser cannot use passkeys; decide from the terminal instead.");
  } else {
    for (const button of buttons) {
      button.addEventListener("click", () => decide(button.dataset.decision, buttons));
      button.disabled = false;
    }
    page.dataset.ready = "true";
  }
}
