"""The verification view's words for a run held against an audit source by its runner (docs/design.md,
"Verifying against audit logs"): which source was read, how many calls it shows, each call's verdict, and the
writes nobody approved.

The verification is the runner's report, and every string in it comes from the API's log, which anyone
who can reach the API writes into: each is sanitized and clipped again here, whatever the runner did.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.text import Text

from reviewer.audit.rows import utc_time
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


BY_TIME = "time of the tool call"
"""How the runner matched a tool's write that is no HTTP request (`reviewer.audit.matching`)."""
MATCHED_WORDS = {
    "request id": ("matched", "ok", "matched", "by request id"),
    "method, path, query and time": (
        "matched line",
        "ok",
        "matched",
        "by method, path and query, the nearest in time (the log keeps no request id)",
    ),
    BY_TIME: (
        "near in time",
        "warn",
        "near in time",
        "tied by time alone: another client's write in that second could be taken for it",
    ),
}
"""Each way a call is matched: the audit column's words and role, then the detail's words and how."""


def _entry(audited: AuditVerification, seq: int) -> AuditedCall | None:
    return next((call for call in audited["calls"] if call["seq"] == seq), None)


def call_verdict(audited: AuditVerification, seq: int, *, refused: bool = False) -> Text:
    """The audit column of one call: what the source shows of it, and how strongly; a call the API
    `refused` that the verification does not list was not looked for (a log of kept writes has none)."""
    entry = _entry(audited, seq)
    if entry is None:  # its runner did not hold this call against the log (an unread log lists none)
        return role_text("not kept" if refused and audited["complete"] else "not checked", "muted")
    if entry["verdict"] == "matched":
        words, role, _, _ = MATCHED_WORDS.get(entry.get("matched_by") or "", ("matched", "ok", "", ""))
        return role_text(words, role)
    return role_text(entry["verdict"], "danger")  # differs (the detail says how), missing, ambiguous


def call_detail(audited: AuditVerification, seq: int, *, http: bool, refused: bool = False) -> Text:
    """The selected call as the audit source shows it, for the detail pane; `http` says whether the
    call was an HTTP request (a tool's write that is none is tied to the log by time alone)."""
    entry = _entry(audited, seq)
    text = Text()
    text.append("audit   ", "bold")
    if entry is None and refused and audited["complete"]:
        text.append("not looked for: the API refused it, so it kept nothing a log of its writes would hold\n")
        return text
    if entry is None:
        text.append("not checked: the run's verification does not list this call\n")
        return text
    if entry["verdict"] == "missing":
        missing = (
            "no entry with its request id, nor its method, path and query\n"
            if http
            else "no write logged within a second of the time the tool ran\n"
        )
        text.append_text(role_text(missing, "danger"))
        return text
    if entry["verdict"] == "ambiguous":
        text.append_text(role_text("ambiguous", "danger"))
        where = entry.get("where") or "several entries"
        text.append(_shown(f": {where} could each be it, and no request id tells them apart"))
        text.append("\n")
        return text
    matched_by = entry.get("matched_by") or ""
    _, role, words, how = MATCHED_WORDS.get(matched_by, ("", "ok", "matched", f"by {matched_by or '?'}"))
    if entry["verdict"] == "differs":
        role, words = "danger", "differs"
    text.append_text(role_text(words, role))
    text.append(_shown(f" at {entry.get('where') or 'an unnamed line'}, {how}"))
    text.append("\n")
    for difference in entry.get("differences") or []:
        text.append_text(role_text(f"  {_shown(difference)}\n", "danger"))
    return text


def unplanned_writes(audited: AuditVerification) -> Text:
    """The section "Unplanned writes": each write in the run's window no approved call made, with its
    actor; or "none found" (which a log that cannot vouch for the run does not make a clean bill). Then
    how many entries were left out as the dry run's own, on the proposal's word, if any were."""
    text = _unplanned_list(audited)
    excluded = _excluded(audited)
    if excluded:
        text.append("\n")
        text.append_text(role_text(excluded, "warn"))
    return text


def _excluded(audited: AuditVerification) -> str:
    """`1 audit entry excluded as the dry run's own requests, by request ids the proposal names (...)`,
    or empty: the runner's count, worded as `reviewer verify` words it."""
    from reviewer.audit.matching import excluded_words

    count = audited.get("dry_run_entries_excluded") or 0
    return excluded_words(count) if isinstance(count, int) else ""


def _unplanned_list(audited: AuditVerification) -> Text:
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
    note = write.get("note")
    if note:
        text.append_text(role_text(_shown(f": {note}"), "danger"))
    return text


def _time_of_day(value: str | None) -> str:
    """A log time as `2026-12-02 01:00:03Z`; what does not read as a time, as it was written."""
    if not value:
        return "an unknown time"
    parsed = utc_time(value)
    return value if parsed is None else parsed.strftime("%Y-%m-%d %H:%M:%SZ")
