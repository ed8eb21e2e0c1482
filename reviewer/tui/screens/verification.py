"""VerificationScreen: each real call against the approved plan and the API's audit log."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, ClassVar

from rich.text import Text
from textual import on, work
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
from reviewer.tui.widgets.cells import cell
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
COLUMNS = (("real", 4), ("plan", 4), ("tool", 10), ("call", 16), ("check", 18), ("audit", 12))
"""Each column and its cells: with the table's padding and scroll bar, 80 columns show all of them."""
NARROW_COLUMNS = (("#", 2), ("call", 13), ("check", 12), ("audit", 10))
"""Under `NARROW_BELOW` columns (50x20), the ones that say what happened."""
NARROW_BELOW = 70
COLUMN_CELLS = dict(COLUMNS)
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


def audit_text(check: CallCheck, has_audit: bool) -> Text:
    if not has_audit:
        return Text("no audit log", "muted")
    if check.audit_index is None:
        return Text("no audit line", "danger")
    if check.audit_fields:
        return Text(safe_text(clip(f"differs: {check.audit_fields[0].path}", 200)), "danger")
    return Text(f"line {check.audit_index + 1} ok", "ok")  # the column holds 12 cells


class VerificationScreen(StyledOnce, ReportsWorkerFailures, Screen[None]):
    """What really ran, call by call: the naive count beside the count once placeholders resolve."""

    VERTICAL_BREAKPOINTS = [(0, "-tiny"), (22, "-short"), (30, "-tall")]
    """Under 30 lines the writes nobody approved keep fewer lines; under 22 (50x20) the selected call's
    pane gives way to the table, whose rows say what the pane would."""

    BINDINGS: ClassVar[list[BindingType]] = [Binding("escape", "app.pop_screen", "Back")]

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
        compared = self.Compared(compare_execution(self.plan, record.calls, record.audit_log))
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
        elif self.record.audit_log is None:
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

    def on_resize(self) -> None:
        if self.verification is not None:
            self._fill_table()

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
        columns = NARROW_COLUMNS if narrow else COLUMNS
        for label, width in columns:
            table.add_column(label, width=width)
        for cells in self._rows():
            table.add_row(*(cells[label] for label, _ in columns))
        table.move_cursor(row=row)

    def _rows(self) -> list[dict[str, Text]]:
        """Each real call, then each plan call not executed, by column."""
        assert self.verification is not None
        audited, has_audit = self.audited, self.record.audit_log is not None
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
                    "tool": cell(call.tool, COLUMN_CELLS["tool"]),
                    "call": cell(
                        f"{request.method} {request.path}" if request else call.tool, COLUMN_CELLS["call"]
                    ),
                    "check": status_text(check),
                    "audit": audit_text(check, has_audit)
                    if audited is None
                    else call_verdict(audited, call.seq),
                }
            )
        for index in self.verification.not_executed:
            planned_call = self.plan.calls[index]
            rows.append(
                {
                    "real": Text("–"),
                    "#": Text("–"),
                    "plan": Text(str(planned_call.seq)),
                    "tool": cell(planned_call.tool, COLUMN_CELLS["tool"]),
                    "call": cell(planned_call.tool, COLUMN_CELLS["call"]),
                    "check": role_text("not executed", "warn"),
                    "audit": Text(""),
                }
            )
        return rows

    @on(DataTable.RowHighlighted, "#verification")
    def show_detail(self, event: DataTable.RowHighlighted) -> None:
        if self.verification is None:
            return
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
            if check.audit_fields:
                text.append_text(
                    field_changes_text("the audit log says otherwise:", check.audit_fields, "danger")
                )
            if self.audited is not None:
                text.append_text(call_detail(self.audited, call.seq, http=call.request is not None))
            if call.outcome is not None:
                text.append("answer  ", "bold")
                text.append(f"{call.outcome.http_status or ''} ")
                text.append(untrusted(call.outcome.message or call.outcome.result or "", limit=2_000))
                text.append("\n")
            text.append("args    ", "bold")
            text.append(untrusted(call.args or {}, multiline=True))
        self.query_one("#detail", Static).update(text)
