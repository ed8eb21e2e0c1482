"""QueueScreen: every proposal waiting for a decision, with its counts and the marks of its alarms."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from decimal import Decimal
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import DataTable, Input, Static

from reviewer.plan.sanitize import clip, safe_text, steady_width
from reviewer.reading.danger import (
    LABEL_WIDTH,
    WORSE_IN_PRODUCTION,
    Grade,
    Severity,
    danger_order,
    grade,
    in_production,
    worst,
)
from reviewer.tui.failures import ReportsWorkerFailures
from reviewer.tui.model.sources import BrokenFile, QueueItem, shown
from reviewer.tui.palette import role_text
from reviewer.tui.screens.styled_once import StyledOnce
from reviewer.tui.widgets.cells import CURSOR_GLYPH, cell
from reviewer.tui.widgets.chrome import Chrome, KeysFooter, Part

if TYPE_CHECKING:
    from reviewer.queue.messages import ProposalSummary


@dataclass(frozen=True)
class QueueColumn:
    label: str
    key: str
    width: int
    """Cells wide; the title's width is what the others leave."""
    gives_way: int = 0
    """Order in which a narrow terminal drops the column (1 first); 0: never dropped. The columns that
    decide (the marks, the danger, the environment) never give way: the title is cut instead."""
    keeps_title: int = 0
    """With `gives_way`: the title's cells under which this column gives way (`TITLE_ROOM` if 0)."""
    grows_to: int = 0
    """On a wide terminal, the cells this column takes from a title wider than `TITLE_WIDE`."""


QUEUE_COLUMNS = (
    QueueColumn(" ", "mark", 2),
    QueueColumn("danger", "danger", LABEL_WIDTH),
    QueueColumn("proposal", "title", 0),
    QueueColumn("env", "environment", 10),
    QueueColumn("host", "host", 20, gives_way=2, grows_to=48),
    QueueColumn("agent", "agent", 14, gives_way=1),
    QueueColumn("rev", "rev", 3, gives_way=5),
    QueueColumn("calls", "calls", 5, gives_way=4),
    QueueColumn("c/u/d", "effects", 10, gives_way=7, keeps_title=10),
    QueueColumn("dry run", "via", 9, gives_way=6),
    QueueColumn("state", "state", 8, gives_way=3),
)
"""The demo's columns; `row_cells` gives one cell per column, in this order. The state column (always
"demo" unless the file is broken, which the mark says too) gives way early."""

LIVE_COLUMNS = (
    QueueColumn(" ", "mark", 3),
    QueueColumn("danger", "danger", LABEL_WIDTH),
    QueueColumn("proposal", "title", 0),
    QueueColumn("env", "environment", 10),
    QueueColumn("host", "host", 20, gives_way=1, grows_to=48),
    QueueColumn("proposed by", "proposer", 13, gives_way=5),
    QueueColumn("rev", "rev", 3, gives_way=4),
    QueueColumn("calls", "calls", 5, gives_way=2),
    QueueColumn("c/u/d", "effects", 10, gives_way=7, keeps_title=10),
    QueueColumn("dry run", "via", 9, gives_way=3),
    QueueColumn("state", "state", 8, gives_way=8, keeps_title=12),
    QueueColumn("age", "age", 4, gives_way=6),
)
"""Live: the queue's record of who proposed it instead of the agent's own name, and how long a pending
proposal has waited. Who proposed it (`you` among them) stays longer than the dry run's kind, which
the danger column words when it validated nothing. The state gives way last, on a phone's 50
columns, where the line under the table says the highlighted proposal's state."""

TITLE_WIDE = 60
"""A title this wide reads whole in most queues: cells beyond it go to the columns that grow (the
target's host, whole at 200 columns)."""
TITLE_ROOM = 16
"""Cells the title keeps before another column gives way. The c/u/d counts give way last, under 10
(a phone's 50 columns): the line under the table gives the highlighted proposal's counts."""

STATE_STYLES = {
    "pending": "bold",
    "approved": "ok",
    "claimed": "bold",
    "unknown": "danger",
    "rejected": "danger",
    "changes": "warn.strong",
    "expired": "muted",
    "executed": "info",
    "superseded": "muted",
}
"""By `QueueItem.state_label` (`superseded`: an earlier revision, `QueueItem.revision_state_words`);
`unknown` (a run that may have written and never reported) is the loudest. The state is a word, never
only a colour."""


FILTER_PAUSE = 0.15
"""Seconds the keys stop before a large queue's filter is applied: typing a word fills the table
once, not once a key."""
FILTER_AT_ONCE = 100
"""Proposals up to which the filter follows each key: their rows fill the table within a frame."""


class QueueScreen(StyledOnce, ReportsWorkerFailures, Screen[None]):
    """The first screen: one row per proposal, newest revision, newest submission first; enter opens
    its review. Live, it shows the queue's own record too: who proposed it, its state, how long a
    pending one has waited, new proposals marked until opened, yours marked "you".

    The cursor's row is told three ways, so it survives 16 colours and NO_COLOR: `▶` in the first
    column, an underline (reversed without colour) and a background."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", priority=True),
        # Before the keys after it are handed on: a word typed in one burst after `/` is the filter's.
        Binding("slash", "filter", "Filter", priority=True),
        Binding("s", "sort", "Sort"),
        Binding("up", "move(-1)", "Up", show=False, priority=True),
        Binding("down", "move(1)", "Down", show=False, priority=True),
        Binding("k", "move(-1)", "Up", show=False),  # letters: in the filter's line, they are typed
        Binding("j", "move(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False, priority=True),
        Binding("pagedown", "page(1)", "Page down", show=False, priority=True),
        Binding("home", "jump(0)", "First", show=False, priority=True),
        Binding("end", "jump(-1)", "Last", show=False, priority=True),
        Binding("escape", "clear_filter", "Clear the filter", show=False),
        Binding("r", "retry", "Retry now"),
    ]
    AUTO_FOCUS = "#queue"
    ORDERS: ClassVar[tuple[str, ...]] = ("newest", "danger")
    """`s` steps through them: newest submission first, or the worst grade first."""

    @dataclass
    class OpenRequested(Message):
        """The reviewer pressed enter on a proposal: the app opens it (live, it fetches the rest too)."""

        proposal_id: str

    def __init__(
        self,
        mode: str,
        now: Callable[[], datetime] | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        """`now` is the wall clock a pending proposal's age is measured with (live; tests fix it);
        `clock` (seconds, any origin) tells when the keys of the filter stopped."""
        super().__init__()
        self.mode = mode
        self.live = mode == "live"
        self.now = now
        self.clock = clock
        self.columns = LIVE_COLUMNS if self.live else QUEUE_COLUMNS
        self.who = mode
        """Who is signed in, once the queue said so (live); the chrome's first part."""
        self.items: dict[str, QueueItem] = {}
        self.broken: list[BrokenFile] = []
        self._columns: list[QueueColumn] = []
        self._cursor_id: str | None = None
        self._shown = False
        self.order = "newest"
        self.filter_words = ""
        """What `/` filters on (case aside): a row stays when any of its text holds it."""
        self._filter_terms: tuple[str, ...] = ()
        """`filter_words` case folded and split at spaces: each must be in a row that stays."""
        self._filter_timer: Timer | None = None
        self._typed_at = 0.0
        self._newest: list[QueueItem] | None = None
        """`items` newest first, until one of them changes (`show_item`)."""
        self._listed: list[str] = []
        """The ids of the rows in the table, in its order."""
        self._arrange_pending = False
        self._chrome_pending = False
        self._readings: dict[str, RowReading] = {}
        """Each proposal's row as read when it last changed (`show_item` forgets it): sorting and
        filtering thousands of rows reads none of them again."""

    def compose(self) -> ComposeResult:
        yield Chrome(id="chrome")
        yield Input(
            placeholder="filter: any text of a row; enter keeps it, escape clears it", id="queue-filter"
        )
        yield DataTable(id="queue", cursor_type="row", zebra_stripes=True)
        yield Static(id="queue-detail")
        yield Static(id="broken")
        yield Static(id="status")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.layout_columns(self.app.size.width)
        self.refresh_chrome()
        self._describe_highlighted()
        self._describe_broken()
        if self.mode == "demo":
            note = "demo: decisions are not sent; proposals from files"
            self.show_status(Text(note, "italic", no_wrap=True, overflow="ellipsis"))
        if self.live and self.now is not None:
            self.set_interval(30, self.refresh_ages)

    def show_status(self, status: Text) -> None:
        """The line above the footer: the demo's note, or live, who you are and when the queue answered."""
        self.query_one("#status", Static).update(status)

    def show_failure(self, words: str) -> None:
        """A failed worker of this screen, in words where the reviewer is looking (the app calls it)."""
        self.query_one("#status", Static).update(role_text(safe_text(clip(" " + words, 300)), "danger"))

    @on(events.ScreenResume)
    def refresh_rows(self) -> None:
        """Back from a review: the proposals opened meanwhile lose their "new" mark (live), and a
        drift viewed loses its Δ. The first resume, as the screen first shows, has nothing to
        refresh: every row was written as it was listed (rewriting each cell again cost about a
        twentieth of the first frame)."""
        if not self._shown:
            self._shown = True
            return
        for item in list(self.items.values()):
            self.show_item(item)

    def refresh_ages(self) -> None:
        """The age column counts on while the screen stays open: that cell alone, every row's reading
        (its grades, cells and searched words) kept, and the order untouched."""
        if not self._columns or "age" not in {column.key for column in self._columns}:
            return
        table = self.query_one("#queue", DataTable)
        for item in list(self.items.values()):
            if item.state == "pending" and item.proposal_id in table.rows:
                table.update_cell(item.proposal_id, "age", self.age_cell(item))

    def refresh_chrome(self) -> None:
        count = len(self.items)
        proposals: Part = f"{count} proposal{'s' if count != 1 else ''}"
        if self.filter_words:
            listed, words = len(self._listed), self.filter_words
            proposals = (f"{listed} of {count} match /{words}", "bold", f"{listed}/{count} /{words}")
        views = ("by danger",) if self.order == "danger" else ()
        if not self.live:
            self.query_one(Chrome).show(self.mode, proposals, *views)
            return
        items = list(self.items.values())
        pending = sum(item.state == "pending" for item in items)
        new = sum(item.is_new for item in items)
        self.query_one(Chrome).show(
            self.who,
            proposals,
            *views,
            f"{pending} pending",
            (f"{new} new", "bold") if new else f"{new} new",
        )

    def on_resize(self, event: events.Resize) -> None:
        self.layout_columns(event.size.width)

    def layout_columns(self, width: int) -> None:
        """Fit the columns to the terminal: the title takes what is left; while it would get fewer
        than `TITLE_ROOM` cells, the columns that can give way do so, least needed first."""
        visible = fit_columns(self.columns, width)
        if visible == self._columns:
            return
        self._columns = visible
        table = self.query_one("#queue", DataTable)
        table.clear(columns=True)
        for column in visible:
            table.add_column(column.label, key=column.key, width=column.width)
        self._fill_table()

    def listed(self) -> list[QueueItem]:
        """The rows the table shows: those the filter keeps, in the order chosen."""
        items = self._newest_first()
        if self._filter_terms:
            items = [item for item in items if self.read(item).matches(self._filter_terms)]
        if self.order == "danger":
            items.sort(key=lambda item: danger_order(self.read(item).grades))
        return items

    def _newest_first(self) -> list[QueueItem]:
        if self._newest is None:
            self._newest = newest_first(list(self.items.values()))
        return list(self._newest)

    def _fill_table(self, ordered: list[QueueItem] | None = None) -> None:
        """Every row again, filtered and in order (`ordered`, when the caller has it: `listed()`),
        the cursor kept on its proposal."""
        table = self.query_one("#queue", DataTable)
        cursor_id = self._cursor_id
        table.clear()
        ordered = self.listed() if ordered is None else ordered
        self._listed = [item.proposal_id for item in ordered]
        for item in ordered:
            table.add_row(*self._shown_cells(item, item.proposal_id == cursor_id), key=item.proposal_id)
        if table.row_count:
            ids = self._listed
            table.move_cursor(row=ids.index(cursor_id) if cursor_id in ids else 0)
        self.refresh_chrome()
        self._describe_highlighted()

    def _shown_cells(self, item: QueueItem, cursor: bool) -> list[Text]:
        visible = {column.key for column in self._columns}
        return [
            value
            for column, value in zip(self.columns, self.row_cells(item, cursor), strict=True)
            if column.key in visible
        ]

    def show_item(self, item: QueueItem) -> None:
        """Add or update the row of `item`, keeping the cursor where the reviewer left it; a new
        proposal takes its place by submission, newest first, also while the app runs. Before the
        table has its columns (the screen still mounting), the item waits in `items`, and its row is
        added with the columns: the first frame then shows it."""
        self.items[item.proposal_id] = item
        self._readings.pop(item.proposal_id, None)
        self._newest = None
        if not self._columns:
            return
        table = self.query_one("#queue", DataTable)
        if item.proposal_id in table.rows:
            cells = self._shown_cells(item, item.proposal_id == self._cursor_id)
            for column, value in zip(self._columns, cells, strict=True):
                table.update_cell(item.proposal_id, column.key, value)
            if self.order != "newest" or not self._still_listed(item):
                self._arrange_soon()
        elif self._filter_terms and not self.read(item).matches(self._filter_terms):
            pass  # filtered out: only the chrome's count changes
        elif self.order == "newest" and not self._filter_terms and self._goes_last(item):
            table.add_row(*self._shown_cells(item, False), key=item.proposal_id)
            self._listed.append(item.proposal_id)
        else:
            self._fill_table()  # a new row in its place at once: what the app lists, the table holds
            return
        self._refresh_chrome_soon()
        if self._cursor_id in (None, item.proposal_id):  # the line under the table says only its row
            self._describe_highlighted()

    def _goes_last(self, item: QueueItem) -> bool:
        """Whether a new row sorts after every row of the table, newest first (`newest_first`), told
        by the table's last row alone: a poll lists its rows newest first, so each new one goes
        last, and comparing it with every proposal (or sorting them) cost each of 500 rows a walk
        of the others."""
        at = item.submitted_at(item.latest_revision)
        if at is None or not self._listed:
            return True  # an undated row keeps its place in the listing, after the dated ones
        last = self.items.get(self._listed[-1])
        last_at = last.submitted_at(last.latest_revision) if last is not None else None
        return last_at is not None and last_at >= at

    def _refresh_chrome_soon(self) -> None:
        """One `refresh_chrome` after this frame, however many rows were listed in it: its counts
        read every proposal."""
        if not self._chrome_pending:
            self._chrome_pending = True
            self.call_after_refresh(self._refresh_chrome_now)

    def _refresh_chrome_now(self) -> None:
        self._chrome_pending = False
        self.refresh_chrome()

    def _arrange_soon(self) -> None:
        """One `_reorder` after this frame, however many rows changed in it: a poll or the analyses
        of many proposals re-order a sorted or filtered table once, not once per proposal (in place
        when the same rows stay, else filled again)."""
        if not self._arrange_pending:
            self._arrange_pending = True
            self.call_after_refresh(self._reorder)

    def read(self, item: QueueItem) -> RowReading:
        reading = self._readings.get(item.proposal_id)
        if reading is None:
            reading = self._readings[item.proposal_id] = RowReading.of(item)
        return reading

    def _still_listed(self, item: QueueItem) -> bool:
        """Whether a row the table shows still passes the filter (its text may have changed)."""
        return not self._filter_terms or self.read(item).matches(self._filter_terms)

    def show_broken(self, broken: BrokenFile) -> None:
        self.broken.append(broken)
        if self.is_mounted:
            self._describe_broken()

    def _describe_broken(self) -> None:
        if not self.broken:
            return
        text = role_text(f"{len(self.broken)} file(s) could not be read:\n", "danger")
        for entry in self.broken[-5:]:
            text.append(safe_text(clip(entry.name, 60)), "bold")
            text.append(f"  {safe_text(clip(entry.problem, 200))}\n")
        self.query_one("#broken", Static).update(text)

    @on(DataTable.RowHighlighted, "#queue")
    def _describe_highlighted(self) -> None:
        item = self.highlighted_item()
        self._move_cursor_mark(item.proposal_id if item else None)
        self.query_one("#queue-detail", Static).update(self.describe_item(item) if item else "")

    def _move_cursor_mark(self, proposal_id: str | None) -> None:
        """`▶` follows the cursor: off the row it left, onto the row it reached."""
        previous, self._cursor_id = self._cursor_id, proposal_id
        if previous == proposal_id:
            return
        table = self.query_one("#queue", DataTable)
        for row_id in (previous, proposal_id):
            if row_id is not None and row_id in table.rows and row_id in self.items:
                mark = self.row_cells(self.items[row_id], row_id == proposal_id)[0]
                table.update_cell(row_id, "mark", mark)

    def highlighted_item(self) -> QueueItem | None:
        table = self.query_one("#queue", DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return self.items.get(str(row_key.value))

    def row_cells(self, item: QueueItem, cursor: bool = False) -> tuple[Text, ...]:
        """One cell per column of `self.columns`; the first holds the marks (`▶` on the cursor's row)."""
        base = self.read(item).cells
        mark = Text(CURSOR_GLYPH if cursor else " ", "bold")
        if not self.live:
            mark.append_text(base[0])
            return (mark, *base[1:])
        mark.append("•" if item.is_new else " ", "bold")
        mark.append_text(base[0])
        proposer = Text("you", "bold reverse") if item.mine else cell(item.proposed_by, 13)
        state = Text(item.state_label, STATE_STYLES.get(item.state_label, ""))
        return (mark, *base[1:5], proposer, *base[6:10], state, self.age_cell(item))

    def age_cell(self, item: QueueItem) -> Text:
        """How long the latest revision has waited, while it waits: 45s, 12m, 3h, 2d."""
        submitted = item.submitted_at(item.latest_revision) if self.now else None
        if self.now is None or submitted is None or item.state != "pending":
            return Text("")
        return Text(age_words(self.now() - submitted), justify="right")

    def describe_item(self, item: QueueItem) -> Text:
        text = describe(item)
        if self.live:
            text.append_text(describe_record(item))
        return text

    def action_move(self, step: int) -> None:
        table = self.query_one("#queue", DataTable)
        if table.row_count:
            self._cursor_to(min(max(table.cursor_row + step, 0), table.row_count - 1))

    def action_jump(self, row: int) -> None:
        table = self.query_one("#queue", DataTable)
        if table.row_count:
            self._cursor_to(row if row >= 0 else table.row_count - 1)

    def _cursor_to(self, row: int) -> None:
        """The cursor on `row`, and the screen told now which proposal it is on: a key right behind
        (`s` in `jjs`, typed in one burst) re-orders around that proposal, not the one the table's
        highlight message, still on its way, would name."""
        self.query_one("#queue", DataTable).move_cursor(row=row)
        self._describe_highlighted()

    def action_page(self, pages: int) -> None:
        """A page of rows up or down: as many as the table shows at once, less one kept in sight."""
        table = self.query_one("#queue", DataTable)
        rows = table.scrollable_content_region.height - (1 if table.show_header else 0)
        self.action_move(pages * max(1, rows - 1))

    def action_sort(self) -> None:
        """The next order: newest first, or the most dangerous first (ties newest first)."""
        self.order = self.ORDERS[(self.ORDERS.index(self.order) + 1) % len(self.ORDERS)]
        self._reorder()

    def _reorder(self) -> None:
        """The rows the table holds, in the order chosen, moved in place (`DataTable.sort`) rather
        than added again: 3,000 rows re-added cost about a second. A row is known by its title cell,
        the very object its reading holds; if any row's cell is not its reading's (none should be),
        the table is filled again instead."""
        self._arrange_pending = False
        table = self.query_one("#queue", DataTable)
        ordered = self.listed()
        ranks = {id(self.read(item).cells[TITLE_CELL]): rank for rank, item in enumerate(ordered)}
        if len(ranks) != table.row_count or not self._columns:
            self._fill_table()
            return
        try:
            table.sort("title", key=lambda title: ranks[id(title)])
        except KeyError:
            self._fill_table()
            return
        self._listed = [item.proposal_id for item in ordered]
        if self._cursor_id in self._listed:
            table.move_cursor(row=self._listed.index(self._cursor_id))
        self.refresh_chrome()
        self._describe_highlighted()

    def action_filter(self) -> None:
        """The filter's line, where the reviewer types; the rows follow the keys. Focused now, not
        once the keys already read are handled (`focus()` waits for them): a word typed in one burst
        after the slash is the filter's, not the table's bindings."""
        field = self.query_one("#queue-filter", Input)
        field.add_class("-shown")
        self.set_focus(field)

    @on(Input.Changed, "#queue-filter")
    def _filter_changed(self) -> None:
        """Up to `FILTER_AT_ONCE` proposals the rows follow each key; more, once the keys stop for
        `FILTER_PAUSE` (3,000 rows take about a second to fill: a word typed would wait for each
        of its letters)."""
        if len(self.items) <= FILTER_AT_ONCE:
            self.apply_filter()
            return
        self._typed_at = self.clock()
        if self._filter_timer is None:
            self._filter_timer = self.set_timer(FILTER_PAUSE, self._filter_after_pause)

    def _filter_after_pause(self) -> None:
        waited = self.clock() - self._typed_at
        if waited < FILTER_PAUSE:  # a key came since the timer was set: wait for the rest
            self._filter_timer = self.set_timer(FILTER_PAUSE - waited, self._filter_after_pause)
            return
        self.apply_filter()

    def apply_filter(self) -> None:
        """The filter's line as it stands, now (enter and escape do not wait for the pause); the
        table is filled again only when the rows it shows change."""
        if self._filter_timer is not None:
            self._filter_timer.stop()
            self._filter_timer = None
        words = self.query_one("#queue-filter", Input).value.strip()
        if words == self.filter_words:
            return
        self.filter_words, self._filter_terms = words, tuple(words.casefold().split())
        ordered = self.listed()
        if [item.proposal_id for item in ordered] == self._listed:
            self.refresh_chrome()  # the same rows in the same order: only the count's words change
            return
        self._fill_table(ordered)

    def action_clear_filter(self) -> None:
        field = self.query_one("#queue-filter", Input)
        field.remove_class("-shown")
        self.query_one("#queue", DataTable).focus()
        if field.value:
            field.value = ""
            self.apply_filter()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`r` (poll the queue now) only where there is a queue; `/` but in the filter's line; escape
        only with a filter to clear."""
        if action == "retry":
            return self.live
        if action == "filter":  # in the filter's line, a slash is typed (focused, said at once)
            return self.focused is not self.query_one("#queue-filter", Input)
        if action == "clear_filter":
            return bool(self.filter_words) or self.query_one("#queue-filter", Input).has_class("-shown")
        return True

    def action_retry(self) -> None:
        """Poll at once instead of waiting out the back-off (up to 30 s) after the queue was down."""
        poll_now = getattr(self.app, "poll_now", None)
        if poll_now is not None:
            poll_now()

    def action_open(self) -> None:
        """Enter in the filter's line keeps the filter and goes back to the rows; on a row, opens it."""
        field = self.query_one("#queue-filter", Input)
        if field.has_focus:
            self.apply_filter()
            if not field.value:
                field.remove_class("-shown")
            self.query_one("#queue", DataTable).focus()
            return
        item = self.highlighted_item()
        if item is not None:
            self.post_message(self.OpenRequested(item.proposal_id))


def fit_columns(columns: tuple[QueueColumn, ...], width: int) -> list[QueueColumn]:
    """The columns shown at `width`, the title's width filled in."""
    shown = list(columns)
    droppable = sorted((column for column in columns if column.gives_way), key=lambda c: c.gives_way)

    def title_width() -> int:
        fixed = sum(column.width for column in shown if column.key != "title")
        return width - fixed - 2 * len(shown) - 4  # cell padding, border, scrollbar

    while droppable and title_width() < (droppable[0].keeps_title or TITLE_ROOM):
        shown.remove(droppable.pop(0))
    title = max(12, title_width())
    grown = {}
    for column in shown:
        spare = title - TITLE_WIDE
        if column.grows_to and spare > 0:
            grown[column.key] = min(column.grows_to, column.width + spare)
            title -= grown[column.key] - column.width
    return [
        replace(column, width=title if column.key == "title" else grown.get(column.key, column.width))
        for column in shown
    ]


def newest_first(items: list[QueueItem]) -> list[QueueItem]:
    """By the queue's record of the latest submission, newest first; items without one (the demo's
    files) keep the order they were listed in, after those with one."""
    dated = [(item.submitted_at(item.latest_revision), position, item) for position, item in enumerate(items)]
    with_date = sorted(
        ((at, position, item) for at, position, item in dated if at is not None),
        key=lambda entry: (entry[0], -entry[1]),
        reverse=True,
    )
    return [item for *_, item in with_date] + [item for at, _, item in dated if at is None]


def age_words(age: timedelta) -> str:
    seconds = max(0, int(age.total_seconds()))
    for unit, size in (("d", 86_400), ("h", 3_600), ("m", 60)):
        if seconds >= size:
            return f"{seconds // size}{unit}"
    return f"{seconds}s"


def marks(item: QueueItem) -> Text:
    """Δ when the latest revision drifted from the one seen (until that drift was viewed)."""
    text = Text()
    drifted = item.latest_drift()
    if drifted and (drifted[0], item.latest_revision) not in item.drifts_viewed:
        text.append("Δ", "warn.strong")
    return text


SEVERITY_ROLES = {Severity.STOP: "danger", Severity.DANGER: "warn.strong", Severity.CAUTION: "warn"}
"""A grade's colour follows its count of `!`, which says the severity without colour."""


def row_grades(item: QueueItem) -> tuple[Grade, ...]:
    """The latest revision's grades, worst first (`reviewer.reading.danger`), from what the row holds:
    the analysis's alarms and figures once computed, the checks' refusal, the queue's digest and its
    policy's alarms of where the plan runs."""
    extra = [
        kind
        for kind, raised in (
            ("broken", item.latest_revision in item.problems),
            ("digest", bool(item.local_digests)),
            ("environment", bool(item.policy and item.policy.alarms)),
        )
        if raised
    ]
    if not item.revisions:  # listed from the queue's reading, not fetched yet
        reading = item.listing.reading if item.listing is not None else None
        if reading is None:
            return grade((), None, extra=extra)
        return grade(
            reading.alarm_names,
            reading.environment,
            money_out=max((total.out for total in reading.totals), default=Decimal(0)),
            destroys=reading.destructive > reading.deletes,
            via=reading.via,
            extra=extra,
        )
    environment = item.latest.target.environment
    figures = item.figures()
    if figures is None:
        return grade((), environment, extra=extra)
    ratios = figures.ratios
    return grade(
        figures.alarm_names,
        environment,
        money_out=max((total.out for total in figures.totals), default=Decimal(0)),
        destroys=ratios.destructive > ratios.deletes,
        via=item.latest.dry_run.via,
        extra=extra,
    )


def danger_cell(grades: tuple[Grade, ...]) -> Text:
    """The worst grade: `!!! kept`; empty for a plan with none."""
    first = worst(grades)
    return role_text(first.label(), SEVERITY_ROLES[first.severity]) if first else Text("")


def compact(count: int) -> str:
    """A count that fits a narrow column whole: 999, 1.2k, 100k, 1.5M. Never cut, never a bare
    "100,00"; the line under the table gives the exact figures."""
    if count < 1_000:
        return str(count)
    for limit, suffix in ((1_000, "k"), (1_000_000, "M"), (1_000_000_000, "G")):
        scaled = count / limit
        figure = f"{scaled:.1f}".rstrip("0").rstrip(".") if scaled < 9.95 else f"{scaled:.0f}"
        if float(figure) < 1_000 or suffix == "G":
            break
    return figure + suffix


def queue_row(item: QueueItem, grades: tuple[Grade, ...] | None = None) -> tuple[Text, ...]:
    """The row as soon as the scan listed it, one cell per `QUEUE_COLUMNS` (the mark without the
    cursor): the counts of effects, the danger and the host follow when the analysis is done (`…`
    until then), and `broken` replaces the state if the checks refuse it. A proposal not fetched yet
    is listed from the queue's reading of it (`listed_row`)."""
    if not item.revisions and item.listing is not None:
        return listed_row(item, item.listing, row_grades(item) if grades is None else grades)
    proposal = item.latest
    figures = item.figures()
    revisions = f"{proposal.revision}" + (f"/{len(item.revisions)}" if len(item.revisions) > 1 else "")
    broken = item.latest_revision in item.problems
    grades = row_grades(item) if grades is None else grades
    if figures is None:
        danger = danger_cell(grades) if broken else role_text("…", "muted")
        effects = role_text("…", "muted")
    else:
        ratios = figures.ratios
        danger = danger_cell(grades)
        effects = Text(
            f"{compact(ratios.creates)}/{compact(ratios.updates)}/{compact(ratios.deletes)}",
            "danger" if ratios.deletes else "",
        )
    environment = proposal.target.environment
    base_url = proposal.target.base_url
    if not base_url:
        host = Text("any", "muted")
    else:
        host = (
            Text(steady_width(safe_text(clip(host_of(base_url), 300))), no_wrap=True, overflow="ellipsis")
            if figures is not None
            else Text("…", "muted")
        )
    return (
        marks(item),
        danger,
        Text(steady_width(safe_text(clip(proposal.title, 300))), no_wrap=True, overflow="ellipsis"),
        cell(environment, 10, "bold") if environment else Text("none", "muted"),
        host,
        cell(proposal.agent.name, 14),
        Text(revisions),
        Text(compact(len(proposal.calls)), justify="right"),
        effects,
        Text(proposal.dry_run.via, "" if proposal.dry_run.via == "server" else "warn"),
        Text("broken", "danger") if broken else Text(item.state),
    )


TITLE_CELL = 2
"""Where `queue_row` puts the title: after the marks and the danger."""


@dataclass(frozen=True)
class RowReading:
    """A proposal's row read once: its cells (`queue_row`), its grades, and the text `/` searches."""

    cells: tuple[Text, ...]
    grades: tuple[Grade, ...]
    words: str
    """Every text of the row as the table shows it (its hidden columns too), the id, the API and who
    proposed it, case folded."""

    @classmethod
    def of(cls, item: QueueItem) -> RowReading:
        grades = row_grades(item)
        cells = queue_row(item, grades)
        reading = item.listing.reading if not item.revisions and item.listing is not None else None
        api = item.latest.target.api if item.revisions else (reading.api if reading is not None else "")
        record = f"{item.proposed_by} {item.state_label} {shown(item.proposal_id, 128)}"
        api = safe_text(clip(api, 80))
        words = f"{' '.join(value.plain for value in cells)} {record} {api}".casefold()
        return cls(cells, grades, words)

    def matches(self, terms: tuple[str, ...]) -> bool:
        """Whether each of the terms (case folded) is somewhere in the row's text."""
        return all(term in self.words for term in terms)


def listed_row(item: QueueItem, row: ProposalSummary, grades: tuple[Grade, ...]) -> tuple[Text, ...]:
    """`queue_row` from the queue's list row: the figures the queue read at submission, the same
    cells a fetched and analysed revision fills."""
    reading = row.reading
    if reading is None:  # a queue that reads no plans at submission: its proposals are fetched
        danger, effects, environment, base_url, via = (
            role_text("…", "muted"),
            role_text("…", "muted"),
            None,
            None,
            "…",
        )
    else:
        danger = danger_cell(grades)
        effects = Text(
            f"{compact(reading.creates)}/{compact(reading.updates)}/{compact(reading.deletes)}",
            "danger" if reading.deletes else "",
        )
        environment, base_url, via = reading.environment, reading.base_url, reading.via
    host = (
        Text(steady_width(safe_text(clip(host_of(base_url), 300))), no_wrap=True, overflow="ellipsis")
        if base_url
        else Text("any", "muted")
    )
    return (
        marks(item),
        danger,
        Text(steady_width(safe_text(clip(row.title, 300))), no_wrap=True, overflow="ellipsis"),
        cell(environment, 10, "bold") if environment else Text("none", "muted"),
        host,
        cell(row.agent_name, 14),
        Text(f"{row.revision}"),
        Text(compact(row.call_count), justify="right"),
        effects,
        Text(safe_text(clip(via, 9)), "" if via == "server" else "warn"),
        Text(item.state),
    )


def host_of(base_url: str) -> str:
    """The host (and a port other than the scheme's) a base URL reaches, as the review screen and the
    executor read it (`hosts.destination`: fullwidth `ａｐｉ.example` is `api.example`); the URL itself if
    it names none."""
    from reviewer.plan.hosts import DEFAULT_PORTS, destination  # httpx: not before the first row

    try:
        reached = destination(base_url)
    except ValueError:
        return base_url
    if not reached.host:
        return base_url
    default = DEFAULT_PORTS.get(reached.scheme)
    return reached.host if reached.port == default else f"{reached.host}:{reached.port}"


def describe_record(item: QueueItem) -> Text:
    """The queue's record of the highlighted proposal (live): state, proposer, signatures, trail."""
    text = Text()
    text.append("queue: ", "muted")
    text.append(item.state_words(), STATE_STYLES.get(item.state_label, ""))
    text.append(f" · proposed by {shown(item.proposed_by)}")
    if item.mine:
        text.append(" (you: another reviewer must approve)", "bold")
    if item.reason:
        text.append(f" · reason: {safe_text(clip(item.reason, 80))}")
    signatures = item.signature_words()
    if signatures:
        text.append("\nsigned: ", "muted")
        for index, (words, verified) in enumerate(signatures):
            text.append(" · " if index else "")
            text.append(words, "ok" if verified else "danger")
    trail = ", ".join(
        f"{event.event} r{event.revision} ({shown(event.actor, 20)})" for event in item.history[-4:]
    )
    if trail:
        text.append(f"\ntrail: {trail}", "muted")
    return text


def describe(item: QueueItem) -> Text:
    """The highlighted proposal under the table: its worst grade first, whole (on a phone's 20 lines
    the rest may be cut, never that), then its id and where it runs, its counts, the other grades. A
    proposal not fetched yet is told from the queue's reading of it (`describe_listed`)."""
    if not item.revisions and item.listing is not None:
        return describe_listed(item.listing)
    proposal = item.latest
    text = Text()
    sentences = [(graded, grade_sentence(item, graded)) for graded in row_grades(item)]
    for graded, sentence in sentences[:1]:
        text.append(f"{graded.bangs} {sentence}\n", SEVERITY_ROLES[graded.severity])
    text.append(safe_text(clip(proposal.proposal_id, 128)), "bold")
    text.append(f"  {safe_text(clip(proposal.target.environment or 'no environment', 40))} · ")
    text.append(safe_text(clip(proposal.target.api, 40)))
    text.append(f" · by {safe_text(clip(proposal.agent.name, 60))}")
    text.append(f" · {safe_text(clip(item.origins[item.latest_revision], 80))}\n", "muted")
    drifted = item.latest_drift()
    if drifted is not None:
        base, drift = drifted
        text.append(f"Δ rev {item.latest_revision} drifted from rev {base}: {drift.summary}\n", "warn.strong")
    figures = item.figures()
    if figures is None:
        calls = len(item.latest.calls)
        text.append(f"{calls:,} calls; still computing: " + ", ".join(item.still_computing()) + "\n", "muted")
    else:
        from reviewer.tui.widgets.panes import summary_counts  # with the analysis: not before the first row

        text.append(summary_counts(figures) + "\n")
    for graded, sentence in sentences[1:]:
        text.append(f"{graded.bangs} {sentence}\n", SEVERITY_ROLES[graded.severity])
    return text


def grade_sentence(item: QueueItem, graded: Grade) -> str:
    """A grade in the analysis's own words (its alarm's sentence), or in words of what raised it;
    "in production" where that made it worse."""
    figures = item.figures()
    said = dict(figures.named_alarms) if figures is not None else {}
    if graded.kind in said:
        sentence = said[graded.kind]
    elif graded.kind == "broken":
        sentence = f"broken: {safe_text(clip(item.problems.get(item.latest_revision, ''), 200))}"
    elif graded.kind == "digest":
        sentence = "the fetched plan does not hash to the queue's digest: do not approve"
    elif graded.kind == "environment" and item.policy is not None and item.policy.alarms:
        sentence = safe_text(clip(item.policy.alarms[0], 200))
    elif graded.kind == "money" and figures is not None and figures.totals:
        largest = max(figures.totals, key=lambda total: total.out)
        sentence = f"moves {largest.words()}"
    elif graded.kind == "destroys" and figures is not None:
        marked = figures.ratios.destructive - figures.ratios.deletes
        sentence = f"{marked:,} update{'s' if marked != 1 else ''} marked destructive"
    else:
        sentence = graded.word
    if graded.kind in WORSE_IN_PRODUCTION and in_production(item.latest.target.environment):
        sentence += ", in production"
    return sentence


def describe_listed(row: ProposalSummary) -> Text:
    """`describe` from the queue's list row, before the proposal is opened and its plan fetched."""
    from reviewer.reading.summary import counts_words
    from reviewer.reading.totals import totals_words
    from reviewer.tui.widgets.panes import MONEY_LINES

    reading = row.reading
    text = Text()
    text.append(safe_text(clip(row.proposal_id, 128)), "bold")
    environment = reading.environment if reading is not None else None
    text.append(f"  {safe_text(clip(environment or 'no environment', 40))} · ")
    text.append(safe_text(clip(reading.api if reading is not None else "?", 40)))
    text.append(f" · by {safe_text(clip(row.agent_name, 60))}")
    text.append(" · the queue's reading; enter fetches the plan\n", "muted")
    if reading is None:
        return text
    text.append(counts_words(reading))
    if reading.totals:
        text.append(f", moving {totals_words(reading.totals, limit=MONEY_LINES)}")
    text.append("\n")
    for alarm in reading.alarms:
        text.append(f"! {safe_text(alarm.text)}\n", "danger")
    return text
