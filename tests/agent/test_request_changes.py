"""The re-plan loop written once: `Gate.run(task, max_revisions=N)` against the real queue and the sample
API, and a wait that ends in an expiry, said in words, under the queue's injected clock."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reviewer.agent import (
    ChangesRequested,
    Feedback,
    Gate,
    GateResult,
    ProposalExpired,
    QueueAgent,
)
from reviewer.queue.client import QueueClient
from reviewer.queue.refusals import NotFound
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from tests.agent.fixtures import Queue
from tests.agent.helpers import received
from tests.agent.test_gate import gated_run
from tests.queue_harness import Service
from tests.service.notifications.receiver import Receiver, notify_options

KEEP_T3 = "keep t3 open"


def planner(seen: list[Feedback | None]):  # type: ignore[no-untyped-def]
    """The reference task, re-planned on feedback: it drops the delete of t3 when a reviewer asks."""

    async def task(feedback: Feedback | None = None) -> None:
        seen.append(feedback)
        ticket = await tools.create_ticket(title=tools.REFERENCE_TITLE)
        await tools.update_ticket(id="t1", status="closed", mergedInto=ticket["id"])
        await tools.update_ticket(id="t2", status="closed", mergedInto=ticket["id"])
        if feedback is None or "t3" not in feedback.reason:
            await tools.delete_ticket(id="t3")

    return task


async def reviewer_asks_then_approves(queue: Queue, proposal_id: str, attempts: int = 800) -> list[str]:
    """Revision 1: ask for changes; revision 2: approve. Returns the tools of each revision decided.
    Polls a bounded number of times: the agent submits from another task."""
    decided: list[str] = []
    async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
        for _ in range(attempts):
            try:
                record = await reviewer.get_proposal(proposal_id)
            except NotFound:  # not submitted yet
                await asyncio.sleep(0.025)
                continue
            latest = record.latest
            if latest.state == "pending":
                plan = await reviewer.get_revision(proposal_id, latest.revision)
                decided.append(",".join(call.tool for call in plan.calls))
                if latest.revision == 1:
                    await reviewer.decide(proposal_id, 1, latest.plan_sha256, "request_changes", KEEP_T3)
                else:
                    await reviewer.decide(proposal_id, latest.revision, latest.plan_sha256, "approve")
                    return decided
            await asyncio.sleep(0.025)
    raise AssertionError(f"{proposal_id} did not reach revision 2 in time")


@pytest.fixture
def notified(tmp_path: Path) -> Iterator[tuple[Queue, Receiver]]:
    """A real queue of its own that notifies a webhook receiver on loopback."""
    receiver = Receiver().start()
    service = Service(
        db=tmp_path / "queue.sqlite3",
        log_path=tmp_path / "serve.log",
        serve_args=notify_options(receiver, tmp_path),
    )
    service.start()
    tokens = service.tokens({"test-agent": "agent", "test-reviewer": "reviewer"})
    try:
        yield Queue(service.url, service.db, tokens["test-agent"], tokens["test-reviewer"]), receiver
    finally:
        service.stop()
        receiver.stop()


def test_the_reviewer_asks_to_keep_t3_open_and_revision_2_runs_without_the_delete(
    notified: tuple[Queue, Receiver], sample_api: RunningSampleApi
) -> None:
    """The Show: "keep t3 open" on revision 1; the task plans again without the delete; revision 2
    is approved and runs; the API has t1 closed and t3 open; the receiver got the request once."""
    queue, receiver = notified
    seen: list[Feedback | None] = []
    result, decided = asyncio.run(
        gated_run(
            queue,
            sample_api,
            "approve",
            task=planner(seen),
            reviewer=lambda proposal_id: reviewer_asks_then_approves(queue, proposal_id),
            max_revisions=2,
        )
    )
    assert decided == [
        "create_ticket,update_ticket,update_ticket,delete_ticket",
        "create_ticket,update_ticket,update_ticket",
    ], "the reviewer saw the delete in revision 1 and not in revision 2"

    assert seen == [None, Feedback(KEEP_T3, "test-reviewer", 1)], "the replay of revision 2 plans nothing"
    assert result.feedback == (Feedback(KEEP_T3, "test-reviewer", 1),)
    assert result.submission.revision == 2 and result.proposal.revision == 2
    assert [call.tool for call in result.proposal.calls] == [
        "create_ticket",
        "update_ticket",
        "update_ticket",
    ]
    result.raise_for_stop()
    assert result.ok
    assert sample_api.store.tickets["t1"]["status"] == "closed"
    assert sample_api.store.tickets["t3"]["status"] == "open"
    assert [entry["method"] for entry in received(sample_api) if not entry["query"]] == [
        "POST",
        "PATCH",
        "PATCH",
    ]
    arrived = [(arrival.event, arrival.document["revision"]) for arrival in receiver.wait_for(5)]
    assert arrived == [
        ("proposal.waiting", 1),
        ("proposal.changes_requested", 1),
        ("proposal.waiting", 2),
        ("proposal.decided", 2),
        ("run.ended", 2),
    ]
    asked = next(arrival.document for arrival in receiver.accepted() if arrival.event.endswith("requested"))
    assert (asked["decided_by"], asked["reason"]) == ("test-reviewer", KEEP_T3)


def test_with_one_revision_allowed_changes_requested_ends_the_run_with_the_reason_and_writes_nothing(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    seen: list[Feedback | None] = []
    result, _ = asyncio.run(
        gated_run(queue, sample_api, "request_changes", KEEP_T3, task=planner(seen), backend="record")
    )
    assert seen == [None]
    assert isinstance(result.refusal, ChangesRequested)
    assert result.rejection_reason == KEEP_T3
    with pytest.raises(ChangesRequested, match="test-reviewer asked for changes .* keep t3 open"):
        result.raise_for_stop()
    assert received(sample_api) == []


def test_a_task_without_a_feedback_argument_is_called_as_before() -> None:
    from reviewer.agent.feedback import takes_feedback, with_feedback

    async def plain() -> None: ...

    async def keyword_only(*, feedback: Feedback | None) -> None: ...

    async def catch_all(**options: object) -> None: ...

    assert not takes_feedback(plain) and not takes_feedback(catch_all)
    assert takes_feedback(keyword_only) and takes_feedback(planner([]))
    assert with_feedback(plain, Feedback("x", "alice", 1)) is plain


HELD = 0.1
"""Seconds the queue holds each of an agent's asks for a decision in the injected-clock test."""


def test_a_wait_ends_saying_the_plan_expired_pending_or_approved(tmp_path: Path) -> None:
    """The queue's clock (injected, in-process) moves a minute on every reading: a plan nobody decides
    expires while the gate waits, and an approval the agent never claimed lapses. A long poll is held
    in real seconds, which this clock does not move: each ask is held a tenth of a second, not the
    agent's 30 s (the test took 15.3 s, among the suite's five longest; 0.5 s now)."""
    ticks = itertools.count(1_800_000_000.0, 61.0)
    service = create_app(tmp_path / "q.sqlite3", clock=lambda: next(ticks), pending_ttl=600, approval_ttl=60)
    tokens = {name: mint_token() for name in ("alice", "agent")}
    service.state.store.create_token("alice", "reviewer", hash_token(tokens["alice"]))
    service.state.store.create_token("agent", "agent", hash_token(tokens["agent"]))

    def queue_client(name: str) -> QueueClient:
        return QueueClient("http://queue", tokens[name], transport=httpx.ASGITransport(app=service))

    async def nobody_decides() -> GateResult:
        async with Gate(queue=queue_client("agent"), poll_interval=0, decision_timeout=60) as gate:
            gate.queue.decision_wait = HELD

            async def close_t1() -> None:
                await tools.update_ticket(id="t1", status="closed")

            return await gate.run(close_t1, title="Close t1", proposal_id="forgotten")

    result = asyncio.run(nobody_decides())
    assert isinstance(result.refusal, ProposalExpired)
    assert "revision 1 expired: no reviewer decided it before the queue's pending time ran out" in str(
        result.refusal
    )

    async def approval_lapses() -> None:
        async with queue_client("agent") as agent_client, queue_client("alice") as alice:
            agent = QueueAgent(agent_client, poll_interval=0, decision_wait=HELD)
            gate = Gate(queue=agent_client)
            recording = await gate.dry_run(lambda: tools.update_ticket(id="t2", status="closed"))
            answer = await agent.submit(gate.propose(recording, title="Close t2", proposal_id="lapsed"))
            await alice.decide("lapsed", 1, answer.plan_sha256, "approve")
            with pytest.raises(ProposalExpired, match="its approval by alice lapsed before a run claimed it"):
                await agent.wait_for_decision("lapsed", 1, timeout=60)

    asyncio.run(approval_lapses())
