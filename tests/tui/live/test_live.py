"""Live review against the real queue service on loopback: polls, decisions, outages, lost answers."""

from __future__ import annotations

import asyncio
import subprocess

import httpx
import msgspec

from reviewer.plan.proposal import parse_proposal
from reviewer.tui.model.queue_source import DEFAULT_LIST_WAIT
from tests.queue_harness import body, proposal, reviewer_command, unique_id
from tests.tui.live.helpers import (
    Queue,
    decide_from_keyboard,
    open_proposal,
    run,
    shown_text,
    status,
    until,
)


def plan(proposal_id: str, revision: int = 1, **kwargs):  # type: ignore[no-untyped-def]
    return parse_proposal(body(proposal(proposal_id, revision, **kwargs)))


def test_a_submission_appears_within_one_poll_and_is_approved_from_the_keyboard(queue: Queue) -> None:
    """Counted in polls, not seconds (a loaded machine stretches seconds): the poll in flight when the
    agent submits may have listed the queue before it, so the row is there by the next poll at the
    latest."""

    async def scenario() -> None:
        app = queue.app(poll_interval=0.5)
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent, queue.reviewer() as alice:
            await until(pilot, lambda: "signed in as alice (reviewer)" in status(app), "the first poll")
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            assert app.queue is not None
            proposal_id = unique_id("live")
            await agent.submit(plan(proposal_id))
            # Counted once the queue has it: a poll started between reading the count and the
            # submission's commit may list the queue without it, as the one in flight may.
            polls_at_submission = app.queue.polls
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the new row")
            polls = app.queue.polls - polls_at_submission
            assert polls <= 1, f"the row was listed {polls} polls after the submission"
            item = app.items[proposal_id]
            assert item.is_new and item.state == "pending" and item.proposed_by == "agent"

            await open_proposal(pilot, app, proposal_id)
            assert not item.is_new
            await decide_from_keyboard(pilot, "a", "y")
            await until(pilot, lambda: "approved" in shown_text(app, "#decision"), "the approval")
            assert "approved by alice" in shown_text(app, "#decision")
            state = await alice.decision_state(proposal_id)
            assert (state.state, state.decided_by) == ("approved", "alice")

    run(scenario)


def test_a_stale_decision_says_the_agent_replanned_and_opens_the_new_revision(queue: Queue) -> None:
    async def scenario() -> None:
        app = queue.app(poll_interval=60)  # no poll between open and approve: the app still shows rev 1
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent:
            proposal_id = unique_id("stale")
            await agent.submit(plan(proposal_id))
            app.poll_now()
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the row")
            await open_proposal(pilot, app, proposal_id)
            await agent.submit(plan(proposal_id, 2, calls=3))
            await decide_from_keyboard(pilot, "a", "y")
            await until(pilot, lambda: getattr(app.screen, "revision", 0) == 2, "revision 2 opened")
            await pilot.pause()
            assert "the agent re-planned: revision 2 is waiting" in shown_text(app, "#decision")
            assert app.items[proposal_id].state == "pending"

    run(scenario)


def test_a_proposal_decided_by_another_reviewer_says_by_whom(queue: Queue) -> None:
    async def scenario() -> None:
        app = queue.app(poll_interval=60)
        bob = queue.reviewer("bob")
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent, bob:
            proposal_id = unique_id("race")
            answer = await agent.submit(plan(proposal_id))
            app.poll_now()
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the row")
            await open_proposal(pilot, app, proposal_id)
            await bob.decide(proposal_id, 1, answer.plan_sha256, "reject", "not today")
            await decide_from_keyboard(pilot, "a", "y")
            await until(pilot, lambda: "already decided by bob" in shown_text(app, "#decision"), "the 409")

    run(scenario)


def test_a_new_proposal_reaches_an_idle_app_through_its_long_poll(queue: Queue) -> None:
    """The app's poll after its first answer is held by the queue until something changes: with a
    poll interval of an hour, only that held poll can bring the new row."""

    async def scenario() -> None:
        app = queue.app(poll_interval=3600, list_wait=DEFAULT_LIST_WAIT)
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent:
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            await until(pilot, lambda: app.queue.polls == 2, "the second poll, held by the queue")
            proposal_id = unique_id("held")
            await agent.submit(plan(proposal_id))
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the row")
            assert app.queue.polls_not_modified == 0  # the second poll was held, not answered 304

    run(scenario)


def test_the_queue_stopped_and_restarted_the_app_says_so_and_recovers(queue: Queue) -> None:
    async def scenario() -> None:
        app = queue.app(poll_interval=0.2, retry_base=0.2, max_backoff=0.8)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            await asyncio.to_thread(queue.service.stop)
            await until(pilot, lambda: "queue unreachable, retrying in" in status(app), "the outage")
            assert app.queue.backoff.failures >= 1
            await asyncio.to_thread(queue.service.start)
            await until(pilot, lambda: "queue answered" in status(app), "the recovery", timeout=15)
            assert app.queue.backoff.failures == 0
            async with queue.agent() as agent:
                proposal_id = unique_id("after")
                await agent.submit(plan(proposal_id))
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "a row after the restart")

    run(scenario)


class DropFirstDecisionAnswer(httpx.AsyncBaseTransport):
    """Sends every request for real, but loses the first decision's answer after the queue committed it."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.decision_keys: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        response = await self.inner.handle_async_request(request)
        if request.method == "POST" and request.url.path.endswith("/decisions"):
            self.decision_keys.append(request.headers["Idempotency-Key"])
            if len(self.decision_keys) == 1:
                await response.aread()
                await response.aclose()
                raise httpx.ReadError("connection dropped after the queue answered", request=request)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_a_dropped_answer_is_retried_with_the_same_key_and_decides_once(queue: Queue) -> None:
    async def scenario() -> None:
        transport = DropFirstDecisionAnswer()
        app = queue.app(poll_interval=60, transport=transport)
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent, queue.reviewer() as alice:
            proposal_id = unique_id("dropped")
            await agent.submit(plan(proposal_id))
            app.poll_now()
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the row")
            await open_proposal(pilot, app, proposal_id)
            await decide_from_keyboard(pilot, "a", "y")
            await until(pilot, lambda: "approved by alice" in shown_text(app, "#decision"), "the approval")
            assert len(transport.decision_keys) == 2 and len(set(transport.decision_keys)) == 1
            record = await alice.get_proposal(proposal_id)
            assert [event.event for event in record.history] == ["submitted", "approved"]

    run(scenario)


def test_a_revoked_token_stops_polling_and_says_to_log_in(queue: Queue) -> None:
    name = unique_id("carol")
    queue.tokens[name] = queue.service.token(name, "reviewer")

    async def scenario() -> None:
        app = queue.app(name, poll_interval=0.2)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            revoked = await asyncio.to_thread(
                subprocess.run,
                reviewer_command("token", "revoke", "--db", str(queue.service.db), name),
                capture_output=True,
                check=True,
            )
            assert revoked.returncode == 0
            await until(pilot, lambda: "run `reviewer login --queue" in status(app), "the 401")
            assert "revoked, or not one of this queue" in status(app)

    run(scenario)


async def executed_proposal(queue: Queue, proposal_id: str) -> int:
    """Submit, approve, claim and report a real run of `proposal_id` whose last call changed at run
    time; its number of calls."""
    from reviewer.queue.messages import ExecutionReport

    async with queue.agent() as agent, queue.reviewer() as alice:
        approved_plan = plan(proposal_id)
        answer = await agent.submit(approved_plan)
        await alice.decide(proposal_id, 1, answer.plan_sha256, "approve")
        real_calls = [msgspec.to_builtins(call) for call in approved_plan.calls]
        real_calls[-1]["args"] = {**(real_calls[-1].get("args") or {}), "note": "changed at run time"}
        claim = await agent.claim(proposal_id, 1, answer.plan_sha256)
        await agent.report_execution(
            proposal_id,
            ExecutionReport(
                revision=1, plan_sha256=answer.plan_sha256, claim_id=claim.claim_id, calls=real_calls
            ),
        )
    return len(real_calls)


async def verify_with_v(pilot, app, calls: int) -> None:  # type: ignore[no-untyped-def]
    """`v` opens the verification: every call the same but the last, changed at run time."""
    from reviewer.tui.screens.verification import VerificationScreen

    await until(pilot, lambda: 1 in app.screen.item.verified, "the plan's digest checked")
    await pilot.press("v")
    await until(pilot, lambda: isinstance(app.screen, VerificationScreen), "the verification")
    screen = app.screen
    await until(pilot, lambda: screen.verification is not None, "the comparison")
    verification = screen.verification
    assert verification.count("same") == calls - 1
    assert verification.count("different") == 1
    assert [change.path for change in verification.checks[-1].fields] == ["args.note"]


def test_an_executed_proposal_is_verified_from_the_queues_report(queue: Queue) -> None:
    """The agent reports its real run; the app fetches it when the proposal is opened (not on every
    poll) and `v` lines it up with the plan."""

    async def scenario() -> None:
        app = queue.app(poll_interval=60)
        async with app.run_test(size=(100, 30)) as pilot:
            proposal_id = unique_id("executed")
            calls = await executed_proposal(queue, proposal_id)
            app.poll_now()
            executed = lambda: getattr(app.items.get(proposal_id), "state", "") == "executed"  # noqa: E731
            await until(pilot, executed, "the executed state")
            assert not app.items[proposal_id].executions, "fetched before anyone opened the proposal"
            await open_proposal(pilot, app, proposal_id)
            await until(pilot, lambda: 1 in app.items[proposal_id].executions, "the report")
            await verify_with_v(pilot, app, calls)

    run(scenario)


def test_the_deep_link_to_an_executed_proposal_fetches_its_run(queue: Queue) -> None:
    """`reviewer review ID` on an executed proposal opens its review and fetches the real run's
    report, as opening it from the list does (it stayed "being fetched" until reopened)."""
    from reviewer.queue.config import Secret
    from reviewer.tui.app import ReviewerApp
    from reviewer.tui.model.queue_source import QueueSource
    from reviewer.tui.screens.review import ReviewScreen

    async def scenario() -> None:
        proposal_id = unique_id("deep")
        calls = await executed_proposal(queue, proposal_id)
        source = QueueSource(queue.url, Secret(queue.tokens["alice"]), poll_interval=60)
        app = ReviewerApp(source, open_first=proposal_id)
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, ReviewScreen), "the review screen")
            await until(pilot, lambda: 1 in app.items[proposal_id].executions, "the report, unasked")
            await verify_with_v(pilot, app, calls)

    run(scenario)


def test_a_claimed_run_shows_as_running_then_executed_in_the_list_and_the_chrome(queue: Queue) -> None:
    """The states a reviewer sees while an approved plan runs: claimed by the agent, then executed."""
    from reviewer.queue.messages import ExecutionReport

    async def scenario() -> None:
        app = queue.app(poll_interval=60)
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent, queue.reviewer() as alice:
            proposal_id = unique_id("claimed")
            answer = await agent.submit(plan(proposal_id))
            await alice.decide(proposal_id, 1, answer.plan_sha256, "approve")
            claim = await agent.claim(proposal_id, 1, answer.plan_sha256)
            app.poll_now()
            await until(
                pilot, lambda: getattr(app.items.get(proposal_id), "state", "") == "claimed", "claimed"
            )
            item = app.items[proposal_id]
            assert item.state_label == "claimed"
            assert item.state_words() == "claimed by agent (running)"
            await open_proposal(pilot, app, proposal_id)
            assert "claimed by agent (running)" in shown_text(app, "#chrome")
            report = ExecutionReport(
                revision=1,
                plan_sha256=answer.plan_sha256,
                claim_id=claim.claim_id,
                ended="completed",
                calls=[],
            )
            await agent.report_execution(proposal_id, report)
            app.poll_now()
            await until(pilot, lambda: app.items[proposal_id].state == "executed", "executed")
            # the run is named by whoever reported it (the agent), never by the approver
            assert app.items[proposal_id].state_words() == "executed by agent, approved by alice"

    run(scenario)


def test_an_executors_refusal_is_in_the_review_screens_chrome_with_its_words_inert(queue: Queue) -> None:
    """An approval its executor refused (a trail that forked) stays approved; the chrome says who
    refused it, why, and its words with every control character escaped and its markup as text."""

    async def scenario() -> None:
        app = queue.app(poll_interval=60)
        async with app.run_test(size=(160, 30)) as pilot, queue.agent() as agent, queue.reviewer() as alice:
            proposal_id = unique_id("refused")
            answer = await agent.submit(plan(proposal_id))
            await alice.decide(proposal_id, 1, answer.plan_sha256, "approve")
            words = "TrailRefused: \x1b[2J[bold red]forked[/] \u202eok"
            await agent.report_refusal(proposal_id, 1, answer.plan_sha256, "trail", words)
            app.poll_now()
            await until(pilot, lambda: bool(getattr(app.items.get(proposal_id), "refusals", [])), "refused")
            item = app.items[proposal_id]
            assert item.state == "approved"
            assert item.state_words() == "approved by alice · refused by executor agent"
            await open_proposal(pilot, app, proposal_id)
            assert "approved by alice · refused by executor agent" in shown_text(app, "#chrome")
            alarms = shown_text(app, "#alarms")
            assert alarms.startswith(
                "refused by executor agent (trail): TrailRefused: \\x1b[2J[bold red]forked[/] \\u202eok"
            ), alarms
            assert "\x1b" not in alarms and "\u202e" not in alarms

    run(scenario)


def test_a_claim_past_its_lease_without_a_report_is_an_unknown_outcome(tmp_path_factory) -> None:  # type: ignore[no-untyped-def]
    """A run that claimed the approval and never reported (a crashed runner) may have written: the
    list says `unknown`, the chrome says why, and it is not approvable or re-runnable."""
    from tests.queue_harness import start_service
    from tests.tui.live.helpers import Queue as LiveQueue

    service = start_service(tmp_path_factory.mktemp("lease"), "--claim-lease", "0")
    tokens = {name: service.token(name, role) for name, role in (("alice", "reviewer"), ("agent", "agent"))}
    lapsed = LiveQueue(service, tokens)

    async def scenario() -> None:
        app = lapsed.app(poll_interval=60)
        async with app.run_test(size=(100, 30)) as pilot, lapsed.agent() as agent, lapsed.reviewer() as alice:
            proposal_id = unique_id("lapsed")
            answer = await agent.submit(plan(proposal_id))
            await alice.decide(proposal_id, 1, answer.plan_sha256, "approve")
            await agent.claim(proposal_id, 1, answer.plan_sha256)
            app.poll_now()
            await until(
                pilot, lambda: getattr(app.items.get(proposal_id), "state", "") == "claimed", "claimed"
            )
            item = app.items[proposal_id]
            assert item.state_label == "unknown"
            assert "outcome unknown" in item.state_words()

    try:
        run(scenario)
    finally:
        service.stop()


def test_c_asks_for_changes_with_a_required_reason_and_the_list_says_changes(queue: Queue) -> None:
    """`c` opens the request-changes dialog (enter on an empty field sends nothing); the reason typed is
    sent through the same deciding path as `x`, and the queue list's state column says `changes`."""
    from reviewer.tui.screens.dialogs import RequestChangesScreen

    async def scenario() -> None:
        app = queue.app(poll_interval=0.5)
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent, queue.reviewer() as alice:
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            proposal_id = unique_id("changes")
            await agent.submit(plan(proposal_id))
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the new row")
            await open_proposal(pilot, app, proposal_id)
            await pilot.press("c", "enter")
            await pilot.pause()
            assert isinstance(app.screen, RequestChangesScreen), "an empty reason was accepted"
            assert (await alice.decision_state(proposal_id)).state == "pending"
            await pilot.press(*"keep t3 open", "enter")
            await until(pilot, lambda: "changes requested" in shown_text(app, "#decision"), "the answer")
            assert "changes requested by alice: revision 1" in shown_text(app, "#decision")
            state = await alice.decision_state(proposal_id)
            assert (state.state, state.decided_by, state.reason) == (
                "changes_requested",
                "alice",
                "keep t3 open",
            )
            item = app.items[proposal_id]
            await until(pilot, lambda: item.state == "changes_requested", "the next poll")
            assert item.state_label == "changes"
            assert item.state_words() == "changes requested by alice: keep t3 open"

    run(scenario)


def test_the_drift_of_the_next_revision_shows_the_changes_asked_for_beside_it(queue: Queue) -> None:
    """Revision 2 answers a request for changes on revision 1: `d` shows what changed (one call fewer)
    with "rev 1: changes requested by alice: keep t3 open" under the summary."""

    async def scenario() -> None:
        app = queue.app(poll_interval=0.5)
        async with app.run_test(size=(100, 30)) as pilot, queue.agent() as agent, queue.reviewer() as alice:
            await until(pilot, lambda: "queue answered" in status(app), "the first answer")
            proposal_id = unique_id("drift")
            first = await agent.submit(plan(proposal_id, calls=3))
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the new row")
            await open_proposal(pilot, app, proposal_id)
            await alice.decide(proposal_id, 1, first.plan_sha256, "request_changes", "keep t3 open")
            await agent.submit(plan(proposal_id, 2, calls=2))
            item = app.items[proposal_id]
            await until(pilot, lambda: item.state == "pending" and max(item.revisions) == 2, "revision 2")
            await pilot.press("d")
            await until(pilot, lambda: "removed" in shown_text(app, "#drift-summary"), "the drift")
            assert "rev 1:" in shown_text(app, "#drift-asked-revision")
            assert "changes requested by alice: keep t3 open" in shown_text(app, "#drift-asked-reason")

    run(scenario)
