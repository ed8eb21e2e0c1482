"""QueueScreen: every proposal waiting for a decision, with its counts and the marks of its alarms."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Static

from reviewer.plan.sanitize import clip, safe_text, steady_width
from reviewer.tui.failures import ReportsWorkerFailures
from reviewer.tui.model.sources import BrokenFile, QueueItem, shown
from reviewer.tui.widgets.cells import cell
from reviewer.tui.widgets.chrome import Chrome

NARROW_HIDDEN = frozenset({"agent", "proposer"})

QUEUE_COLUMNS = (
    (" ", "mark", 2),
    ("proposal", "title", 25),
    ("agent", "agent", 14),
    ("rev", "rev", 6),
    ("calls", "calls", 6),
    ("c/u/d", "effects", 10),
    ("dry run", "via", 9),
    ("state", "state", 8),
)
"""(label, key, width) of each column; `row_cells` gives one cell per column, in this order."""

LIVE_COLUMNS = (
    (" ", "mark", 3),
    ("proposal", "title", 25),
    ("proposed by", "proposer", 13),
    ("rev", "rev", 6),
    ("calls", "calls", 6),
    ("c/u/d", "effects", 9),
    ("dry run", "via", 9),
    ("state", "state", 9),
)
"""The demo's columns, with the queue's record of who proposed it instead of the agent's own name."""

STATE_STYLES = {
    "pending": "bold",
    "approved": "ok",
    "claimed": "bold",
    "unknown": "danger",
    "rejected": "danger",
    "expired": "muted",
    "executed": "info",
}
"""By `QueueItem.state_label`; `unknown` (a run that may have written and never reported) is the loudest."""


class QueueScreen(ReportsWorkerFailures, Screen[None]):
    """The first screen: one row per proposal, newest revision; enter opens its review. Live, it
    shows the queue's own record too: who proposed it, its state, new proposals marked until opened,
    yours marked "you"."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open", priority=True),
        Binding("up,k", "move(-1)", "Up", show=False, priority=True),
        Binding("down,j", "move(1)", "Down", show=False, priority=True),
        Binding("home", "jump(0)", "First", show=False, priority=True),
        Binding("end", "jump(-1)", "Last", show=False, priority=True),
    ]

    @dataclass
    class OpenRequested(Message):
        """The reviewer pressed enter on a proposal: the app opens it (live, it fetches the rest too)."""

        proposal_id: str

    def __init__(self, mode: str) -> None:
        super().__init__()
        self.mode = mode
        self.live = mode == "live"
        self.columns = LIVE_COLUMNS if self.live else QUEUE_COLUMNS
        self.who = mode
        """Who is signed in, once the queue said so (live); the chrome's first part."""
        self.items: dict[str, QueueItem] = {}
        self.broken: list[BrokenFile] = []
        self._columns: list[tuple[str, str, int]] = []

    def compose(self) -> ComposeResult:
        yield Chrome(id="chrome")
        yield DataTable(id="queue", cursor_type="row", zebra_stripes=True)
        yield Static(id="queue-detail")
        yield Static(id="broken")
        yield Static(id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.layout_columns(self.app.size.width)
        self.refresh_chrome()
        self._describe_highlighted()
        self._describe_broken()
        if self.mode == "demo":
            self.show_status(Text("demo: proposals from files; decisions are not sent", "italic"))

    def show_status(self, status: Text) -> None:
        """The line above the footer: the demo's note, or live, who you are and when the queue answered."""
        self.query_one("#status", Static).update(status)

    def show_failure(self, words: str) -> None:
        """A failed worker of this screen, in words where the reviewer is looking (the app calls it)."""
        self.query_one("#status", Static).update(Text(safe_text(clip(" " + words, 300)), "danger"))

    def on_screen_resume(self) -> None:
        """Back from a review: the proposals opened meanwhile lose their "new" mark (live)."""
        if self.live:
            for item in list(self.items.values()):
                self.show_item(item)

    def refresh_chrome(self) -> None:
        count = len(self.items)
        proposals = f"{count} proposal{'s' if count != 1 else ''}"
        if not self.live:
            self.query_one(Chrome).show(self.mode, proposals)
            return
        items = list(self.items.values())
        pending = sum(item.state == "pending" for item in items)
        new = sum(item.is_new for item in items)
        self.query_one(Chrome).show(
            self.who, proposals, f"{pending} pending", (f"{new} new", "bold") if new else f"{new} new"
        )

    def on_resize(self, event: events.Resize) -> None:
        self.layout_columns(event.size.width)

    def layout_columns(self, width: int) -> None:
        """Fit the columns to the terminal: the title takes what is left, and below 90 columns the
        proposer's name gives way (the line under the table still says it)."""
        visible = [column for column in self.columns if width >= 90 or column[1] not in NARROW_HIDDEN]
        fixed = sum(cells for _, key, cells in visible if key != "title")
        title = max(12, width - fixed - 2 * len(visible) - 4)  # cell padding, border, scrollbar
        columns = [(label, key, title if key == "title" else cells) for label, key, cells in visible]
        if columns == self._columns:
            return
        self._columns = columns
        table = self.query_one("#queue", DataTable)
        cursor = table.cursor_row
        table.clear(columns=True)
        for label, key, cells in columns:
            table.add_column(label, key=key, width=cells)
        for item in self.items.values():
            table.add_row(*self._shown_cells(item), key=item.proposal_id)
        if table.row_count:
            table.move_cursor(row=min(cursor, table.row_count - 1))

    def _shown_cells(self, item: QueueItem) -> list[Text]:
        visible = {key for _, key, _ in self._columns}
        return [
            value
            for (_, key, _), value in zip(self.columns, self.row_cells(item), strict=True)
            if key in visible
        ]

    def show_item(self, item: QueueItem) -> None:
        """Add or update the row of `item`, keeping the cursor where the reviewer left it. Before the
        table has its columns (the screen still mounting), the item waits in `items`, and the rows
        are added with the columns: the first frame then shows them."""
        self.items[item.proposal_id] = item
        if not self._columns:
            return
        table = self.query_one("#queue", DataTable)
        cells = self._shown_cells(item)
        if item.proposal_id in table.rows:
            for (_, key, _), value in zip(self._columns, cells, strict=True):
                table.update_cell(item.proposal_id, key, value)
        else:
            table.add_row(*cells, key=item.proposal_id)
        self.refresh_chrome()
        self._describe_highlighted()

    def show_broken(self, broken: BrokenFile) -> None:
        self.broken.append(broken)
        if self.is_mounted:
            self._describe_broken()

    def _describe_broken(self) -> None:
        if not self.broken:
            return
        text = Text(f"{len(self.broken)} file(s) could not be read:\n", "danger")
        for entry in self.broken[-5:]:
            text.append(safe_text(clip(entry.name, 60)), "bold")
            text.append(f"  {safe_text(clip(entry.problem, 200))}\n")
        self.query_one("#broken", Static).update(text)

    @on(DataTable.RowHighlighted, "#queue")
    def _describe_highlighted(self) -> None:
        item = self.highlighted_item()
        self.query_one("#queue-detail", Static).update(self.describe_item(item) if item else "")

    def highlighted_item(self) -> QueueItem | None:
        table = self.query_one("#queue", DataTable)
        if not table.row_count:
            return None
        row_key, _ = table.coordinate_to_cell_key(table.cursor_coordinate)
        return self.items.get(str(row_key.value))

    def row_cells(self, item: QueueItem) -> tuple[Text, ...]:
        base = queue_row(item)
        if not self.live:
            return base
        mark = Text("•" if item.is_new else " ", "bold")
        mark.append_text(base[0])
        if item.local_digests and "!" not in base[0].plain:
            mark.append("!", "danger")
        proposer = Text("you", "bold reverse") if item.mine else cell(item.proposed_by, 13)
        state = Text(item.state_label, STATE_STYLES.get(item.state_label, ""))
        return (mark, base[1], proposer, *base[3:7], state)

    def describe_item(self, item: QueueItem) -> Text:
        text = describe(item)
        if self.live:
            text.append_text(describe_record(item))
        return text

    def action_move(self, step: int) -> None:
        table = self.query_one("#queue", DataTable)
        if table.row_count:
            table.move_cursor(row=min(max(table.cursor_row + step, 0), table.row_count - 1))

    def action_jump(self, row: int) -> None:
        table = self.query_one("#queue", DataTable)
        if table.row_count:
            table.move_cursor(row=row if row >= 0 else table.row_count - 1)

    def action_open(self) -> None:
        item = self.highlighted_item()
        if item is not None:
            self.post_message(self.OpenRequested(item.proposal_id))


def marks(item: QueueItem, alarms: tuple[str, ...], deletes: int = 0) -> Text:
    """Δ when the latest revision drifted from the one seen, ! when the proposal raises alarms or
    deletes anything."""
    text = Text()
    if item.latest_drift():
        text.append("Δ", "warn.strong")
    if alarms or deletes:
        text.append("!", "danger")
    return text


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


def queue_row(item: QueueItem) -> tuple[Text, ...]:
    """The row as soon as the scan listed it: the counts of effects and the alarm mark follow when
    the analysis is done (`…` until then), and `broken` replaces the state if the checks refuse it."""
    proposal = item.latest
    figures = item.figures()
    revisions = f"{proposal.revision}" + (f" of {len(item.revisions)}" if len(item.revisions) > 1 else "")
    if figures is None:
        mark, effects = Text("…", "muted"), Text("…", "muted")
    else:
        ratios = figures.ratios
        mark = marks(item, figures.alarms, ratios.deletes)
        effects = Text(
            f"{compact(ratios.creates)}/{compact(ratios.updates)}/{compact(ratios.deletes)}",
            "danger" if ratios.deletes else "",
        )
    broken = item.latest_revision in item.problems
    return (
        Text("!", "danger") if broken else mark,
        Text(steady_width(safe_text(clip(proposal.title, 300))), no_wrap=True, overflow="ellipsis"),
        cell(proposal.agent.name, 14),
        Text(revisions),
        Text(compact(len(proposal.calls)), justify="right"),
        effects,
        Text(proposal.dry_run.via, "" if proposal.dry_run.via == "server" else "warn"),
        Text("broken", "danger") if broken else Text(item.state),
    )


def describe_record(item: QueueItem) -> Text:
    """The queue's record of the highlighted proposal (live): state, proposer, signatures, trail."""
    text = Text()
    if item.local_digests:
        text.append("! the fetched plan does not hash to the queue's digest: do not approve\n", "danger")
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
    """The highlighted proposal's alarms, spelled out under the table."""
    proposal = item.latest
    text = Text()
    text.append(safe_text(clip(proposal.proposal_id, 128)), "bold")
    text.append(f"  {safe_text(clip(proposal.target.environment or 'no environment', 40))} · ")
    text.append(safe_text(clip(proposal.target.api, 40)))
    text.append(f" · by {safe_text(clip(proposal.agent.name, 60))}")
    text.append(f" · {safe_text(clip(item.origins[item.latest_revision], 80))}\n", "muted")
    drifted = item.latest_drift()
    if drifted is not None:
        base, drift = drifted
        text.append(f"Δ rev {item.latest_revision} drifted from rev {base}: {drift.summary}\n", "warn.strong")
    problem = item.problems.get(item.latest_revision)
    if problem is not None:
        text.append(f"! broken: {safe_text(clip(problem, 200))}\n", "danger")
    figures = item.figures()
    if figures is None:
        calls = len(item.latest.calls)
        text.append(f"{calls:,} calls; still computing: " + ", ".join(item.still_computing()) + "\n", "muted")
        return text
    from reviewer.tui.widgets.panes import summary_counts  # with the analysis: not before the first row

    text.append(summary_counts(figures) + "\n")
    for alarm in figures.alarms:
        text.append(f"! {alarm}\n", "danger")
    return text
