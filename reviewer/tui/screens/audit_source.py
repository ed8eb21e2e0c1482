"""The verification view's words for a run held against an audit source by its runner (DESIGN 16): which
source was read, how many calls it shows, each call's verdict, and the writes nobody approved.

The verification is the runner's report, and every string in it comes from the API's log, which anyone
who can reach the API writes into: each is sanitized and clipped again here, whatever the runner did.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from rich.text import Text

from reviewer.plan.sanitize import clip, safe_text
from reviewer.tui.palette import role_text

if TYPE_CHECKING:  # read in the screen's worker, so the queue's models load off the first paint
    from reviewer.queue.messages import AuditedCall, AuditVerification, UnplannedWrite

SHOWN_CHARS = 200
"""Characters of one string from the log the view shows (a path, an actor); the rest is counted."""


def checked_audit(raw: dict[str, Any]) -> AuditVerification:
    """The report's verification checked against its shape; `msgspec.ValidationError` says where not."""
    import msgspec

    from reviewer.queue.messages import AuditVerification

    return msgspec.convert(raw, AuditVerification)


def _shown(value: object) -> str:
    return safe_text(clip(str(value), SHOWN_CHARS))


def source_summary(audited: AuditVerification) -> Text:
    """`verified against SOURCE: N of M match`, then why the log cannot vouch for the run, if it cannot."""
    calls = audited["calls"]
    matched = sum(call["verdict"] == "matched" for call in calls)
    clean = audited["complete"] and matched == len(calls) and audited["unplanned_count"] == 0
    text = Text(" verified against ")
    text.append(_shown(audited["source"]), "bold")
    text.append(": ")
    text.append_text(role_text(f"{matched} of {len(calls)} match", "ok" if clean else "danger"))
    if not audited["complete"]:
        problem = audited.get("problem") or "it has no entries for the run, or unreadable lines"
        text.append_text(role_text(f"\n the log cannot vouch for this run: {_shown(problem)}", "warn"))
    return text


def call_verdict(audited: AuditVerification, seq: int) -> Text:
    """The audit column of one call: what the source shows of it."""
    entry = next((call for call in audited["calls"] if call["seq"] == seq), None)
    if entry is None:
        return role_text("not HTTP", "muted")  # not an HTTP request: the log cannot tie it
    if entry["verdict"] == "matched":
        return role_text("matched", "ok")
    return role_text(entry["verdict"], "danger")  # differs (the detail says how), missing


def call_detail(audited: AuditVerification, seq: int) -> Text:
    """The selected call as the audit source shows it, for the detail pane."""
    entry: AuditedCall | None = next((call for call in audited["calls"] if call["seq"] == seq), None)
    text = Text()
    text.append("audit   ", "bold")
    if entry is None:
        text.append("not an HTTP request: the audit log cannot tie it to a line\n")
        return text
    if entry["verdict"] == "missing":
        text.append_text(
            role_text("no entry with its request id, nor its method, path and query\n", "danger")
        )
        return text
    text.append_text(call_verdict(audited, seq))
    text.append(_shown(f" at {entry.get('where') or 'an unnamed line'}, by {entry.get('matched_by') or '?'}"))
    text.append("\n")
    for difference in entry.get("differences") or []:
        text.append_text(role_text(f"  {_shown(difference)}\n", "danger"))
    return text


def unplanned_writes(audited: AuditVerification) -> Text:
    """The section "Unplanned writes": each write in the run's window no approved call made, with its
    actor; or "none found" (which a log that cannot vouch for the run does not make a clean bill)."""
    count = audited["unplanned_count"]
    if count == 0:
        text = Text.assemble(("Unplanned writes", "bold"), ": ")
        text.append_text(role_text("none found", "ok" if audited["complete"] else "warn"))
        if not audited["complete"]:
            text.append(" (the log cannot vouch for the run's window)")
        return text
    text = Text.assemble(("Unplanned writes", "bold"))
    text.append_text(role_text(f" ({count}): no approved call made them", "danger"))
    for write in audited["unplanned"]:
        text.append("\n")
        text.append_text(_write_line(write))
    if count > len(audited["unplanned"]):
        text.append(f"\n… and {count - len(audited['unplanned'])} more (reviewer verify lists them)")
    return text


def _write_line(write: UnplannedWrite) -> Text:
    """`DELETE /v1/tickets/t2 204 by mallory at 2026-12-02 01:00:03Z, id r-9 (access.log:10)`."""
    what = " ".join(part for part in (write["method"], write["path"], write.get("action") or "") if part)
    status = write.get("status")
    text = role_text(_shown(f"{what} {status}" if status is not None else what), "danger")
    text.append(" by ")
    text.append(_shown(write.get("actor") or "an unnamed actor"), "bold")
    text.append(_shown(f" at {_time_of_day(write.get('time'))}"))
    if write.get("request_id"):
        text.append(_shown(f", id {write.get('request_id')}"))
    where = write.get("where")
    if where:  # the file's name and line: the source above names its folder
        text.append(_shown(f" ({where.rpartition('/')[2]})"), "muted")
    return text


def _time_of_day(value: str | None) -> str:
    """A log time as `2026-12-02 01:00:03Z`; what does not read as a time, as it was written."""
    if not value:
        return "an unknown time"
    try:
        parsed = datetime.fromisoformat(value)
    except ValueError:
        return value
    if parsed.tzinfo is None:
        return parsed.strftime("%Y-%m-%d %H:%M:%S")
    return parsed.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
