"""A report always fits: an API answers the approved write with 20 MB, the run's report is stored with
that answer clipped to its length and SHA-256, and the proposal ends `executed`."""

from __future__ import annotations

import asyncio
import hashlib
import uuid
from http.server import BaseHTTPRequestHandler

from reviewer.agent import Gate, HttpRequest, write_tool
from reviewer.agent.fitting import ANSWER_BYTES, HEAD_CHARS, clipped, fit_calls
from reviewer.queue.client import QueueClient
from reviewer.queue.refusals import NotFound
from tests.agent.fixtures import Queue
from tests.agent.loopback import LoopbackServer, loopback_servers

ANSWER = b'{"id":"export-1","rows":"' + b"r" * (20 * 1024 * 1024) + b'"}'


def answers_20_mb(server: LoopbackServer, handler: BaseHTTPRequestHandler) -> None:
    handler.send_response(201)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(ANSWER)))
    handler.end_headers()
    handler.wfile.write(ANSWER)


@write_tool(effect="create")
def export_tickets(name: str) -> HttpRequest:
    """Make an export; the API answers with all of it."""
    return HttpRequest("POST", "/v1/exports", body={"name": name})


async def approve_when_pending(queue: Queue, proposal_id: str) -> None:
    async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
        for _ in range(2000):
            try:
                latest = (await reviewer.get_proposal(proposal_id)).latest
            except NotFound:  # not submitted yet
                latest = None
            if latest is not None and latest.state == "pending":
                await reviewer.decide(proposal_id, latest.revision, latest.plan_sha256, "approve")
                return
            await asyncio.sleep(0.02)
    raise AssertionError(f"{proposal_id} was never pending")


def test_an_approved_write_answered_with_20_mb_ends_executed_with_the_clipped_answers_digest(
    queue: Queue,
) -> None:
    proposal_id = f"export-{uuid.uuid4().hex[:8]}"
    with loopback_servers(1) as (api,):
        api.answer = answers_20_mb

        async def task() -> None:
            await export_tickets(name="all")

        async def scenario() -> None:
            async with Gate(
                api=api.url, queue=queue.url, token=queue.agent_token, poll_interval=0.05, decision_timeout=60
            ) as gate:
                result, _ = await asyncio.gather(
                    gate.run(task, title="Export every ticket", proposal_id=proposal_id),
                    approve_when_pending(queue, proposal_id),
                )
            result.raise_for_stop()

        asyncio.run(scenario())
        assert [(method, path) for method, path, _, _ in api.seen] == [("POST", "/v1/exports")]

    async def stored() -> tuple[str, dict[str, object]]:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            state = await reviewer.decision_state(proposal_id)
            (report,) = await reviewer.get_executions(proposal_id)
            return state.state, report.calls[0]["outcome"]

    state, outcome = asyncio.run(stored())
    assert state == "executed"
    assert outcome["status"] == "ok" and outcome["http_status"] == 201
    assert outcome["result"] == {
        "clipped": True,
        "bytes": len(ANSWER),
        "sha256": hashlib.sha256(ANSWER).hexdigest(),
        "head": ANSWER[:HEAD_CHARS].decode(),
    }


def test_answers_are_kept_whole_while_they_fit_and_clipped_past_each_limit() -> None:
    deep: object = "bottom"
    for _ in range(70):
        deep = [deep]
    long_message = "refused: " + "x" * (2 * ANSWER_BYTES)
    calls = [
        {"seq": 1, "tool": "a", "outcome": {"status": "ok", "result": {"id": "t1"}}},
        {"seq": 2, "tool": "b", "outcome": {"status": "ok", "result": deep}},
        {"seq": 3, "tool": "c", "outcome": {"status": "ok", "result": "y" * (ANSWER_BYTES + 1)}},
        {"seq": 4, "tool": "d", "outcome": {"status": "refused", "message": long_message}},
        {"seq": 5, "tool": "e"},
    ]
    fitted = fit_calls(calls)
    assert fitted[0] == calls[0], "an answer that fits is kept as it is"
    assert fitted[1]["outcome"]["result"] == clipped(deep), "nesting past the queue's depth is clipped"
    assert fitted[2]["outcome"]["result"]["bytes"] == ANSWER_BYTES + 1
    message = fitted[3]["outcome"]["message"]
    digest = hashlib.sha256(long_message.encode()).hexdigest()
    assert message.startswith("refused: xxx") and message.endswith(
        f"[clipped: {len(long_message)} bytes in all, sha256 {digest}]"
    )
    assert fitted[4] == calls[4]
