"""The review page and passkey enrolment in a real browser: Debian's chromium through Playwright, the
DevTools virtual authenticator as the reviewer's phone, the real queue on a loopback port.

A reviewer enrols under their own token and approves from the page; the queue records the assertion
beside the statement. What a link scanner, a stale page, a replayed assertion, a stranger's passkey,
a removed passkey and an agent's hostile title can do is tried, and each decides nothing.
"""

from __future__ import annotations

import asyncio
import html
import json
import os
import re
import subprocess
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, expect

from reviewer.agent.errors import UnsignedApproval
from reviewer.agent.queue import QueueAgent
from reviewer.queue.client import QueueClient
from reviewer.service.store.opener import open_store
from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.passkeys import AllowedPasskeys, PasskeyAssertion, verify_with_passkeys
from tests.forked_commands import run_reviewer
from tests.policies import window
from tests.queue_harness import Service, body, decide, proposal, reviewer_command, submit, unique_id
from tests.service.web.browser import Device, chromium, device, enrol, register_on, web_service

pytestmark = pytest.mark.slow


PAYMENTS = {"api": "deskline", "base_url": "https://api.payments.example/v1", "environment": "payments"}
PRODUCTION = {"api": "deskline", "base_url": "https://api.prod.example/v1", "environment": "production"}
FROZEN = {"api": "deskline", "base_url": "https://api.frozen.example/v1", "environment": "frozen"}
POLICY = f"""
[default]
approvals = 1

[environments.production]
base_urls = ["https://api.prod.example/*"]
signatures = "passkey"

[environments.payments]
base_urls = ["https://api.payments.example/*"]
approvals = 2

[environments.frozen]
base_urls = ["https://api.frozen.example/*"]

{window("frozen", "always frozen", "deny", "0 0 * * *", "24h", "UTC")}"""


@pytest.fixture(scope="module")
def web_queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A queue serving pages at http://localhost:PORT (an IP address is no relying party id), whose
    policy asks production's decisions for a passkey."""
    folder = tmp_path_factory.mktemp("web-queue")
    (folder / "policy.toml").write_text(POLICY)
    running = web_service(folder, "--policy", str(folder / "policy.toml"))
    yield running
    running.stop()


@pytest.fixture(scope="module")
def tokens(web_queue: Service) -> dict[str, str]:
    return web_queue.tokens({"alice": "reviewer", "bob": "reviewer", "agent": "agent"})


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with chromium() as running:
        yield running


@pytest.fixture(scope="module")
def alice_phone(web_queue: Service, tokens: dict[str, str], browser: Browser) -> Iterator[Device]:
    """Alice's phone, her passkey enrolled on it through the page the link `reviewer passkey enroll`
    printed opens."""
    printed = reviewer_cli(web_queue, tokens["alice"], "passkey", "enroll")
    assert printed.returncode == 0, printed.stderr
    link = printed.stdout.splitlines()[-1]
    assert link.startswith(f"http://localhost:{web_queue.port}/passkeys/register/")
    phone = device(browser)
    register_on(phone, link)
    yield phone
    phone.close()


def reviewer_cli(service: Service, token: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "REVIEWER_TOKEN": token, "XDG_CONFIG_HOME": str(Path(service.db).parent / "none")}
    return run_reviewer(
        reviewer_command(*args, "--queue", service.url), capture_output=True, text=True, env=env, timeout=60
    )


def client(service: Service, token: str) -> httpx.Client:
    return service.client(token)


def submitted(service: Service, tokens: dict[str, str], revision: int = 1, **kwargs: Any) -> dict[str, Any]:
    with client(service, tokens["agent"]) as agent:
        return submit(agent, kwargs.pop("proposal_id", unique_id("page")), revision, **kwargs)


def review_link(service: Service, token: str, proposal_id: str) -> str:
    with client(service, token) as reviewer:
        answer = reviewer.get(f"/v1/proposals/{proposal_id}/link")
    assert answer.status_code == 200, answer.text
    return str(answer.json()["review"])


def state_of(service: Service, token: str, proposal_id: str) -> dict[str, Any]:
    with client(service, token) as reviewer:
        answer = reviewer.get(f"/v1/proposals/{proposal_id}/decision")
    assert answer.status_code == 200, answer.text
    result: dict[str, Any] = answer.json()
    return result


def press(phone: Device, button: str, reason: str = "") -> str:
    """Press a decision button on the open review page; the status line once the queue answered."""
    page = phone.page
    page.wait_for_selector("main[data-ready='true']")
    if reason:
        page.fill("#reason", reason)
    page.get_by_role("button", name=button, exact=True).click()
    expect(page.locator("#status")).to_have_text(re.compile("^(Done|Nothing)"))
    return str(page.text_content("#status"))


def test_enrolled_passkey_approves_from_the_page_and_the_decision_holds_its_assertion(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device
) -> None:
    answer = submitted(web_queue, tokens)
    proposal_id = answer["proposal_id"]
    alice_phone.page.goto(review_link(web_queue, tokens["alice"], proposal_id))

    assert press(alice_phone, "Approve") == "Done: the proposal is approved."
    state = state_of(web_queue, tokens["alice"], proposal_id)
    assert state["state"] == "approved" and state["decided_by"] == "alice"
    [signed] = state["signatures"]
    assert signed["key_fingerprint"].startswith("passkey:")
    with client(web_queue, tokens["alice"]) as reviewer:
        exported = AllowedPasskeys.parse(reviewer.get("/v1/passkeys/export").text)
        history = reviewer.get(f"/v1/proposals/{proposal_id}").json()["history"]
    statement, passkey = verify_with_passkeys(signed["statement"], signed["signature"], exported.passkeys)
    assert (statement.proposal_id, statement.revision, statement.reviewer) == (proposal_id, 1, "alice")
    assert statement.plan_sha256 == answer["plan_sha256"] and passkey.reviewer == "alice"
    [approved] = [event for event in history if event["event"] == "approved"]
    assert approved["signature"] == signed["signature"]
    assertion = PasskeyAssertion.parse(approved["signature"])
    assert assertion.credential_id == b64url_of(alice_phone.credentials()[0]["credentialId"])


def test_where_a_passkey_is_required_the_executor_runs_only_what_a_registered_passkey_approved(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device, tmp_path: Path
) -> None:
    document = {**proposal(unique_id("prod")), "target": PRODUCTION}
    with client(web_queue, tokens["agent"]) as agent:
        answer = agent.post("/v1/proposals", content=body(document)).json()
    proposal_id, digest = answer["proposal_id"], answer["plan_sha256"]
    with client(web_queue, tokens["alice"]) as alice:
        unsigned = decide(alice, proposal_id, 1, digest)
    assert unsigned.status_code == 422 and "bound by a passkey" in unsigned.json()["message"]

    alice_phone.page.goto(review_link(web_queue, tokens["alice"], proposal_id))
    assert press(alice_phone, "Approve") == "Done: the proposal is approved."
    with client(web_queue, tokens["alice"]) as alice:
        exported = AllowedPasskeys.parse(alice.get("/v1/passkeys/export").text)

    def executor(passkeys: AllowedPasskeys, ledger: Path) -> Any:
        queue = QueueClient(web_queue.url, tokens["agent"])
        agent = QueueAgent(queue, allowed_signers=AllowedSigners(passkeys=passkeys), ledger=ledger)
        return queue, agent.wait_for_decision(proposal_id, 1, plan_digest=digest, timeout=5)

    async def run(passkeys: AllowedPasskeys, ledger: Path) -> Any:
        queue, waiting = executor(passkeys, ledger)
        async with queue:
            return await waiting

    approval = beside_the_browser(run(exported, tmp_path / "ledger.jsonl"))
    assert approval.plan_sha256 == digest
    with pytest.raises(UnsignedApproval, match="0 of 1 signed approvals"):
        beside_the_browser(run(AllowedPasskeys(), tmp_path / "other-ledger.jsonl"))


def beside_the_browser(work: Any) -> Any:
    """Run an executor's coroutine in a thread of its own: Playwright's sync API holds this one's loop."""
    with ThreadPoolExecutor(1) as thread:
        return thread.submit(asyncio.run, work).result()


def test_the_command_line_lists_exports_and_links(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device, tmp_path: Path
) -> None:
    proposal_id = submitted(web_queue, tokens)["proposal_id"]
    listed = reviewer_cli(web_queue, tokens["alice"], "passkey", "list")
    shown = reviewer_cli(web_queue, tokens["alice"], "show", proposal_id, "--link")
    exported = reviewer_cli(
        web_queue, tokens["alice"], "passkey", "export", "--out", str(tmp_path / "keys.json")
    )
    [credential] = alice_phone.credentials()
    assert listed.stdout.startswith(b64url_of(credential["credentialId"]) + "  passkey  added ")
    assert shown.stdout.strip() == review_link(web_queue, tokens["alice"], proposal_id)
    assert exported.stdout.startswith("wrote 1 passkey(s) of 1 reviewer(s)")
    [passkey] = AllowedPasskeys.read(tmp_path / "keys.json").passkeys
    assert (passkey.reviewer, passkey.rp_id) == ("alice", "localhost")


def b64url_of(standard_base64: str) -> str:
    return standard_base64.rstrip("=").replace("+", "-").replace("/", "_")


def test_request_changes_from_the_page_carries_the_reason_to_the_agent(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device
) -> None:
    proposal_id = submitted(web_queue, tokens)["proposal_id"]
    alice_phone.page.goto(review_link(web_queue, tokens["alice"], proposal_id))
    assert press(alice_phone, "Request changes") == "Nothing was decided: say why in the reason box first."
    assert press(alice_phone, "Request changes", reason="keep t2 open") == (
        "Done: the proposal is changes_requested."
    )
    state = state_of(web_queue, tokens["agent"], proposal_id)
    assert (state["state"], state["reason"], state["decided_by"]) == (
        "changes_requested",
        "keep t2 open",
        "alice",
    )


def test_a_link_scanners_get_and_head_decide_nothing(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device
) -> None:
    proposal_id = submitted(web_queue, tokens)["proposal_id"]
    link = review_link(web_queue, tokens["alice"], proposal_id)
    base = link.split("?")[0]
    with httpx.Client() as scanner:
        for method in ("GET", "HEAD"):
            for url in (link, f"{base}/statement?key=x", f"{base}/decision?key=x"):
                scanner.request(method, url)
        page = scanner.get(link)
    assert state_of(web_queue, tokens["alice"], proposal_id)["state"] == "pending"
    assert "set-cookie" not in page.headers
    csp = page.headers["content-security-policy"]
    assert "frame-ancestors 'none'" in csp and "script-src 'self'" in csp and "'unsafe-inline'" not in csp


def test_the_page_of_a_superseded_revision_approves_nothing(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device
) -> None:
    first = submitted(web_queue, tokens)
    proposal_id = first["proposal_id"]
    alice_phone.page.goto(review_link(web_queue, tokens["alice"], proposal_id))
    alice_phone.page.wait_for_selector("main[data-ready='true']")
    submitted(web_queue, tokens, 2, proposal_id=proposal_id, calls=3)

    status = press(alice_phone, "Approve")
    assert status.startswith("Nothing was decided: revision 1 was superseded by revision 2")
    assert state_of(web_queue, tokens["alice"], proposal_id)["state"] == "pending"
    alice_phone.page.reload()
    assert alice_phone.page.locator("#superseded").is_visible()
    assert alice_phone.page.get_by_role("button", name="Approve").count() == 0


def test_an_assertion_replayed_on_another_proposal_or_revision_is_refused(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device
) -> None:
    bound = submitted(web_queue, tokens)["proposal_id"]
    other = submitted(web_queue, tokens)["proposal_id"]
    sent: list[dict[str, Any]] = []
    alice_phone.page.on(
        "request",
        lambda request: sent.append(request.post_data_json) if request.url.endswith("/decision") else None,
    )
    alice_phone.page.goto(review_link(web_queue, tokens["alice"], bound))
    assert press(alice_phone, "Reject", reason="not tonight") == "Done: the proposal is rejected."
    [captured] = sent
    origin = {"Origin": web_queue.url.replace("127.0.0.1", "localhost")}
    other_key = review_link(web_queue, tokens["alice"], other).split("key=")[1]
    with httpx.Client(base_url=web_queue.url, headers=origin) as attacker:
        on_other = attacker.post(f"/review/{other}/1/decision", json={**captured, "key": other_key})
        submitted(web_queue, tokens, 2, proposal_id=bound, calls=3)
        again = attacker.post(f"/review/{bound}/2/decision", json=captured)
        stale = attacker.post(f"/review/{bound}/1/decision", json=captured)
    assert on_other.status_code == 422, on_other.text
    assert "statement.proposal_id is" in on_other.json()["message"]
    assert again.status_code == 422 and "this is the page of revision 2" in again.json()["message"]
    assert stale.status_code in (409, 412, 422), stale.text
    assert state_of(web_queue, tokens["alice"], other)["state"] == "pending"
    assert state_of(web_queue, tokens["alice"], bound)["state"] == "pending"


def test_a_passkey_never_enrolled_approves_nothing(
    web_queue: Service, tokens: dict[str, str], browser: Browser, alice_phone: Device
) -> None:
    proposal_id = submitted(web_queue, tokens)["proposal_id"]
    stranger = device(browser)
    try:
        stranger.add_stranger_credential("localhost")
        stranger.page.goto(review_link(web_queue, tokens["alice"], proposal_id))
        answer = stranger.page.evaluate(STRANGER_APPROVES, proposal_id)
    finally:
        stranger.close()
    assert answer["status"] == 403, answer
    assert "not enrolled" in answer["body"]["message"]
    assert state_of(web_queue, tokens["alice"], proposal_id)["state"] == "pending"


STRANGER_APPROVES = """
async (proposalId) => {
  const key = document.getElementById("page").dataset.key;
  const post = (url, body) => fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
    body: JSON.stringify(body)});
  const asked = await (await post(`/review/${proposalId}/1/statement`,
    {key, decision: "approve", reviewer: "alice"})).json();
  const b64 = (buffer) => btoa(String.fromCharCode(...new Uint8Array(buffer)))
    .replace(/\\+/g, "-").replace(/\\//g, "_").replace(/=+$/, "");
  const challenge = Uint8Array.from(atob(asked.publicKey.challenge.replace(/-/g, "+").replace(/_/g, "/")),
    (c) => c.charCodeAt(0));
  const got = await navigator.credentials.get({publicKey: {challenge, rpId: "localhost",
    userVerification: "required"}});
  const assertion = {id: got.id, rawId: b64(got.rawId), type: got.type, response: {
    clientDataJSON: b64(got.response.clientDataJSON), authenticatorData: b64(got.response.authenticatorData),
    signature: b64(got.response.signature)}};
  const answer = await post(`/review/${proposalId}/1/decision`, {key, statement: asked.statement, assertion});
  return {status: answer.status, body: await answer.json()};
}
"""


def test_a_removed_passkey_decides_nothing_at_once(
    web_queue: Service, tokens: dict[str, str], browser: Browser
) -> None:
    bob_phone = device(browser)
    try:
        enrol(web_queue, tokens["bob"], bob_phone)
        with client(web_queue, tokens["bob"]) as bob:
            [listed] = bob.get("/v1/passkeys").json()["passkeys"]
            assert bob.delete(f"/v1/passkeys/{listed['credential_id'][:12]}").status_code == 204
            assert bob.get("/v1/passkeys").json()["passkeys"] == []
        proposal_id = submitted(web_queue, tokens)["proposal_id"]
        bob_phone.page.goto(review_link(web_queue, tokens["bob"], proposal_id))
        status = press(bob_phone, "Approve")
    finally:
        bob_phone.close()
    assert status.startswith("Nothing was decided: no passkey is enrolled for 'bob' on this queue")
    assert state_of(web_queue, tokens["alice"], proposal_id)["state"] == "pending"


def test_removing_a_passkey_withdraws_its_pending_approval_and_an_ended_token_ends_its_passkey(
    web_queue: Service, tokens: dict[str, str], browser: Browser
) -> None:
    carol_token = web_queue.token(unique_id("carol"), "reviewer")
    carol = device(browser)
    try:
        enrol(web_queue, carol_token, carol)
        with client(web_queue, tokens["agent"]) as agent:
            first, second = (
                agent.post(
                    "/v1/proposals", content=body({**proposal(unique_id("pay")), "target": PAYMENTS})
                ).json()
                for _ in range(2)
            )
        carol.page.goto(review_link(web_queue, carol_token, first["proposal_id"]))
        assert press(carol, "Approve") == "Done: the proposal is pending (1 of 2 approvals)."
        with client(web_queue, carol_token) as reviewer:
            [listed] = reviewer.get("/v1/passkeys").json()["passkeys"]
            assert reviewer.delete(f"/v1/passkeys/{listed['credential_id']}").status_code == 204
        assert state_of(web_queue, tokens["alice"], first["proposal_id"])["approvals"] == []

        enrol(web_queue, carol_token, carol)
        store = open_store(web_queue.db, clock=time.time, pending_ttl=60, approval_ttl=60, create=False)
        try:
            [name] = [token.name for token in store.list_tokens() if token.name.startswith("carol")]
            assert store.revoke_token(name)
        finally:
            store.close()
        carol.page.goto(review_link(web_queue, tokens["alice"], second["proposal_id"]))
        status = press(carol, "Approve")
    finally:
        carol.close()
    assert status.startswith("Nothing was decided: no passkey is enrolled for")
    assert state_of(web_queue, tokens["alice"], second["proposal_id"])["approvals"] == []


def test_an_enrolment_link_registers_once(
    web_queue: Service, tokens: dict[str, str], browser: Browser
) -> None:
    phone = device(browser)
    try:
        link = enrol(web_queue, tokens["bob"], phone)
        again = httpx.get(link.replace("localhost", "127.0.0.1"))
    finally:
        phone.close()
    assert again.status_code == 404 and "unknown, used or expired" in again.text
    assert "Register passkey" not in again.text
    secret = link.rsplit("/", 1)[1]
    assert secret.startswith("rvw_") and secret not in web_queue.log()  # the access log redacts it


HOSTILE_TITLES = [
    '<script>alert("title")</script><img src=x onerror=alert("img")>',
    "Close tickets \u202egnp.exe\u202c now <a href='https://evil.example'>click</a>",
    "<b>" + "A" * 100_000,
]


@pytest.mark.parametrize("title", HOSTILE_TITLES, ids=["markup", "bidi", "100kb"])
def test_hostile_titles_render_inert(
    web_queue: Service, tokens: dict[str, str], alice_phone: Device, title: str
) -> None:
    proposal_id = submitted(web_queue, tokens, title=title)["proposal_id"]
    page = alice_phone.page
    page.goto(review_link(web_queue, tokens["alice"], proposal_id))
    page.wait_for_selector("main[data-ready='true']")
    shown = page.text_content("h1.claim") or ""
    assert page.locator("img").count() == 0 and page.locator("a[href*='evil']").count() == 0
    assert page.locator("script").count() == 1 and page.locator("b").count() == 0
    assert alice_phone.dialogs == []
    assert "\u202e" not in shown and len(shown) < 3000
    if "script" in title:
        assert '<script>alert("title")</script>' in shown


def test_a_large_plan_is_paged_200_calls_at_a_time(web_queue: Service, tokens: dict[str, str]) -> None:
    proposal_id = submitted(web_queue, tokens, calls=450)["proposal_id"]
    link = review_link(web_queue, tokens["alice"], proposal_id).replace("localhost", "127.0.0.1", 1)
    pages = [httpx.get(f"{link}&page={number}").text for number in (1, 3)]
    assert [page.count("<li>#") for page in pages] == [200, 50]
    assert "<li>#1 " in pages[0] and "<li>#401 " in pages[1] and "<li>#450 " in pages[1]
    assert "page 3 of 3" in pages[1] and ">Approve<" in pages[1]


def test_the_queue_refuses_a_page_post_from_another_origin(
    web_queue: Service, tokens: dict[str, str]
) -> None:
    proposal_id = submitted(web_queue, tokens)["proposal_id"]
    key = review_link(web_queue, tokens["alice"], proposal_id).split("key=")[1]
    answer = httpx.post(
        f"{web_queue.url}/review/{proposal_id}/1/statement",
        json={"key": key, "decision": "approve", "reviewer": "alice"},
        headers={"Origin": "https://evil.example"},
    )
    assert answer.status_code == 403 and "must come from http://localhost" in answer.json()["message"]


def test_without_a_web_origin_no_page_is_served(service: Service) -> None:
    agent = service.token(unique_id("agent"), "agent")
    with service.client(agent) as client:
        proposal_id = unique_id("plain")
        assert client.post("/v1/proposals", content=body(proposal(proposal_id))).status_code == 201
        for path in (f"/review/{proposal_id}/1", "/static/review.js", "/v1/passkeys"):
            assert client.get(path).status_code == 404, path
    assert json.loads(httpx.get(f"{service.url}/openapi.json").text)["paths"].get("/v1/passkeys") is None


def test_a_plan_its_change_windows_keep_from_running_says_so_on_its_page(
    web_queue: Service, tokens: dict[str, str]
) -> None:
    """The page says when the plan may run, in the words `reviewer show` and the app use."""
    from reviewer.queue.messages import WindowState

    document = {**proposal(unique_id("frozen")), "target": FROZEN}
    with client(web_queue, tokens["agent"]) as agent:
        proposal_id = agent.post("/v1/proposals", content=body(document)).json()["proposal_id"]
    window = WindowState.model_validate(state_of(web_queue, tokens["alice"], proposal_id)["window"])
    assert not window.may_run and "always frozen" in window.words()
    link = review_link(web_queue, tokens["alice"], proposal_id).replace("localhost", "127.0.0.1", 1)
    assert window.words() in html.unescape(httpx.get(link).text)
