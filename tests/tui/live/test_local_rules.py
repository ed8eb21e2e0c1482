"""What the app refuses before asking the queue: approving your own proposal, or a plan hashing otherwise."""

from __future__ import annotations

import httpx

from reviewer.queue.config import Secret
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from reviewer.tui.screens.dialogs import ConfirmScreen
from tests.tui.live.fake_queue import FakeQueue
from tests.tui.live.helpers import open_proposal, run, shown_text, status, until


def test_your_own_proposal_is_marked_and_a_refuses_locally() -> None:
    fake = FakeQueue()
    fake.add("alice-own-0001", proposed_by="alice")
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if request.method == "POST":
            sent.append(request.url.path)
        return fake.answer(request)

    async def scenario() -> None:
        app = ReviewerApp(
            QueueSource("http://queue.test", Secret("t"), transport=httpx.MockTransport(answer))
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "answered" in status(app) and app.queue_screen.items, "the row")
            assert app.items["alice-own-0001"].mine
            await open_proposal(pilot, app, "alice-own-0001")
            await pilot.press("a")
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            assert "you proposed this" in shown_text(app, "#decision")
        assert sent == []

    run(scenario)


def test_a_plan_that_does_not_hash_to_the_queues_digest_is_flagged_and_not_approvable() -> None:
    fake = FakeQueue()
    fake.add("tampered-0001")
    honest = fake.answer

    def tampered(request: httpx.Request) -> httpx.Response:
        response = honest(request)
        if request.url.path.endswith("/revisions/1"):
            return httpx.Response(200, content=response.content.replace(b'"t1"', b'"t9"'))
        return response

    async def scenario() -> None:
        app = ReviewerApp(
            QueueSource("http://queue.test", Secret("t"), transport=httpx.MockTransport(tampered))
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "answered" in status(app) and app.queue_screen.items, "the row")
            item = app.items["tampered-0001"]
            assert item.local_digests and item.digests[1] == fake.proposals["tampered-0001"].digest(1)
            await open_proposal(pilot, app, "tampered-0001")
            await pilot.pause()
            assert "DIGEST MISMATCH" in shown_text(app, "#alarms")
            await pilot.press("a")
            await pilot.pause()
            assert not isinstance(app.screen, ConfirmScreen)
            assert "does not hash to the queue's digest" in shown_text(app, "#decision")

    run(scenario)
