"""`PlanSession`: a plan built across requests, against the real queue and the real sample API."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from reviewer.agent import Gate
from reviewer.agent.session import PlanSession
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.helpers import received, reviewer_decides


def test_only_the_session_that_submitted_a_plan_runs_it_and_only_once(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """Another session (a restarted gate) sees the approval but runs nothing; the submitting session
    runs the plan once, and asking again answers the stored result."""

    def gate() -> Gate:
        return Gate(api=sample_api.base_url, queue=queue.url, token=queue.agent_token, audit=tools.AUDIT)

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with gate() as first_gate, gate() as other_gate:
            first, other = PlanSession(first_gate), PlanSession(other_gate)
            created = await first.call(tools.create_ticket.spec, {"title": "Printer on fire"})
            await first.call(
                tools.update_ticket.spec, {"id": "t1", "status": "closed", "mergedInto": created["id"]}
            )
            submitted = await first.submit("Merge t1")
            await reviewer_decides(queue.url, queue.reviewer_token, submitted["proposal_id"], "approve")
            elsewhere = await other.status(submitted["proposal_id"])
            assert [entry for entry in received(sample_api) if not entry["query"]] == []
            ran = await first.status(submitted["proposal_id"])
            again = await first.status(submitted["proposal_id"])
            return elsewhere, ran, again

    elsewhere, ran, again = asyncio.run(scenario())
    assert elsewhere["state"] == "approved" and "runs nothing" in elsewhere["note"]
    assert ran["state"] == "executed" and ran["ended"] == "completed" and again == ran
    assert [call["result"]["id"] for call in ran["calls"]] == ["tk-4", "t1"]
    assert [(entry["method"], entry["path"]) for entry in received(sample_api) if not entry["query"]] == [
        ("POST", "/v1/tickets"),
        ("PATCH", "/v1/tickets/t1"),
    ]


def test_changes_requested_ends_the_plan_and_the_next_one_is_revision_2_of_the_same_proposal(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """What `mcp-gate`'s status answers: the state and the reviewer's reason, so the host's model can
    re-plan; the plan it submits next is the next revision of the same proposal."""

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
        async with Gate(api=sample_api.base_url, queue=queue.url, token=queue.agent_token) as gate:
            session = PlanSession(gate)
            await session.call(tools.update_ticket.spec, {"id": "t1", "status": "closed"})
            await session.call(tools.delete_ticket.spec, {"id": "t3"})
            first = await session.submit("Close t1, delete t3")
            await reviewer_decides(
                queue.url, queue.reviewer_token, first["proposal_id"], "request_changes", "keep t3 open"
            )
            asked = await session.status(first["proposal_id"])
            await session.call(tools.update_ticket.spec, {"id": "t1", "status": "closed"})
            second = await session.submit("Close t1")
            return first, asked, second

    first, asked, second = asyncio.run(scenario())
    assert (asked["state"], asked["decided_by"], asked["reason"]) == (
        "changes_requested",
        "test-reviewer",
        "keep t3 open",
    )
    assert "revision 2 of this proposal" in asked["note"]
    assert (second["proposal_id"], second["revision"], second["state"]) == (
        first["proposal_id"],
        2,
        "pending",
    )
    assert received(sample_api) == []


def test_a_plan_whose_audit_log_failed_at_its_first_call_is_still_read_for_its_window(queue: Queue) -> None:
    """The log is away at the first call (a 503): the call is refused and nothing is recorded; at the
    next one the log answers, the plan starts then, and its window is read when it is submitted: the
    other client's write in it is on the plan."""
    from datetime import UTC, datetime

    from reviewer.agent import AuditUnavailable
    from reviewer.queue.client import QueueClient

    answers = [httpx.Response(503)]

    def api(request: httpx.Request) -> httpx.Response:
        if answers:
            return answers.pop()
        at = datetime.now(UTC).isoformat()
        write = {"at": at, "method": "DELETE", "path": "/v1/tickets/t9", "status": 204, "request_id": "x"}
        return httpx.Response(200, json={"entries": [write]})

    async def scenario() -> Any:
        client = httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(api))
        async with Gate(api=client, queue=queue.url, token=queue.agent_token, audit=tools.AUDIT) as gate:
            session = PlanSession(gate)
            with pytest.raises(AuditUnavailable, match="answered 503"):
                await session.call(tools.update_ticket.spec, {"id": "t1", "status": "closed"})
            await session.call(tools.update_ticket.spec, {"id": "t1", "status": "closed"})
            submitted = await session.submit("Close t1")
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            return await reviewer.get_revision(submitted["proposal_id"], submitted["revision"])

    proposal = asyncio.run(scenario())
    assert [call.seq for call in proposal.calls] == [1]
    assert proposal.dry_run.writes_around == 1
