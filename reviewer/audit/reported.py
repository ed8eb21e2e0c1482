"""A real run's verification against an audit source, as its runner reports it to the queue
(docs/audit-logs.md).

The report names the source it read (`KIND:LOCATION`, never a credential: a URL's query is left out)
and lists the writes in the run's window no approved call made, each with its actor, so the app's
verification view shows them without reading the log itself. Every string comes from the log, which
anyone who can reach the API writes into: each is made visible (hidden characters escaped) and clipped
to the queue's limit before it leaves.
"""

from __future__ import annotations

from typing import Final

from reviewer.audit.matching import AuditMatch, CallInLog
from reviewer.audit.rows import AuditRow
from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.messages import (
    MAX_UNPLANNED_LISTED,
    AuditedCall,
    AuditVerification,
    UnplannedWrite,
)

TEXT_LIMIT: Final = 500
"""The queue's limit on one audit string (`reviewer.queue.messages.AuditText`)."""


def reported_audit(result: AuditMatch, source_name: str) -> AuditVerification:
    """The verification as the report carries it: each call's verdict and the unplanned writes."""
    verification = AuditVerification(
        source=_text(source_name),
        complete=result.complete,
        calls=[_call(one) for one in result.calls],
        unplanned=[unplanned_write(one.row, one.notes) for one in result.unplanned[:MAX_UNPLANNED_LISTED]],
        unplanned_count=len(result.unplanned),
    )
    if result.gate_dry_runs:
        verification["dry_run_entries_excluded"] = result.gate_dry_runs
    if result.rows_in_window == 0:
        verification["problem"] = f"no entries in the run's window ({result.rows_read} read)"
    elif result.malformed_count:
        first = result.malformed[0]
        verification["problem"] = _text(
            f"{result.malformed_count} lines could not be read, first {first.where} ({first.problem})"
        )
    return verification


def unreadable_audit(source_name: str, error: str) -> AuditVerification:
    """A source that could not be read after the run: nothing is verified, and the report says why."""
    return _unverified(source_name, _text(f"could not be read: {error}"))


def late_audit(source_name: str, seconds: float) -> AuditVerification:
    """A source not read to its end in time after the run: the report went without waiting longer."""
    return _unverified(
        source_name, f"not read in time: still reading after {seconds:g} s, the report was sent without it"
    )


def _unverified(source_name: str, problem: str) -> AuditVerification:
    return AuditVerification(
        source=_text(source_name), complete=False, calls=[], unplanned=[], unplanned_count=0, problem=problem
    )


def unplanned_write(row: AuditRow, notes: tuple[str, ...] = ()) -> UnplannedWrite:
    """One log entry as the report lists it: what, status, request id, actor, time, where, and what
    makes it stand out (`reuses call 2's request id`)."""
    write = UnplannedWrite(
        method=_text(row.method)[:20],
        path=_text(f"{row.path}?{row.query}" if row.query else row.path),
        where=_text(row.where),
    )
    if row.action:
        write["action"] = _text(row.action)
    if row.status is not None:
        write["status"] = row.status
    if row.request_ids:
        write["request_id"] = _text(row.request_ids[0])
    if row.actor:
        write["actor"] = _text(row.actor)
    if row.time is not None:
        write["time"] = row.time.isoformat()
    if row.error:
        write["action"] = _text(f"{row.action or ''} {row.error}".strip())
    if notes:
        write["note"] = _text("; ".join(notes))
    return write


def _call(result: CallInLog) -> AuditedCall:
    call = AuditedCall(seq=result.call.seq, verdict=result.verdict)
    if result.row is not None:
        call["where"] = _text(result.row.where)
    elif result.candidates:
        call["where"] = _text(", ".join(row.where for row in result.candidates))
    if result.matched_by is not None:
        call["matched_by"] = result.matched_by
    if result.differences:
        call["differences"] = [_text(difference) for difference in result.differences[:10]]
    return call


def _text(value: str) -> str:
    return clip(safe_text(value), TEXT_LIMIT)
