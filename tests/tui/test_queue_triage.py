"""The queue at a glance and at scale: the danger column by kind and severity, `s` sorting by danger,
`/` filtering on any text of a row, the page keys, and what a phone's 50x20 keeps whole."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from textual import events
from textual.widgets import DataTable, Input

from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.sources import QueueItem
from reviewer.tui.screens.queue import FILTER_AT_ONCE, FILTER_PAUSE
from tests.builders import proposal_document
from tests.tui.contrast import screen_segments
from tests.tui.helpers import SAMPLES, wait_until_loaded

pytestmark = pytest.mark.anyio


def column(app: ReviewerApp, key: str) -> list[str]:
    table = app.queue_screen.query_one("#queue", DataTable)
    index = table.get_column_index(key)
    return [str(table.get_cell_at((row, index))) for row in range(table.row_count)]


def screen_lines(app: ReviewerApp) -> list[str]:
    return ["".join(text for text, _, _ in line) for line in screen_segments(app)]


def chrome(app: ReviewerApp) -> str:
    return screen_lines(app)[0]


async def press(pilot, *keys: str) -> None:  # type: ignore[no-untyped-def]
    for key in keys:
        await pilot.press(key)
        await wait_until_loaded(pilot)


SAMPLE_GRADES = [
    "!!  money",
    "!!  outlier",
    "!!! kept",
    "!!  by fake",
    "!!  recorded",
    "!!  delete",
    "!!  unsent",
    "!!  hidden",
    "!!! delete",
]
"""The bundled samples newest first (the order of their files), each row's worst grade."""


async def test_the_samples_read_apart_and_s_sorts_them_by_danger_then_back() -> None:
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        assert column(app, "danger") == SAMPLE_GRADES
        titles = column(app, "title")
        await press(pilot, "s")
        by_danger = column(app, "danger")
        assert by_danger[:2] == ["!!! kept", "!!! delete"] and by_danger[-1] == "!!  money"
        severities = [len(grade.split()[0]) for grade in by_danger]
        assert severities == sorted(severities, reverse=True)
        assert "by danger" in chrome(app)
        await press(pilot, "s")
        assert column(app, "title") == titles and "by danger" not in chrome(app)


async def test_the_sorted_queue_keeps_the_cursor_on_its_proposal() -> None:
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await press(pilot, "end")
        kubernetes = app.queue_screen.highlighted_item()
        await press(pilot, "s")
        assert app.queue_screen.highlighted_item() is kubernetes
        assert column(app, "mark")[1].startswith("▶"), "the second most dangerous, after the kept writes"


async def test_a_proposal_that_turns_worse_while_sorted_takes_its_place_and_s_keeps_it_there() -> None:
    """The refunds, refused by the checks after the rows were sorted (as a poll's news arrives), read
    "!!! broken" and move first; `s` twice re-orders the rows in place and finds them first again."""
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await press(pilot, "s")
        refunds = app.items["billing-refunds-bulk-2000"]
        refunds.problems[refunds.latest_revision] = "a call the checks refuse"
        app.queue_screen.show_item(refunds)
        await wait_until_loaded(pilot)
        assert column(app, "danger")[0] == "!!! broken"
        await press(pilot, "s", "s")
        assert column(app, "danger")[0] == "!!! broken" and "by danger" in chrome(app)
        assert sorted(column(app, "danger")) == sorted([*SAMPLE_GRADES[1:], "!!! broken"])


async def test_slash_filters_on_any_text_of_a_row_enter_keeps_it_escape_clears_it() -> None:
    """`infra-agent` is the agent's name, in a column 80x24 has no room for: it still matches."""
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await press(pilot, "slash", *"infra-agent")
        assert column(app, "danger") == ["!!! delete"]
        assert "1 of 9 match /infra-agent" in chrome(app)
        await press(pilot, "backspace", *["backspace"] * len("infra-agent"), *"MERGE t1")
        assert len(column(app, "title")) == 3 and all(
            title.startswith("Merge t1") for title in column(app, "title")
        )
        await press(pilot, "enter")
        field = app.queue_screen.query_one("#queue-filter", Input)
        assert app.queue_screen.query_one("#queue", DataTable).has_focus and field.display
        assert len(app.screen_stack) == 1, "enter in the filter's line opens nothing"
        await press(pilot, "down", "enter")
        assert app.screen.query_one("#plan") is not None, "enter on a filtered row opens it"
        await press(pilot, "escape")
        assert len(column(app, "title")) == 3, "the filter survives a review"
        await press(pilot, "escape")
        assert len(column(app, "title")) == 9 and not field.display and "9 proposals" in chrome(app)


async def test_a_filter_on_a_danger_word_and_one_that_matches_nothing() -> None:
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await press(pilot, "slash", *"recorded")
        assert column(app, "danger") == ["!!  recorded"]
        await press(pilot, *["backspace"] * len("recorded"), *"no such words")
        assert column(app, "title") == [] and "0 of 9 match" in chrome(app)
        await press(pilot, "enter", "enter", "pagedown", "end", "s")
        assert len(app.screen_stack) == 1 and app._exception is None


def many_proposals(folder: Path, count: int) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for number in range(count):
        document = proposal_document(
            [{"tool": "update_ticket", "effect": "update", "outcome": {"status": "ok"}}],
            proposal_id=f"plan-{number:03d}",
            title=f"Plan number {number:03d}",
        )
        (folder / f"plan-{number:03d}.json").write_text(json.dumps(document))
    return folder


async def test_page_keys_move_a_page_of_rows_and_home_and_end_reach_the_ends(tmp_path: Path) -> None:
    app = ReviewerApp(many_proposals(tmp_path / "many", 60))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        table = app.queue_screen.query_one("#queue", DataTable)
        page = table.scrollable_content_region.height - 1 - 1  # less the header, less one kept in sight
        assert page >= 5
        await press(pilot, "pagedown")
        assert table.cursor_row == page
        await press(pilot, "pagedown", "pagedown")
        assert table.cursor_row == 3 * page
        assert table.scroll_offset.y > 0, "the cursor's row is in sight"
        await press(pilot, "pageup")
        assert table.cursor_row == 2 * page
        await press(pilot, "end")
        assert table.cursor_row == 59
        await press(pilot, "pagedown")
        assert table.cursor_row == 59
        await press(pilot, "home")
        assert table.cursor_row == 0
        await press(pilot, "pageup")
        assert table.cursor_row == 0


async def test_in_a_large_queue_a_word_typed_filters_once_after_the_keys_stop(tmp_path: Path) -> None:
    """Over `FILTER_AT_ONCE` proposals, five keys typed fill the table once, when the screen's clock
    says they stopped for `FILTER_PAUSE` (however long the machine took between them); a filter that
    keeps every row fills nothing; enter applies what is typed at once."""
    count = FILTER_AT_ONCE + 20
    app = ReviewerApp(many_proposals(tmp_path / "many", count))
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        screen = app.queue_screen
        now = [0.0]
        screen.clock = lambda: now[0]
        fills: list[int] = []
        fill_table = screen._fill_table

        def counted_fill(ordered: list[QueueItem] | None = None) -> None:
            fills.append(len(ordered or ()))
            fill_table(ordered)

        screen._fill_table = counted_fill  # type: ignore[method-assign]
        await press(pilot, "slash", *"r 007")
        await pilot.pause(3 * FILTER_PAUSE)
        assert len(column(app, "title")) == count and fills == [], "still typing, by the clock"
        now[0] += FILTER_PAUSE
        await pilot.pause(3 * FILTER_PAUSE)
        assert column(app, "title") == ["Plan number 007"] and len(fills) == 1
        assert f"1 of {count} match /r 007" in chrome(app)
        await press(pilot, *["backspace"] * 5, *"plan")
        now[0] += FILTER_PAUSE
        await pilot.pause(3 * FILTER_PAUSE)
        assert len(column(app, "title")) == count and len(fills) == 2
        await press(pilot, *" num", "enter")
        assert f"{count} of {count} match /plan num" in chrome(app) and len(fills) == 2
        await press(pilot, "slash", *"ber 11", "enter")
        titles = column(app, "title")
        assert len(titles) == 11 and all("11" in title for title in titles) and len(fills) == 3


async def test_at_50x20_the_worst_alarm_and_the_demo_note_stay_whole() -> None:
    """The Kubernetes plan's three deletes in production come first under the table, every word of
    them on the screen, before the real refusal; the demo's note keeps "decisions are not sent"."""
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(50, 20)) as pilot:
        await wait_until_loaded(pilot)
        await press(pilot, "end")
        text = " ".join(line.strip() for line in screen_lines(app))
        assert "!!! 3 deletes: persistent_volume_claim, namespace, persistent_volume, in production" in text
        assert "decisions are not sent" in text
        rows = [line for line in screen_lines(app)[3:10] if "…" in line]
        assert len(set(rows)) == len(rows) == 7, "seven rows, none alike"


KEY_OF = {"/": "slash"}
"""The key a terminal's character arrives as, where it is not the character itself."""


async def burst(app: ReviewerApp, pilot, keys: str) -> None:  # type: ignore[no-untyped-def]
    """`keys` as a terminal delivers them in one read: each handed on before any is handled."""
    assert app._driver is not None
    for character in keys:
        key_event = events.Key(KEY_OF.get(character, character), character)
        key_event.set_sender(app)
        app._driver.send_message(key_event)
    await wait_until_loaded(pilot)


async def test_keys_typed_in_one_burst_after_slash_all_reach_the_filter() -> None:
    """A fast typist, a paste or a slow SSH link delivers `/delete` in one read: every key after
    the slash is the filter's, none a binding of the table (`s` would sort, `j` move, `r` retry),
    and a slash in the filter's line is typed there."""
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        await burst(app, pilot, "/sjkr/delete")
        assert app.queue_screen.query_one("#queue-filter", Input).value == "sjkr/delete"
        assert app.queue_screen.order == "newest", "s reached the table: it sorted"
        await press(pilot, *["backspace"] * 3, "escape")
        assert column(app, "danger") == SAMPLE_GRADES, "the rows as they were: nothing sorted or moved"


async def test_a_sort_typed_right_behind_cursor_moves_keeps_the_row_they_reached() -> None:
    """`jjs` in one burst: the two moves reach the third row, and the sort keeps that proposal
    under the cursor (it kept the first row's, whose highlight the table had said last)."""
    app = ReviewerApp(SAMPLES)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        screen = app.queue_screen
        await press(pilot, "down", "down")
        third = screen.highlighted_item()
        await press(pilot, "home")
        await burst(app, pilot, "jjs")
        reached = screen.highlighted_item()
        assert screen.order == "danger" and third is not None and reached is not None
        assert reached.proposal_id == third.proposal_id
