"""DriftScreen: what changed between two revisions, as the new plan with removed rows put back in place."""

from __future__ import annotations

from bisect import bisect_left, bisect_right
from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Static

from reviewer.plan.sanitize import clip, safe_text
from reviewer.reading.analysis import Analysis, PlanRow
from reviewer.tui.failures import ReportsWorkerFailures
from reviewer.tui.model.sources import QueueItem
from reviewer.tui.palette import role_text
from reviewer.tui.screens.styled_once import StyledOnce
from reviewer.tui.widgets.chrome import Chrome, KeysFooter, id_part
from reviewer.tui.widgets.panes import detail_text, untrusted
from reviewer.tui.widgets.plan_view import PlanView

if TYPE_CHECKING:  # the comparison itself runs in the app's worker; only its types are named here
    from reviewer.plan.matching import FieldChange
    from reviewer.reading.drift import ChangedCall, Drift
    from reviewer.tui.runtime import Foreground


class DriftRows:
    """The rows of the new revision with each removed row of the old one where it used to stand.

    Only the removed rows get a place of their own, found by bisection, so the merged view of two
    100,000-call revisions costs what the drift found, not what the plans hold.
    """

    def __init__(self, old: Analysis, new: Analysis, drift: Drift) -> None:
        self.old, self.new, self.drift = old, new, drift
        # Merged position of the k-th removed row: its place in the new plan plus the removed before it.
        self._removed_at = [position + k for k, position in enumerate(drift.removed_positions)]

    def __len__(self) -> int:
        return len(self.new) + len(self.drift.removed)

    def locate(self, index: int) -> tuple[str, int]:
        """("old", index into the old plan) for a removed row, else ("new", index into the new plan)."""
        before = bisect_left(self._removed_at, index)
        if before < len(self._removed_at) and self._removed_at[before] == index:
            return "old", self.drift.removed[before]
        return "new", index - before

    def row(self, index: int) -> PlanRow:
        side, position = self.locate(index)
        return (self.old if side == "old" else self.new).row(position)

    def has_outlier(self, index: int) -> bool:
        side, position = self.locate(index)
        return (self.old if side == "old" else self.new).has_outlier(position)

    def first_marked(self) -> int:
        """The first row with a mark (0 when none), from the drift's own indexes: no row is read."""
        drift = self.drift
        changed = (pair.new_index for pair in (*drift.changed, *drift.outcome_changed))
        merged = [new + bisect_right(drift.removed_positions, new) for new in (*drift.added, *changed)]
        return min((*merged, *self._removed_at[:1]), default=0)

    def mark(self, index: int) -> str | None:
        side, position = self.locate(index)
        if side == "old":
            return "removed"
        status = self.drift.status_of_new(position)
        if status != "unchanged":
            return status
        return "outcome" if self.drift.pair_of_new(position) else None


def field_changes_text(title: str, changes: tuple[FieldChange, ...], style: str) -> Text:
    text = Text()
    text.append(f"{title}\n", style)
    for change in changes:
        text.append(f"  {untrusted(change.path, limit=120)}: ", "bold")
        text.append(untrusted(change.old, limit=300), "old")
        text.append(" → ")
        text.append(untrusted(change.new, limit=300), "new")
        if change.note:
            text.append(f"  ({untrusted(change.note, limit=200)})", "muted")
        text.append("\n")
    return text


class DriftScreen(StyledOnce, ReportsWorkerFailures, Screen[None]):
    """Drift of one revision against another; `b` and `t` pick which two."""

    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (22, "-roomy")]
    """Under 22 lines (50x20) the reviewer's request is folded to one line and the panes keep 7
    lines, so the plan keeps its rows, the removed ones among them; `r` unfolds the request."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "app.pop_screen", "Back"),
        Binding("r", "toggle_request", "Whole request"),  # before b and t: in sight at 50 columns
        Binding("b", "cycle_base", "Base revision"),
        Binding("t", "cycle_target", "Target revision"),
    ]

    def __init__(self, item: QueueItem, base: int, target: int, mode: str) -> None:
        super().__init__()
        self.item, self.base, self.target, self.mode = item, base, target, mode
        # The height's class before the first styling, as the review screen does.
        self.add_class(
            *[name for least, name in self.VERTICAL_BREAKPOINTS if self.app.size.height >= least][-1:],
            update=False,
        )

    def compose(self) -> ComposeResult:
        yield Chrome(id="chrome")
        yield Static(id="drift-summary")
        with Horizontal(id="drift-asked"):  # the request's wrapped lines stay under its first
            yield Static(id="drift-asked-revision")
            yield Static(id="drift-asked-reason")
        with Horizontal(id="panes"), VerticalScroll(id="detail-pane") as detail:
            detail.border_title = "Selected call"
            yield Static(id="detail")
        yield KeysFooter()

    @dataclass
    class Compared(Message):
        """The drift the worker computed for a pair (or why it could not), for the handler to show."""

        base: int
        target: int
        drift: Drift | None
        problem: str = ""

    async def on_mount(self) -> None:
        """A drift computed already (ahead of the checks, or before) is shown in the first frame."""
        known = self.item.known_drift(self.base, self.target)
        if known is None:
            self.show_drift()
            return
        self.show_chrome()
        await self.show_rows(known)

    def show_failure(self, words: str) -> None:
        """A failed worker of this screen, in words where the reviewer is looking (the app calls it)."""
        self.query_one("#drift-summary", Static).update(
            role_text(safe_text(clip(" " + words, 300)), "danger")
        )

    def show_chrome(self) -> None:
        self.query_one(Chrome).show(
            self.mode,
            id_part(self.item.proposal_id),
            f"drift rev {self.base} → rev {self.target}",
        )

    def show_drift(self) -> None:
        """Compare the chosen pair in a worker (a heavy rewrite of a large plan takes about a second)."""
        self.show_chrome()
        self.query_one("#drift-summary", Static).update(role_text(" comparing…", "muted"))
        self._hold_foreground()
        self.compare(self.base, self.target)

    def _hold_foreground(self) -> None:
        """The reviewer asked for this comparison: the plans' completion waits while it runs."""
        foreground: Foreground | None = getattr(self.app, "foreground", None)
        if foreground is not None:
            foreground.claim()

    def _release_foreground_after_paint(self) -> None:
        """The comparison is shown (or failed): the completion goes on once it is painted."""
        foreground: Foreground | None = getattr(self.app, "foreground", None)
        if foreground is not None:
            self.call_after_refresh(self.call_after_refresh, foreground.release)

    @work(thread=True, group="drift-view", exclusive=True, exit_on_error=False)
    def compare(self, base: int, target: int) -> None:
        try:
            self.post_message(self.Compared(base, target, self.item.compare(base, target)))
        except Exception as error:  # a bug in the comparison must not take the reviewer's screen down
            self.post_message(self.Compared(base, target, None, f"{type(error).__name__}: {error}"))

    async def on_drift_screen_compared(self, message: Compared) -> None:
        try:
            await self.show_compared(message)
        finally:
            self._release_foreground_after_paint()

    async def show_compared(self, message: Compared) -> None:
        if (message.base, message.target) != (self.base, self.target):
            return  # the reviewer picked another pair meanwhile
        if message.drift is None:
            problem = safe_text(clip(f" the revisions could not be compared ({message.problem})", 300))
            self.query_one("#drift-summary", Static).update(role_text(problem, "danger"))
            return
        self.item.keep_drift(message.base, message.target, message.drift)
        await self.show_rows(message.drift)

    async def show_rows(self, drift: Drift) -> None:
        """Replace the plan of the last pair: the old view is removed, and awaited, before the new one
        with the same id is mounted (Textual refuses two widgets with one id)."""
        self.rows = DriftRows(self.item.analysis(self.base), self.item.analysis(self.target), drift)
        summary = Text(f" {drift.summary}", "bold")
        for change in drift.target_changed:
            summary.append(f"   target {untrusted(change.path, limit=60)}: ", "danger")
            summary.append(f"{untrusted(change.old, limit=80)} → {untrusted(change.new, limit=80)}")
        self.query_one("#drift-summary", Static).update(summary)
        self.show_request(self.item.changes_asked(self.base))
        await self.query(PlanView).remove()
        plan = PlanView(self.rows, row_mark=self.rows.mark, id="plan")
        plan.border_title = (
            f"rev {self.target}: {len(self.rows.new):,} calls · + added · ~ changed · - removed"
        )
        await self.mount(plan, after="#drift-asked")
        plan.focus()
        plan.move_cursor(self.rows.first_marked())

    def show_request(self, asked: str | None) -> None:
        """The reviewer's words beside what the agent changed in answer, when the base was asked to
        change (folded to one line with an ellipsis under 22 lines)."""
        self.query_one("#drift-asked").display = asked is not None
        self.query_one("#drift-asked-revision", Static).update(role_text(f" rev {self.base}: ", "bold"))
        self.query_one("#drift-asked-reason", Static).update(role_text(asked or "", "warn.strong"))
        self.refresh_bindings()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """`r` is offered only where a request is folded: under 22 lines."""
        if action == "toggle_request":
            return self.has_class("-tiny") and self.query_one("#drift-asked").display
        return True

    def on_resize(self) -> None:
        self.refresh_bindings()  # the height's class changed with the size, and `r` with it

    def action_toggle_request(self) -> None:
        self.toggle_class("-request-open")

    @on(PlanView.RowHighlighted)
    def show_detail(self, message: PlanView.RowHighlighted) -> None:
        side, position = self.rows.locate(message.index)
        analysis = self.rows.old if side == "old" else self.rows.new
        text = Text()
        if side == "old":
            text.append(f"removed: rev {self.base} had this call; rev {self.target} does not\n", "danger")
        elif self.rows.drift.status_of_new(position) == "added":
            text.append(f"added in rev {self.target}\n", "ok.strong")
        pair: ChangedCall | None = self.rows.drift.pair_of_new(position) if side == "new" else None
        if pair is not None:
            if pair.fields:
                text.append_text(
                    field_changes_text(
                        f"changed from rev {self.base} #{pair.old_seq}:", pair.fields, "warn.strong"
                    )
                )
            if pair.outcome_fields:
                text.append_text(
                    field_changes_text(
                        "dry-run answer changed (not what would execute):", pair.outcome_fields, "bold"
                    )
                )
        text.append_text(detail_text(analysis.row(position), analysis.proposal.calls[position]))
        self.query_one("#detail", Static).update(text)

    def _revisions(self) -> list[int]:
        return sorted(self.item.revisions)

    def action_cycle_base(self) -> None:
        """Step the base through the other revisions, so any two can be compared."""
        choices = [number for number in self._revisions() if number != self.target]
        if choices:
            self.base = (
                choices[(choices.index(self.base) + 1) % len(choices)] if self.base in choices else choices[0]
            )
            self.show_drift()

    def action_cycle_target(self) -> None:
        choices = [number for number in self._revisions() if number != self.base]
        if choices:
            self.target = (
                choices[(choices.index(self.target) + 1) % len(choices)]
                if self.target in choices
                else choices[0]
            )
            self.show_drift()
