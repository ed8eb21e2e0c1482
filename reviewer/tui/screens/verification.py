"""VerificationScreen: each real call against the approved plan and the API's audit log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
from textual.actions import SkipAction
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import VerticalScroll
from textual.message import Message
from textual.screen import Screen
from textual.widgets import DataTable, Static

from reviewer.plan.proposal import Proposal
from reviewer.plan.sanitize import clip, safe_text
from reviewer.tui.failures import ReportsWorkerFailures
from reviewer.tui.model.sources import ExecutionRecord
from reviewer.tui.palette import role_text
from reviewer.tui.screens.audit_source import (
    call_detail,
    call_verdict,
    checked_audit,
    source_summary,
    unplanned_writes,
)
from reviewer.tui.screens.drift import field_changes_text
from reviewer.tui.screens.styled_once import StyledOnce
from reviewer.tui.widgets.cells import CURSOR_GLYPH, cell, cut, fit, fit_end
from reviewer.tui.widgets.chrome import Chrome, KeysFooter
from reviewer.tui.widgets.panes import untrusted

if TYPE_CHECKING:  # compared in a worker when the screen opens, so the import waits until then
    from reviewer.queue.messages import AuditVerification
    from reviewer.reading.verification import CallCheck, Verification

STATUS_STYLE = {
    "same": "ok",
    "same once placeholders resolve": "ok",
    "different": "danger",
    "not in the plan": "danger",
    "refused": "danger",
    "unknown": "warn",
}
COLUMNS = (("real", 5), ("plan", 4), ("tool", 9), ("call", 16), ("check", 18), ("audit", 12))
"""Each column and its cells (the first holds the cursor's `▶` before the real call's number): with
the table's padding and scroll bar, 80 columns show all of them."""
NARROW_COLUMNS = (("#", 3), ("call", 13), ("check", 12), ("audit", 10))
"""Under `NARROW_BELOW` columns (50x20), the ones that say what happened."""
NARROW_BELOW = 70
STATUS_WORDS = {
    "unknown": "outcome unknown (sent, no answer)",
    "not in the plan": "not in the plan (stopped)",
    "same once placeholders resolve": "same once resolved",
}


def status_text(check: CallCheck) -> Text:
    words = STATUS_WORDS.get(check.status, check.status)
    if check.status == "refused":
        words = f"refused {check.http_status}" if check.http_status is not None else "failed (no HTTP answer)"
        if check.http_status is not None and 300 <= check.http_status < 400:
            words = f"redirected {check.http_status}, not followed"
    if check.status == "different" and check.fields:
        words = f"different: {check.fields[0].path}"  # the path is made of the run's own keys
    return Text(safe_text(clip(words, 200)), STATUS_STYLE[check.status])


def call_cell(method: str, path: str, cells: int) -> Text:
    """The method whole and the path cut at its start, so calls to t1, t2 and t3 stay apart."""
    method = fit(method, 7).rstrip()
    return Text(f"{method} {fit_end(path, max(cells - len(method) - 1, 2))}", no_wrap=True)


class VerificationScreen(StyledOnce, ReportsWorkerFailures, Screen[None]):
    """What really ran, call by call: the naive count beside the count once placeholders resolve."""

    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (22, "-short"), (30, "-tall")]
    """Under 30 lines the writes nobody approved keep fewer lines; under 22 (50x20) the selected call's
    pane gives way to the table, and `enter` shows it in the table's place (again: the table)."""

    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("escape", "back", "Back"),
        Binding("enter", "toggle_detail", "Call detail", priority=True),
    ]

    @dataclass
    class Compared(Message):
        """The comparison the worker made, for the handler to show, and the run's audit verification
        checked against its shape (or why it does not read as one)."""

        verification: Verification
        audited: AuditVerification | None = None
        audit_unreadable: str | None = None

    def __init__(self, plan: Proposal, plan_sha256: str, record: ExecutionRecord, mode: str) -> None:
        """`plan_sha256` is the approved revision's digest as the queue (or the demo's loader) holds it."""
        super().__init__()
        self.plan, self.plan_sha256, self.record, self.mode = plan, plan_sha256, record, mode
        self.verification: Verification | None = None
        self.audited: AuditVerification | None = None
        self._narrow_table: bool | None = None
        self._columns: tuple[tuple[str, int], ...] = ()
        self._cells: list[dict[str, Text]] = []
        self._marked = 0

    def compose(self) -> ComposeResult:
        yield Chrome(id="chrome")
        yield Static(role_text(" comparing the real run with the plan…", "muted"), id="verification-summary")
        table: DataTable[Text] = DataTable(id="verification", cursor_type="row", zebra_stripes=True)
        yield table
        with VerticalScroll(id="unplanned-pane"):
            yield Static(id="unplanned")
        with VerticalScroll(id="detail-pane") as detail:
            detail.border_title = "Selected call"
            yield Static(id="detail")
        yield KeysFooter()

    def on_mount(self) -> None:
        self.query_one(Chrome).show(
            self.mode,
            (self.plan.proposal_id, "bold"),
            f"verification of rev {self.record.revision}",
            f"run by {self.record.executed_by or 'unknown'}",
        )
        self.compare()

    def show_failure(self, words: str) -> None:
        """A failed worker of this screen, in words where the reviewer is looking (the app calls it)."""
        self.query_one("#verification-summary", Static).update(
            Text(safe_text(clip(" " + words, 300)), "danger")
        )

    @work(thread=True, group="verify", exit_on_error=False)
    def compare(self) -> None:
        """A real run as long as its plan is compared off the event loop."""
        import msgspec

        from reviewer.reading.verification import compare_execution

        record = self.record
        compared = self.Compared(compare_execution(self.plan, record.calls))
        if record.audit is not None:
            try:
                compared.audited = checked_audit(record.audit)
            except msgspec.ValidationError as error:
                compared.audit_unreadable = str(error)
        self.post_message(compared)

    def on_verification_screen_compared(self, message: Compared) -> None:
        verification = self.verification = message.verification
        audited = self.audited = message.audited
        summary = Text(f" {verification.summary}", "bold")
        if self.record.plan_sha256 != self.plan_sha256:
            summary.append("\n the run names another plan digest than this revision's", "danger")
        if audited is not None:
            summary.append("\n")
            summary.append_text(source_summary(audited))
            self.query_one("#unplanned", Static).update(unplanned_writes(audited))
        elif message.audit_unreadable is not None:
            why = safe_text(clip(message.audit_unreadable, 200))
            summary.append(f"\n the run's audit verification does not read: {why}", "danger")
        else:
            summary.append(
                "\n no audit log was read with this run: `reviewer verify "
                f"{safe_text(clip(self.plan.proposal_id, 128))} --audit KIND:LOCATION` holds it against "
                "the API's own log and lists the writes nobody approved",
                "warn",
            )
        self.query_one("#verification-summary", Static).update(summary)
        self.query_one("#unplanned-pane").display = audited is not None
        self._fill_table()
        self.query_one("#verification", DataTable).focus()
        self.refresh_bindings()

    def on_resize(self) -> None:
        if self.verification is not None:
            self._fill_table()
        if not self.has_class("-tiny"):
            self.remove_class("-show-detail")
        self.refresh_bindings()  # `enter` is offered under 22 lines only

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        if action == "toggle_detail":
            return self.has_class("-tiny") and self.verification is not None
        return True

    def action_toggle_detail(self) -> None:
        """Under 22 lines, the selected call's detail in the table's place, or the table again."""
        if not self.has_class("-tiny") or self.verification is None:
            raise SkipAction()
        shown = self.toggle_class("-show-detail").has_class("-show-detail")
        self.query_one("#unplanned-pane").display = not shown and self.audited is not None
        self.query_one("#detail-pane" if shown else "#verification").focus()

    def action_back(self) -> None:
        """Back to the table from the call's detail shown in its place; else back to the review."""
        if self.has_class("-show-detail"):
            self.action_toggle_detail()
        else:
            self.app.pop_screen()

    def _fill_table(self) -> None:
        """The table in the columns the screen's width holds (under `NARROW_BELOW`, without plan and
        tool), built again when a resize crosses it; the cursor stays on its row."""
        narrow = self.size.width < NARROW_BELOW
        if narrow == self._narrow_table:
            return
        self._narrow_table = narrow
        table = self.query_one("#verification", DataTable)
        row = table.cursor_row
        table.clear(columns=True)
        self._columns = NARROW_COLUMNS if narrow else COLUMNS
        for label, width in self._columns:
            table.add_column(label, width=width, key=label)
        widths = dict(self._columns)
        widths[self._columns[0][0]] -= 1  # the cursor's mark
        self._cells = [
            {label: cut(cells[label], widths[label]) for label in widths} for cells in self._rows(widths)
        ]
        self._marked = row
        for index in range(len(self._cells)):
            table.add_row(*self._row_cells(index), key=str(index))
        table.move_cursor(row=row)

    def _row_cells(self, index: int) -> list[Text]:
        """The row's cells, the first after `▶` on the cursor's row (a blank elsewhere), so the cursor
        shows where its background does not (16 colours, NO_COLOR)."""
        cells = [self._cells[index][label] for label, _ in self._columns]
        mark = CURSOR_GLYPH if index == self._marked else " "
        return [Text.assemble((mark, "bold"), cells[0]), *cells[1:]]

    def _move_cursor_mark(self, row: int) -> None:
        """`▶` follows the cursor: off the row it left, onto the row it reached."""
        previous, self._marked = self._marked, row
        table = self.query_one("#verification", DataTable)
        first = self._columns[0][0]
        for index in {previous, row}:
            if 0 <= index < len(self._cells):
                table.update_cell(str(index), first, self._row_cells(index)[0])

    def _rows(self, widths: dict[str, int]) -> list[dict[str, Text]]:
        """Each real call, then each plan call not executed, by column (`widths`: the cells of the
        columns shown)."""
        call_cells, tool_cells = widths.get("call", 16), widths.get("tool", 9)
        assert self.verification is not None
        audited = self.audited
        rows = []
        for check in self.verification.checks:
            call = self.record.calls[check.executed_index]
            planned = "" if check.planned_index is None else str(self.plan.calls[check.planned_index].seq)
            request = call.request
            rows.append(
                {
                    "real": Text(str(call.seq)),
                    "#": Text(str(call.seq)),
                    "plan": Text(planned),
                    "tool": cell(call.tool, tool_cells),
                    "call": call_cell(request.method, request.path, call_cells)
                    if request
                    else cell(call.tool, call_cells),
                    "check": status_text(check),
                    "audit": Text("no audit log", "muted")
                    if audited is None
                    else call_verdict(audited, call.seq, refused=check.status == "refused"),
                }
            )
        for index in self.verification.not_executed:
            planned_call = self.plan.calls[index]
            rows.append(
                {
                    "real": Text("–"),
                    "#": Text("–"),
                    "plan": Text(str(planned_call.seq)),
                    "tool": cell(planned_call.tool, tool_cells),
                    "call": cell(planned_call.tool, call_cells),
                    "check": role_text("not executed", "warn"),
                    "audit": Text(""),
                }
            )
        return rows

    @on(DataTable.RowHighlighted, "#verification")
    def show_detail(self, event: DataTable.RowHighlighted) -> None:
        if self.verification is None:
            return
        self._move_cursor_mark(event.cursor_row)
        checks = self.verification.checks
        text = Text()
        if event.cursor_row >= len(checks):
            planned = self.plan.calls[self.verification.not_executed[event.cursor_row - len(checks)]]
            text.append(
                f"plan #{planned.seq} was not executed: the run stopped before it or chose other calls\n",
                "warn",
            )
        else:
            check = checks[event.cursor_row]
            call = self.record.calls[check.executed_index]
            text.append_text(status_text(check))
            text.append("\n")
            if check.status == "unknown":
                text.append(
                    "the request was sent and no answer came: the API may have performed it; "
                    "look there before anything runs again\n",
                    "warn",
                )
            if check.fields:
                title = (
                    "placeholders took these real values:"
                    if check.status.startswith("same")
                    else "differs from the plan:"
                )
                text.append_text(field_changes_text(title, check.fields, "bold"))
            if self.audited is not None:
                refused = check.status == "refused"
                text.append_text(
                    call_detail(self.audited, call.seq, http=call.request is not None, refused=refused)
                )
            if call.outcome is not None:
                text.append("answer  ", "bold")
                text.append(f"{call.outcome.http_status or ''} ")
                text.append(untrusted(call.outcome.message or call.outcome.result or "", limit=2_000))
                text.append("\n")
            text.append("args    ", "bold")
            text.append(untrusted(call.args or {}, multiline=True))
        self.query_one("#detail", Static).update(text)
