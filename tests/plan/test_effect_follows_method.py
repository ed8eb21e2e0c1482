"""A call's effect is at least what its method does: a DELETE is a delete, a POST at least a create, a
PUT or PATCH at least an update. The queue refuses a plan whose call says less; the agent library
raises the effect when it records the call, so the screen, the counts and the policies see a delete.
Policies read a write's query too (`c.query`)."""

from __future__ import annotations

import asyncio

import httpx
import msgspec
import pytest

from reviewer.agent import HttpRequest, dry_run, write_tool
from reviewer.plan.proposal import Agent, ProposalError, Target, parse_proposal, raised_effect
from reviewer.policy.file import parse_policy
from reviewer.policy.verdict import evaluate
from reviewer.reading.analysis import Analysis
from reviewer.tui.widgets.plan_view import row_flags
from tests.agent.fixtures import Queue, queue
from tests.builders import proposal_document

__all__ = ["queue"]

POLICY = """\
[default]
approvals = 1

[[rules]]
name = "any delete"
when = "plan.counts.delete > 0"
approvals = 2

[[rules]]
name = "forced"
when = 'plan.calls.exists(c, c.query.force == "true")'
reject = "no forced writes"
"""


def read_labelled_delete() -> dict:
    return proposal_document(
        [
            {
                "tool": "lookup",
                "effect": "read",
                "request": {"method": "DELETE", "path": "/v1/tickets/t2", "query": {"force": "true"}},
                "outcome": {"status": "ok", "http_status": 204},
            }
        ],
        proposal_id="read-labelled-delete",
    )


@pytest.mark.parametrize(
    ("effect", "method", "raised"),
    [
        ("read", "DELETE", "delete"),
        ("update", "delete", "delete"),
        ("other", "POST", "create"),
        ("read", "POST", "create"),
        ("update", "POST", "update"),
        ("create", "PATCH", "update"),
        ("create", "PUT", "update"),
        ("delete", "PATCH", "delete"),
        ("read", "GET", "read"),
        ("other", None, "other"),
    ],
)
def test_the_method_sets_the_least_effect(effect: str, method: str | None, raised: str) -> None:
    assert raised_effect(effect, method) == raised  # type: ignore[arg-type]


def test_a_read_labelled_delete_is_refused_by_the_format_and_by_the_queue(queue: Queue) -> None:
    """The check every reader of a plan runs names the call and what to declare; the queue answers 422
    with it and stores nothing."""
    body = msgspec.json.encode(read_labelled_delete())
    with pytest.raises(
        ProposalError, match=r"\$\.calls\[0\]\.effect: effect 'read' understates its method DELETE"
    ):
        parse_proposal(body)
    answer = httpx.post(
        f"{queue.url}/v1/proposals",
        content=body,
        headers={"Authorization": f"Bearer {queue.agent_token}", "Content-Type": "application/json"},
    )
    assert answer.status_code == 422, answer.text
    assert "understates its method DELETE" in answer.text
    listed = httpx.get(
        f"{queue.url}/v1/proposals/read-labelled-delete",
        headers={"Authorization": f"Bearer {queue.reviewer_token}"},
    )
    assert listed.status_code == 404


def test_a_tool_declared_update_that_sends_a_delete_is_recorded_counted_drawn_and_ruled_a_delete() -> None:
    """`@write_tool(effect="update")` returning a DELETE: the plan's call is a delete, the counts say
    one delete, its row is drawn `del`, and `plan.counts.delete` and `c.query` rules both match."""

    @write_tool(effect="update")
    def close_ticket(ticket: str) -> HttpRequest:
        return HttpRequest("DELETE", f"/v1/tickets/{ticket}", query={"force": "true"})

    async def plan():  # type: ignore[no-untyped-def]
        async with dry_run("record") as recording:
            await close_ticket(ticket="t2")
        return recording.to_proposal(
            proposal_id="update-that-deletes",
            title="close t2",
            agent=Agent(name="test-agent"),
            target=Target(api="tickets", base_url="https://api.example/v1"),
        )

    proposal = parse_proposal(msgspec.json.encode(asyncio.run(plan())))  # what the queue accepts
    (call,) = proposal.calls
    assert (call.effect, call.request.method if call.request else None) == ("delete", "DELETE")
    analysis = Analysis(proposal)
    assert analysis.ratios.deletes == 1
    assert ("del", "plan-view--refusal") in row_flags(analysis.row(0))
    verdict = evaluate(parse_policy(POLICY), proposal)
    assert [match.rule for match in verdict.matched] == ["any delete", "forced"]
    assert verdict.outcome == "reject" and verdict.reason == "no forced writes"
