"""The one re-plan loop (`reviewer.agent.replan`): each plan after the first is given the latest
request for changes, never an earlier one, and the number of plans is bounded by `max_revisions`."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx
import pytest

from reviewer.agent import ChangesRequested, Feedback, Gate
from reviewer.agent.replan import Replan, next_revision, until_decided
from reviewer.queue.client import QueueClient
from reviewer.queue.refusals import NotFound
from reviewer.sample_api import tools
from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token

REASONS = ("keep t3 open", "and leave t2 alone")


def test_each_re_plan_gets_the_latest_request_and_the_plans_are_bounded() -> None:
    seen: list[tuple[Feedback | None, int]] = []
    told: list[Feedback] = []

    async def attempt(replan: Replan) -> str:
        seen.append((replan.feedback, replan.revision))
        assert len(seen) <= 3, "a plan past max_revisions"
        revision = replan.revision
        if revision <= len(REASONS):
            raise ChangesRequested("p", revision, "alice", REASONS[revision - 1])
        return "ran"

    assert asyncio.run(until_decided(attempt, Replan(3), told.append)) == "ran"
    assert seen == [
        (None, 1),
        (Feedback(REASONS[0], "alice", 1), 2),
        (Feedback(REASONS[1], "alice", 2), 3),
    ]
    assert told == [Feedback(REASONS[0], "alice", 1), Feedback(REASONS[1], "alice", 2)]

    seen.clear()
    with pytest.raises(ChangesRequested, match="and leave t2 alone"):
        asyncio.run(until_decided(attempt, Replan(2)))
    assert [revision for _, revision in seen] == [1, 2], "two plans at most, the last request raised"
    assert next_revision(None) == 1 and next_revision(Feedback("x", "a", 4)) == 5
    with pytest.raises(ValueError, match="max_revisions must be 1 or more"):
        Replan(0)


def test_gate_run_re_plans_with_the_latest_reason_through_the_queue(tmp_path: Path) -> None:
    """Against the queue's app in process: the reviewer asks for changes twice with two reasons; the
    third plan is given the second, and revision 3 is approved."""
    app = create_app(tmp_path / "q.sqlite3")
    tokens = {name: mint_token() for name in ("alice", "agent")}
    app.state.store.create_token("alice", "reviewer", hash_token(tokens["alice"]))
    app.state.store.create_token("agent", "agent", hash_token(tokens["agent"]))

    def client(name: str) -> QueueClient:
        return QueueClient("http://queue", tokens[name], transport=httpx.ASGITransport(app=app))

    seen: list[Feedback | None] = []

    async def task(feedback: Feedback | None = None) -> None:
        seen.append(feedback)
        assert len(seen) <= 3, "a plan past max_revisions"
        await tools.update_ticket(id="t1", status="closed", title=f"plan {len(seen)}")

    async def reviewer() -> None:
        async with client("alice") as alice:
            for _ in range(4000):
                try:
                    latest = (await alice.get_proposal("replanned")).latest
                except NotFound:
                    latest = None
                if latest is not None and latest.state == "pending":
                    if latest.revision <= len(REASONS):
                        reason = REASONS[latest.revision - 1]
                        await alice.decide(
                            "replanned", latest.revision, latest.plan_sha256, "request_changes", reason
                        )
                    else:
                        await alice.decide("replanned", latest.revision, latest.plan_sha256, "reject", "ok")
                        return
                await asyncio.sleep(0)
        raise AssertionError("revision 3 never came")

    async def scenario() -> None:
        async with Gate(queue=client("agent"), poll_interval=0, decision_timeout=60) as gate:
            result, _ = await asyncio.gather(
                gate.run(task, title="Close t1", proposal_id="replanned", max_revisions=3), reviewer()
            )
        assert result.submission.revision == 3
        assert result.feedback == (Feedback(REASONS[0], "alice", 1), Feedback(REASONS[1], "alice", 2))

    asyncio.run(scenario())
    assert seen == [None, Feedback(REASONS[0], "alice", 1), Feedback(REASONS[1], "alice", 2)]
