"""What the live app fetches: a poll fetches a changed proposal's latest revision only; the revision
before it (for drift) comes when the reviewer opens the proposal. One agent re-planning a large plan
many times must not make every reviewer's app download and analyse every revision on every poll."""

from __future__ import annotations

import httpx

from reviewer.queue.config import Secret
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from tests.queue_harness import body, proposal
from tests.tui.live.fake_queue import FakeQueue
from tests.tui.live.helpers import open_proposal, run, status, until


def test_the_previous_revision_is_fetched_when_opened_not_when_polled() -> None:
    fake = FakeQueue()
    fake.add("replanned-0001")
    fake.proposals["replanned-0001"].plans.append(body(proposal("replanned-0001", 2, calls=4)))
    fetched: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        if "/revisions/" in request.url.path:
            fetched.append(request.url.path.rsplit("/", 1)[-1])
        return fake.answer(request)

    async def scenario() -> None:
        app = ReviewerApp(
            QueueSource("http://queue.test", Secret("t"), transport=httpx.MockTransport(answer))
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: "answered" in status(app) and app.queue_screen.items, "the row")
            item = app.items["replanned-0001"]
            await until(pilot, lambda: 2 in item.analysed, "revision 2 analysed")
            app.poll_now()
            await until(pilot, lambda: app.queue.polls >= 2, "a second poll")
            assert fetched == ["2"], "a poll fetched more than the latest revision"
            await open_proposal(pilot, app, "replanned-0001")
            await until(pilot, lambda: 1 in item.revisions, "revision 1, fetched on opening")
            assert fetched == ["2", "1"]
            await until(pilot, lambda: item.latest_drift() is not None, "the drift against revision 1")

    run(scenario)
