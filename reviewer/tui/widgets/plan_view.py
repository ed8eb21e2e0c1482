"""PlanView: the plan's rows as a virtual list with a cursor, drawing only the lines on screen.

A DataTable given 100,000 rows builds them all (about 10 s); this view asks the analysis for a row
only when its line is painted, so a plan of 100,000 calls opens as fast as one of ten.

A row's state is told twice, by a glyph in the first two cells and by its background: `▶` marks the
cursor, `+` an added row, `~` a changed one, `-` a removed one, `·` one whose dry-run answer changed.
The glyphs survive 16 colours and NO_COLOR, where the backgrounds are gone; the backgrounds are dark
enough that every text colour keeps its contrast on them (tests/tui/test_contrast.py).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import ClassVar, Protocol

from rich.cells import cell_len
from rich.style import Style
from rich.text import Text
from textual.binding import Binding, BindingType
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from reviewer.plan.sanitize import safe_text
from reviewer.reading.analysis import PlanRow, Verdict
from reviewer.reading.plain import flags_of
from reviewer.tui.widgets.cells import CURSOR_GLYPH, fit, fit_end
from reviewer.tui.widgets.panes import KEPT_LABELS, row_kept

RowMark = Callable[[int], str | None]
"""Given a row index, a mark such as "added" or "changed" (drift), or None."""

MARK_GLYPHS = {"added": "+", "changed": "~", "removed": "-", "outcome": "·"}


class RowSource(Protocol):
    """What the view reads rows from: an `Analysis`, or the merged rows of a drift."""

    def __len__(self) -> int: ...

    def row(self, index: int) -> PlanRow: ...

    def has_outlier(self, index: int) -> bool: ...


@dataclass(frozen=True)
class Column:
    header: str
    width: int
    """Cells wide; 0 means it takes what the fixed columns leave."""
    shown_from: int = 0
    """The narrowest view that still shows this column, so 80 columns keep what matters most."""
    right: bool = False


NARROW_VIEW = 60
"""Narrower than this (a phone's SSH app), the columns squeeze (`PlanView._layout`)."""
TOOL_FROM = 90
"""The tool column's narrowest view (a 94-column terminal's plan). Narrower, the call column names the
call by its method and the end of its path (the tool, for a call that is no HTTP request)."""
ARGS_FROM = 96
CALL_SHARE = 0.56
"""Of the cells the call and its arguments share on a wide terminal, the call's (paths end late)."""
CALL_MIN = 20
ARGS_MIN_CELLS = 10
"""Cells the arguments need after a call to say anything (`customer=cus-4…` says little less)."""
WIDE_VIEW = 160
"""From this wide on, the tool column takes `WIDE_TOOL_CELLS` (tool names whole, `delete_namespace`)."""
WIDE_TOOL_CELLS = 26

SEQ_COLUMN = Column("#", 5, right=True)
TOOL_COLUMN = Column("tool", 14, shown_from=TOOL_FROM)
CALL_COLUMN = Column("call", 0)
ARGS_COLUMN = Column("args", 0, shown_from=ARGS_FROM)
DRY_RUN_COLUMN = Column("dry run", 13)
FLAGS_COLUMN = Column("flags", 11)
COLUMNS: tuple[Column, ...] = (
    Column("", 2),
    SEQ_COLUMN,
    TOOL_COLUMN,
    Column("effect", 6, shown_from=NARROW_VIEW),
    CALL_COLUMN,
    ARGS_COLUMN,
    DRY_RUN_COLUMN,
    FLAGS_COLUMN,
)
NARROW_WIDTHS = {DRY_RUN_COLUMN: 9, FLAGS_COLUMN: 7}
"""Under `NARROW_VIEW`: "validated" whole, a longer verdict cut (the detail pane says it whole), the
worst flag or two."""


def call_cell(row: PlanRow, cells: int, *, tool_shown: bool, args_shown: bool) -> str:
    """The call as a row shows it, `cells` wide: its method and the end of its path, where paths
    differ (`PATCH …/deployments/cart/scale`); a call that is no HTTP request, by its tool when the
    tool column is not shown. Without an args column, the arguments follow in the cells left, so
    refunds to one path still read apart."""
    if row.path is None:
        call = row.method or ("" if tool_shown else row.tool)
    else:
        method = fit(row.method, len(row.method)) + " " if row.method else ""
        call = method + fit_end(row.path, max(cells - len(method), 2))
    if not args_shown and row.args_summary and cell_len(call) + 2 + ARGS_MIN_CELLS <= cells:
        call += "  " + row.args_summary
    return fit(call, cells)


VERDICT_CLASS = {
    Verdict.VALIDATED: "plan-view--validated",
    Verdict.UNPROVEN: "plan-view--unproven",
    Verdict.REAL_REFUSAL: "plan-view--refusal",
    Verdict.FAKE_REFUSAL: "plan-view--refusal",
    Verdict.ERROR: "plan-view--refusal",
    Verdict.CHAIN_NOISE: "plan-view--noise",
    Verdict.NOT_VALIDATED: "plan-view--unvalidated",
    Verdict.RECORDED: "plan-view--muted",
    Verdict.NO_OUTCOME: "plan-view--muted",
}


def row_flags(row: PlanRow, outlier: bool = False) -> list[tuple[str, str]]:
    """`flags_of` with the component class that colours each: red for an alarm, amber for a chain."""
    return [
        (flag, "plan-view--refusal" if alarm else "plan-view--noise")
        for flag, alarm in flags_of(row, outlier)
    ]


def seq_cells(rows: RowSource) -> int:
    """Cells the largest seq needs (seqs increase, so the last row holds it; a drift's removed rows
    stand among the others), at least the default `#` width."""
    if not len(rows):
        return SEQ_COLUMN.width
    return max(SEQ_COLUMN.width, len(str(rows.row(len(rows) - 1).seq)), len(str(rows.row(0).seq)))


ALARM_VERDICTS = frozenset({Verdict.REAL_REFUSAL, Verdict.FAKE_REFUSAL, Verdict.ERROR})


def is_alarm_row(row: PlanRow, outlier: bool = False) -> bool:
    """A row the reviewer must look at: its verdict or one of its flags is drawn red."""
    return row.verdict in ALARM_VERDICTS or any(
        component == "plan-view--refusal" for _, component in row_flags(row, outlier)
    )


class PlanView(ScrollView, can_focus=True):
    """The plan's rows under a fixed header line; up/down/page/home/end move the cursor."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("up,k", "cursor(-1)", "Up", show=False),
        Binding("down,j", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
    ]

    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "plan-view--header",
        "plan-view--cursor",
        "plan-view--validated",
        "plan-view--refusal",
        "plan-view--noise",
        "plan-view--unvalidated",
        "plan-view--unproven",
        "plan-view--muted",
        "plan-view--added",
        "plan-view--changed",
        "plan-view--removed",
        "plan-view--outcome",
    }

    DEFAULT_CSS = """
    PlanView {
        overflow-x: hidden;
        & > .plan-view--header { text-style: bold; color: $foreground; background: $surface; }
        & > .plan-view--cursor { background: $row-cursor; }
        &:focus > .plan-view--cursor { background: $row-cursor; text-style: bold; }
        & > .plan-view--validated { color: $success; }
        & > .plan-view--refusal { color: $error; text-style: bold; }
        & > .plan-view--noise { color: $warning; }
        & > .plan-view--unvalidated { color: $warning; text-style: italic; }
        & > .plan-view--unproven { color: $warning; text-style: bold; }
        & > .plan-view--muted { color: $text-muted; }
        & > .plan-view--added { background: $row-added; }
        & > .plan-view--changed { background: $row-changed; }
        & > .plan-view--removed { background: $row-removed; }
        & > .plan-view--outcome { background: $row-outcome; }
        &:nocolor > .plan-view--refusal { text-style: bold reverse; }
        &:nocolor > .plan-view--noise { text-style: bold; }
        &:nocolor > .plan-view--unproven { text-style: bold underline; }
        &:nocolor > .plan-view--cursor { text-style: bold underline; }
    }
    """

    cursor: reactive[int] = reactive(0, always_update=True, init=False)

    @dataclass
    class RowHighlighted(Message):
        """The cursor moved to another row."""

        plan_view: PlanView
        index: int

        @property
        def control(self) -> PlanView:
            return self.plan_view

    def __init__(
        self,
        rows: RowSource,
        *,
        row_mark: RowMark | None = None,
        kept: str | None = None,
        name: str | None = None,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self.rows = rows
        self.row_mark = row_mark
        self.kept = kept
        """`kept_writes` of the proposal: the writes its dry run kept read `kept`, not `validated`."""
        self.virtual_size = Size(0, len(rows) + 1)
        self.seq_cells = seq_cells(rows)
        self.seq_digits = (
            max(len(str(rows.row(len(rows) - 1).seq)), len(str(rows.row(0).seq))) if len(rows) else 1
        )

    @property
    def row_count(self) -> int:
        return len(self.rows)

    @property
    def visible_rows(self) -> int:
        return max(self.scrollable_content_region.height - 1, 1)

    def on_mount(self) -> None:
        if self.row_count:
            self.post_message(self.RowHighlighted(self, self.cursor))

    def on_resize(self) -> None:
        """A banner above or a pane below that appears later (the alarms, once computed) takes lines:
        the cursor's row stays in sight."""
        self.virtual_size = Size(self.scrollable_content_region.width, self.row_count + 1)
        self.keep_cursor_visible()

    def action_cursor(self, step: int) -> None:
        self.move_cursor(self.cursor + step)

    def action_page(self, direction: int) -> None:
        self.move_cursor(self.cursor + direction * self.visible_rows)

    def action_jump(self, index: int) -> None:
        self.move_cursor(index if index >= 0 else self.row_count - 1)

    def move_cursor(self, index: int) -> None:
        if not self.row_count:
            return
        self.cursor = min(max(index, 0), self.row_count - 1)

    def watch_cursor(self, old: int, new: int) -> None:
        self.keep_cursor_visible()
        self.refresh()
        self.post_message(self.RowHighlighted(self, new))

    def keep_cursor_visible(self) -> None:
        top = round(self.scroll_y)
        if self.cursor < top:
            self.scroll_to(y=self.cursor, animate=False, immediate=True)
        elif self.cursor >= top + self.visible_rows:
            self.scroll_to(y=self.cursor - self.visible_rows + 1, animate=False, immediate=True)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if y == 0:
            return self._strip(self._header_text(width), width, self._style("plan-view--header"))
        index = round(self.scroll_y) + y - 1
        if index >= self.row_count:
            return Strip.blank(width, self.rich_style)
        base = self.rich_style
        mark = self.row_mark(index) if self.row_mark else None
        if mark:
            base = base + self._style(f"plan-view--{mark}")
        if index == self.cursor:
            base = base + self._style("plan-view--cursor")
        glyphs = (CURSOR_GLYPH if index == self.cursor else " ") + MARK_GLYPHS.get(mark or "", " ")
        text = self._row_text(index, width, glyphs)
        return self._strip(text, width, base)

    def _style(self, component: str) -> Style:
        return self.get_component_rich_style(component, partial=True)

    def _strip(self, text: Text, width: int, style: Style) -> Strip:
        return Strip(text.render(self.app.console)).crop_extend(0, width, None).apply_style(style)

    def _layout(self, width: int) -> list[tuple[Column, int]]:
        """Each shown column with its width; `#` is as wide as the largest seq (a cut seq names
        another call), and the tool column gives up the cells it takes beyond the default. Under
        `NARROW_VIEW` columns (a phone's SSH app) `#` takes only the digits it needs and the verdict
        and flags squeeze (`NARROW_WIDTHS`). The call takes what is left; from `ARGS_FROM` it shares
        that with the arguments, so a wide terminal shows long paths whole."""
        narrow = width < NARROW_VIEW
        extra = max(self.seq_cells - SEQ_COLUMN.width, 0)
        shown: list[Column] = []
        for column in COLUMNS:
            if width < column.shown_from:
                continue
            if column is SEQ_COLUMN:
                column = replace(column, width=self.seq_digits if narrow else self.seq_cells)
            elif column is TOOL_COLUMN:
                tool_cells = WIDE_TOOL_CELLS if width >= WIDE_VIEW else column.width - extra
                column = replace(column, width=tool_cells)
            elif narrow and column in NARROW_WIDTHS:
                column = replace(column, width=NARROW_WIDTHS[column])
            shown.append(column)
        flexible = [column for column in shown if not column.width]
        fixed = sum(column.width + 1 for column in shown if column.width)
        room = max(width - fixed - len(flexible), 8)
        cells = {CALL_COLUMN.header: room}
        if len(flexible) == 2:
            call = max(CALL_MIN, int(room * CALL_SHARE))
            cells = {CALL_COLUMN.header: call, ARGS_COLUMN.header: max(room - call, 8)}
        return [(column, column.width or cells[column.header]) for column in shown]

    def _header_text(self, width: int) -> Text:
        text = Text(no_wrap=True)
        for column, cells in self._layout(width):
            text.append(fit(column.header, cells, right=column.right) + " ")
        return text

    def _row_text(self, index: int, width: int, glyphs: str) -> Text:
        row = self.rows.row(index)
        text = Text(no_wrap=True)
        for column, cells in self._layout(width):
            if not column.header:
                text.append(glyphs + " ", "bold")
                continue
            if column.header == "flags":
                self._append_flags(text, row_flags(row, self.rows.has_outlier(index)), cells)
                continue
            if column.header == "call":
                shown = call_cell(row, cells, tool_shown=width >= TOOL_FROM, args_shown=width >= ARGS_FROM)
                text.append(shown + " ")
                continue
            value, component = self._cell(column.header, row)
            style = self._style(component) if component else None
            text.append(fit(value, cells, right=column.right), style)
            text.append(" ")
        return text

    def _cell(self, header: str, row: PlanRow) -> tuple[str, str | None]:
        if header == "#":
            return str(row.seq), None
        if header == "tool":
            return row.tool, None
        if header == "effect":
            return row.effect, "plan-view--refusal" if row.destructive else None
        if header == "args":
            return row.args_summary, None
        if self.kept is not None and row_kept(row, self.kept):
            return KEPT_LABELS[self.kept], "plan-view--refusal"
        return str(row.verdict), VERDICT_CLASS[row.verdict]

    def _append_flags(self, text: Text, flags: list[tuple[str, str]], cells: int) -> None:
        """As many flags as fit, then `+N` for the ones left out: a flag is never cut silently."""
        used = 0
        for position, (flag, component) in enumerate(flags):
            piece = safe_text(flag)
            left = len(flags) - position - 1
            room = cells - used - (len(f"+{left}") + 1 if left else 0)
            if len(piece) > room:
                text.append(f"+{len(flags) - position}", self._style("plan-view--refusal"))
                return
            text.append(piece + " ", self._style(component))
            used += len(piece) + 1
