"""The live queue from one request a page: when the queue sends each row with its reading of the plan
(counts, alarms, money, read once at submission), the app lists every pending proposal from the
list alone, and fetches a proposal's record and plan when the reviewer opens it. A queue that sends
no reading is fetched row by row, as before (`test_fetching`)."""

from __future__ import annotations

import httpx

from reviewer.queue.config import Secret
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from reviewer.tui.screens.queue import queue_row
from tests.tui.live.fake_queue import FakeQueue
from tests.tui.live.helpers import open_proposal, run, status, until


def test_thirty_pending_are_listed_from_the_list_alone_and_one_is_fetched_when_opened() -> None:
    fake = FakeQueue(reads_plans=True)
    for number in range(30):
        fake.add(f"listed-{number:04d}", calls=3 + number % 2)
    asked: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        asked.append(request.url.path)
        return fake.answer(request)

    async def scenario() -> None:
        app = ReviewerApp(
            QueueSource("http://queue.test", Secret("t"), transport=httpx.MockTransport(answer))
        )
        async with app.run_test(size=(100, 30)) as pilot:
            await until(pilot, lambda: len(app.queue_screen.items) == 30, "thirty rows")
            await until(pilot, lambda: "answered" in status(app), "the poll answered")
            assert set(asked) == {"/v1/whoami", "/v1/proposals"}, "a row was fetched on its own"
            item = app.items["listed-0001"]
            assert not item.revisions
            cells = [cell.plain for cell in queue_row(item)]
            assert cells[1:] == [
                "",  # the danger: none, as the queue read the plan
                "Merge tickets",
                "staging",
                "127.0.0.1:8080",
                "deskline-agent",
                "1",
                "4",
                "0/4/0",
                "server",
                "pending",
            ]
            await open_proposal(pilot, app, "listed-0001")
            assert 1 in item.revisions and item.latest.proposal_id == "listed-0001"
            fetched = {path for path in asked if path not in ("/v1/whoami", "/v1/proposals")}
            assert fetched == {"/v1/proposals/listed-0001", "/v1/proposals/listed-0001/revisions/1"}

    run(scenario)


def test_the_age_column_counts_on_and_keeps_every_rows_reading() -> None:
    """Every 30 s the age cells are written again, and nothing else: the rows' readings (their grades,
    cells and searched words) stay as they were read, so a large queue is not read again."""
    from datetime import UTC, datetime, timedelta

    fake = FakeQueue(reads_plans=True)
    for number in range(5):
        fake.add(f"aged-{number:04d}", calls=3)
    moment = [datetime.now(UTC)]
    source = QueueSource("http://queue.test", Secret("t"), transport=httpx.MockTransport(fake.answer))
    source.now = lambda: moment[0]

    async def scenario() -> None:
        app = ReviewerApp(source)
        async with app.run_test(size=(120, 30)) as pilot:
            await until(pilot, lambda: len(app.queue_screen.items) == 5, "five rows")
            screen = app.queue_screen
            readings = {key: screen.read(item) for key, item in screen.items.items()}
            table = screen.query_one("#queue")
            before = table.get_cell("aged-0001", "age").plain  # type: ignore[attr-defined]
            moment[0] += timedelta(days=30)
            screen.refresh_ages()
            await pilot.pause()
            after = table.get_cell("aged-0001", "age").plain  # type: ignore[attr-defined]
            assert after.endswith("d") and int(after[:-1]) == int(before[:-1]) + 30
            assert all(screen.read(item) is readings[key] for key, item in screen.items.items())

    run(scenario)
