"""An agent's own runs held against an audit source, in process (docs/audit-logs.md): a real run call by call
(`audit_execution`), and the alarm on a plan before anyone approves it, the writes in the API's log
during the dry run that the gate did not make (`writes_during_dry_run`), such as a child process that
wrote around the gate.

During a server dry run every request the gate sends carries a request id of its own: an entry with
one of them is the gate's dry-run request. Every other write in the window was made by someone else,
whatever its query asks (`?dry_run=1` is a write to an API that does not know the parameter). Whether
the API honoured the gate's own dry-run requests the log says only where its format records it.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

import httpx
import msgspec

from reviewer.audit.inputs import AuditSourceUnreadable
from reviewer.audit.matching import (
    AuditMatch,
    RequestLine,
    SentCall,
    Window,
    match_audit,
    sent_calls,
    tool_calls,
)
from reviewer.audit.registry import AuditSource
from reviewer.audit.reported import reported_audit, unreadable_audit
from reviewer.audit.rows import MalformedLine
from reviewer.plan.proposal import Call, Proposal
from reviewer.queue.messages import AuditVerification


class _Approved(Protocol):
    @property
    def proposal(self) -> Proposal: ...


class RealRun(Protocol):
    """What `audit_execution` reads of a real run (`reviewer.agent.Execution`, which sits above this)."""

    @property
    def approval(self) -> _Approved: ...

    def executed_calls(self) -> list[Call]: ...

    def request_ids(self) -> Sequence[Mapping[str, Any]]: ...

    def tool_spans(self) -> Sequence[Mapping[str, Any]]: ...


def check_readable(source: AuditSource) -> None:
    """`AuditSourceUnreadable` unless the source's first entry reads as one now: a missing file, a
    refused URL or a document that is no log is said before anything starts, not after."""
    first = next(iter(source.rows()), None)
    if isinstance(first, MalformedLine):
        raise AuditSourceUnreadable(f"its first entry does not read as one: {first.where} {first.problem}")


def writes_during_dry_run(
    source: AuditSource,
    started_at: datetime,
    finished_at: datetime,
    dry_run_ids: Collection[str] = (),
    slack: timedelta = timedelta(seconds=2),
    dry_run_lines: Mapping[str, RequestLine] | None = None,
) -> AuditMatch:
    """The log read for the dry run's window: `unplanned` are the writes the gate did not make (its own
    requests known by `dry_run_ids`, or by their lines where the log keeps no id of theirs); a log with
    no entry in the window (`complete` false) cannot say there were none."""
    window = Window(started_at, finished_at, slack)
    return match_audit((), source.rows(), window, dry_run_ids, dry_run_lines=dry_run_lines)


def alarm_line(result: AuditMatch, source: AuditSource) -> str:
    """`dry run: 1 writes during the dry run the gate did not make (access-log:/x read, 40 entries in
    the window)`, or why the log cannot say; and what it says of the gate's own dry-run requests: kept
    writes, in a log that holds only those (`api:`, `sample:`), or nothing about whether the API
    honoured them, in a log of every request."""
    if source.keeps_only_kept_writes and not result.malformed_count:
        kept = result.gate_dry_runs
        line = (
            f"dry run: {len(result.unplanned)} writes during the dry run the gate did not make, "
            f"{kept} of its own requests kept by the API ({source.name} read, a log of kept writes)"
        )
        return line + ("; the API ignored the dry-run parameter" if kept else "")
    if result.rows_in_window == 0:
        return (
            f"dry run: {source.name} cannot vouch for the dry run's window: it holds no entry in it "
            f"({result.rows_read} read)"
        )
    if result.malformed_count:
        return (
            f"dry run: {len(result.unplanned)} writes during the dry run the gate did not make, as far as "
            f"{source.name} could be read ({result.malformed_count} lines could not be read)"
        )
    line = (
        f"dry run: {len(result.unplanned)} writes during the dry run the gate did not make "
        f"({source.name} read, {result.rows_in_window} entries in the window)"
    )
    if result.gate_dry_runs:
        line += (
            f"; it holds {result.gate_dry_runs} of the gate's dry-run requests and does not say whether "
            "the API honoured them as dry runs"
        )
    return line


def audit_execution(
    execution: RealRun, source: AuditSource, slack: timedelta = timedelta(seconds=5)
) -> AuditMatch:
    """A real run just made, against the log: its window runs from its first write to now (the queue's
    claim and report, which `reviewer verify` uses, are not known in process)."""
    base_url = execution.approval.proposal.target.base_url
    calls = sent_calls(
        [msgspec.to_builtins(call) for call in execution.executed_calls()],
        list(execution.request_ids()),
        httpx.URL(base_url).path if base_url else "",
    )
    calls += tool_calls(execution.tool_spans())
    now = datetime.now(UTC)
    start = min((call.sent_at for call in calls if call.sent_at is not None), default=now)
    dry_run_ids = execution.approval.proposal.dry_run.request_ids or ()
    return run_against(source, calls, Window(start, now, slack), dry_run_ids)


def run_against(
    source: AuditSource, calls: Sequence[SentCall], window: Window, dry_run_ids: Collection[str] = ()
) -> AuditMatch:
    """A real run's calls held against the source, the one way every reader of a run does it (in
    process after the run, and `reviewer verify` from the stored report). A log of kept writes only
    (`api:`, `sample:`) holds no entry of a call the API refused: such a call is not looked for, and an
    entry carrying its request id is a write no approved call made."""
    if source.keeps_only_kept_writes:
        calls = [call for call in calls if call.http_status is None or call.http_status < 400]
    return match_audit(calls, source.rows(), window, dry_run_ids, source.keeps_request_ids)


def verify_run(execution: RealRun, source: AuditSource) -> tuple[AuditMatch | None, AuditVerification]:
    """`audit_execution`, and what the run's report says of it; a source that cannot be read is no
    match (None), and the report says why. So is a reader that fails in its own way (a kind a package
    added): the run's report goes to the queue whatever the log did. No secret of the location (a
    URL's query or user info, a header's value) reaches the report, whatever the error quotes."""
    try:
        result = audit_execution(execution, source)
    except AuditSourceUnreadable as error:
        return None, unreadable_audit(source.name, source.input.redacted(str(error)))
    except Exception as error:
        failed = f"its reader failed: {type(error).__name__}: {error}"
        return None, unreadable_audit(source.name, source.input.redacted(failed))
    return result, reported_audit(result, source.name)
