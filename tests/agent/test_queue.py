"""The agent against a real queue: nothing runs without a current approval; a full approved run, reported."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import httpx
import msgspec
import pytest

from reviewer.agent import (
    Approval,
    DecisionTimeout,
    NotApproved,
    Patience,
    ProposalRejected,
    QueueAgent,
    RunStopped,
    execute_approved,
    local_approval,
)
from reviewer.plan.proposal import Call, Proposal, plan_sha256
from reviewer.queue.client import QueueClient
from reviewer.reading.verification import compare_execution
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.helpers import dry_proposal, first_pending, received
from tests.queue_harness import AnswerLostOnce


def named(proposal: Proposal, proposal_id: str, revision: int = 1) -> Proposal:
    return msgspec.structs.replace(proposal, proposal_id=proposal_id, revision=revision)


async def approve(queue: Queue, proposal_id: str, reason: str = "looks right") -> None:
    async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
        record = await reviewer.get_proposal(proposal_id)
        await reviewer.decide(
            proposal_id, record.latest.revision, record.latest.plan_sha256, "approve", reason
        )


async def submit_and_approve(agent: QueueAgent, queue: Queue, proposal: Proposal) -> Approval:
    """The agent submits revision 1, a reviewer approves it, the agent's wait returns the approval."""
    await agent.submit(proposal)
    await approve(queue, proposal.proposal_id)
    return await agent.wait_for_decision(proposal.proposal_id, 1, timeout=5)


async def execute(queue: Queue, sample_api: RunningSampleApi, approval):  # type: ignore[no-untyped-def]
    async with (
        QueueClient(queue.url, queue.agent_token) as client,
        httpx.AsyncClient(base_url=sample_api.base_url) as api,
    ):
        return await QueueAgent(client).execute(approval, client=api, audit=tools.AUDIT)


def real_writes(sample_api: RunningSampleApi) -> list[dict]:
    return [request for request in received(sample_api) if not request["query"]]


def test_a_pending_proposal_authorizes_nothing(queue: Queue, sample_api: RunningSampleApi) -> None:
    """The agent holds a plan and even a digest-checked Approval object; the queue says pending: refused."""
    proposal = named(asyncio.run(dry_proposal(sample_api, "server")), "pending-0001")

    async def submit() -> None:
        async with QueueClient(queue.url, queue.agent_token) as client:
            await QueueAgent(client).submit(proposal)

    asyncio.run(submit())
    with pytest.raises(NotApproved, match="no reviewer has approved it yet"):
        asyncio.run(execute(queue, sample_api, local_approval(proposal)))
    assert real_writes(sample_api) == []


def test_an_approval_of_a_superseded_revision_authorizes_nothing(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    first = named(asyncio.run(dry_proposal(sample_api, "server")), "superseded-0001")

    async def approve_then_replan():  # type: ignore[no-untyped-def]
        async with QueueClient(queue.url, queue.agent_token) as client:
            agent = QueueAgent(client, poll_interval=0.05)
            approval = await submit_and_approve(agent, queue, first)
            replanned = named(first, first.proposal_id, revision=2)
            replanned = msgspec.structs.replace(replanned, title="re-planned")
            await agent.submit(msgspec.structs.replace(replanned, calls=replanned.calls[:3]))
            return approval

    approval = asyncio.run(approve_then_replan())
    with pytest.raises(NotApproved, match="not the latest"):
        asyncio.run(execute(queue, sample_api, approval))
    assert real_writes(sample_api) == []


def test_an_approval_authorizes_one_run(queue: Queue, sample_api: RunningSampleApi) -> None:
    proposal = named(asyncio.run(dry_proposal(sample_api, "server")), "once-0001")

    async def submit_approve_wait():  # type: ignore[no-untyped-def]
        async with QueueClient(queue.url, queue.agent_token) as client:
            return await submit_and_approve(QueueAgent(client, poll_interval=0.05), queue, proposal)

    approval = asyncio.run(submit_approve_wait())
    with pytest.raises(RunStopped) as refused_delete:
        asyncio.run(execute(queue, sample_api, approval))
    assert len(refused_delete.value.execution.executed) == 4
    sample_api.store.reset()
    with pytest.raises(NotApproved, match="already used"):
        asyncio.run(execute(queue, sample_api, approval))
    assert real_writes(sample_api) == []


def test_a_rejection_and_a_silence_are_both_answers_that_run_nothing(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    rejected = named(asyncio.run(dry_proposal(sample_api, "record")), "rejected-0001")
    silent = named(rejected, "silent-0001")

    async def scenario() -> None:
        async with QueueClient(queue.url, queue.agent_token) as client:
            agent = QueueAgent(client, poll_interval=0.05)
            await agent.submit(rejected)
            await agent.submit(silent)
            async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
                await reviewer.decide(
                    rejected.proposal_id, 1, plan_sha256(rejected), "reject", "t3 is still open"
                )
            with pytest.raises(ProposalRejected, match="t3 is still open"):
                await agent.wait_for_decision(rejected.proposal_id, 1, timeout=5)
            with pytest.raises(DecisionTimeout, match="still pending"):
                await agent.wait_for_decision(silent.proposal_id, 1, timeout=0.3)

    asyncio.run(scenario())
    assert received(sample_api) == []


def test_end_to_end_submit_approve_execute_verify(queue: Queue, sample_api: RunningSampleApi) -> None:
    """The agent dry-runs on the server, submits, waits; a reviewer approves through the API; the
    agent runs the approved plan for real and reports it; the queue records the execution."""
    proposal = named(asyncio.run(dry_proposal(sample_api, "server")), "e2e-merge-0001")

    async def reviewer_side() -> None:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            await first_pending(
                reviewer, lambda item: item.proposal_id == proposal.proposal_id, "e2e-merge-0001"
            )
            seen = await reviewer.get_revision(proposal.proposal_id, 1)
            assert plan_sha256(seen) == plan_sha256(proposal)
            await reviewer.decide(
                proposal.proposal_id, 1, plan_sha256(seen), "approve", "the 409 is expected"
            )

    async def agent_side():  # type: ignore[no-untyped-def]
        async with (
            QueueClient(queue.url, queue.agent_token) as client,
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
        ):
            agent = QueueAgent(client, poll_interval=0.05)
            approval = await agent.submit_and_wait(proposal, timeout=10)
            with pytest.raises(RunStopped, match="#4 delete_ticket 409") as stopped:
                await agent.execute(approval, client=api, audit=tools.AUDIT)
            return approval, stopped.value.execution, await client.get_proposal(proposal.proposal_id)

    async def both():  # type: ignore[no-untyped-def]
        _, agent_result = await asyncio.gather(reviewer_side(), agent_side())
        return agent_result

    approval, execution, record = asyncio.run(both())
    assert approval.approved_by == "test-reviewer"
    assert (execution.stop, execution.ended, execution.writes_kept) == (None, "completed", 3)
    assert record.latest.state == "executed"
    assert [event.event for event in record.history] == ["submitted", "approved", "claimed", "executed"]
    with sqlite3.connect(f"file:{queue.db}?mode=ro", uri=True) as db:
        (body,) = db.execute(
            "SELECT body FROM executions WHERE proposal_id = ?", (proposal.proposal_id,)
        ).fetchone()
    report = json.loads(body)
    assert [call["outcome"]["http_status"] for call in report["calls"]] == [201, 200, 200, 409]
    assert "audit_log" not in report or report["audit_log"] is None
    assert [call["verdict"] for call in report["audit"]["calls"]] == [
        "matched",
        "matched",
        "matched",
    ], "the refused delete is not looked for in a log of kept writes"
    assert report["plan_sha256"] == plan_sha256(proposal)
    verification = compare_execution(proposal, msgspec.convert(report["calls"], list[Call]))
    assert (verification.naive_identical, verification.matching_once_resolved, verification.planned) == (
        1,
        3,
        4,
    )
    assert [check.status for check in verification.checks][-1] == "refused"
    assert report["audit"]["unplanned_count"] == 0 and report["audit"]["complete"]


def test_a_report_whose_answer_was_lost_is_sent_again_and_stored_once(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """The queue stores the report but its answer never arrives; the agent reports again, gets the
    stored answer instead of a 409, and the queue holds exactly one execution."""
    proposal = named(asyncio.run(dry_proposal(sample_api, "server")), "lost-answer-0001")
    lossy = AnswerLostOnce()
    said: list[str] = []

    async def scenario():  # type: ignore[no-untyped-def]
        async with (
            QueueClient(queue.url, queue.agent_token) as client,
            QueueClient(queue.url, queue.agent_token, transport=lossy, retries=0) as reporting,
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
        ):
            agent = QueueAgent(client, poll_interval=0.05)
            approval = await submit_and_approve(agent, queue, proposal)
            await agent.require_current(approval)
            claim = await client.claim(approval.proposal_id, approval.revision, approval.plan_sha256)
            execution = await execute_approved(tools.reference_task, approval, client=api, audit=tools.AUDIT)
            execution.claim_id = claim.claim_id
            reporter = QueueAgent(reporting, patience=Patience(say=said.append, first_pause=0))
            answer = await reporter.report(execution)  # the lost answer is asked again, same key
            return answer, await client.get_executions(proposal.proposal_id)

    answer, executions = asyncio.run(scenario())
    assert len(lossy.sent) == 2
    assert len(said) == 2 and "is away (QueueUnreachable) while reporting the run" in said[0]
    assert answer.state == "executed"
    assert len(executions) == 1
    with sqlite3.connect(f"file:{queue.db}?mode=ro", uri=True) as db:
        (stored,) = db.execute(
            "SELECT COUNT(*) FROM executions WHERE proposal_id = ?", (proposal.proposal_id,)
        ).fetchone()
    assert stored == 1
