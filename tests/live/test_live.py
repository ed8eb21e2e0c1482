"""Live review against the real queue service on loopback: polls, decisions, outages, lost answers."""

from __future__ import annotations

import time

from reviewer.proposal import parse_proposal
from tests.live.conftest import (
    Queue,
    decide_from_keyboard,
    open_proposal,
    run,
    shown_text,
    status,
    until,
)
from tests.service.conftest import body, proposal, unique_id


def plan(proposal_id: str, revision: int = 1, **kwargs):  # type: ignore[no-untyped-def]
    return parse_proposal(body(proposal(proposal_id, revision, **kwargs)))


def test_a_submission_appears_within_one_poll_and_is_approved_from_the_keyboard(queue: Queue) -> None:
    async def scenario() -> None:
        app = queue.app(poll_interval=0.5)
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent, queue.reviewer() as alice:
            await until(pilot, lambda: "signed in as alice (reviewer)" in status(app), "the first poll")
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            proposal_id = unique_id("live")
            submitted_at = time.monotonic()
            await agent.submit(plan(proposal_id))
            waited = await until(pilot, lambda: proposal_id in app.queue_screen.items, "the new row")
            assert waited < 0.5 + 0.5, f"the row took {waited:.2f} s with a 0.5 s poll"
            assert time.monotonic() - submitted_at < 1.5
            item = app.items[proposal_id]
            assert item.is_new and item.state == "pending" and item.proposed_by == "agent"

            await open_proposal(pilot, app, proposal_id)
            assert not item.is_new
            await decide_from_keyboard(pilot, "a", "y")
            await until(pilot, lambda: "approved" in shown_text(app, "#decision"), "the approval")
            assert "by alice" in shown_text(app, "#decision")
            state = await alice.decision_state(proposal_id)
            assert (state.state, state.decided_by) == ("approved", "alice")

    run(scenario)
