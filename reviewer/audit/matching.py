"""A real run's calls against the API's own audit log: matched, differs, missing or ambiguous, and the
writes nobody approved (docs/audit-logs.md).

A call is found in the log by its request id (the id the executor sent, or the API's own id from its
answer), and only by it where the log keeps request ids: an entry with another id, or none, is never
taken for it. Only where the log keeps no request ids (or the run's report holds none for the call)
is it found by method, path and query among the id-less entries of the run's window, and only when
exactly one entry could be it: two candidates for one call leave it ambiguous, never picked. Never
by body equality alone: two creates with the same body are two writes. A write in the run's window
that no call accounts for is reported with its actor. The log is streamed: only the window's writes
and the entries carrying one of the run's ids are kept.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal
from urllib.parse import unquote

from reviewer.audit.rows import (
    WRITE_METHODS,
    AuditRow,
    MalformedLine,
    QueryPairs,
    query_pairs,
    utc_time,
)

Verdict = Literal["matched", "differs", "missing", "ambiguous"]
MatchedBy = Literal["request id", "method, path, query and time", "time of the tool call"]
TOOL_CALL_SLACK = timedelta(seconds=1)
"""How far a tool call's writes may be logged outside its span: a log's times are often whole seconds
(nginx's `$time_iso8601`)."""
MALFORMED_KEPT = 20
"""Malformed lines named one by one; past this they are counted."""


@dataclass(frozen=True, slots=True)
class SentCall:
    """One call of a run's report as it reached the API: what the log must show."""

    seq: int
    tool: str
    method: str
    path: str
    """The whole request path (the approved base URL's path and the call's), percent-decoded."""
    query: QueryPairs
    http_status: int | None
    request_ids: tuple[str, ...]
    sent_at: datetime | None = None
    answered_at: datetime | None = None
    """For a tool's write that is not an HTTP request (no method): when its answer came. The log's
    writes between `sent_at` and then are the tool's (`TOOL_CALL_SLACK` either side)."""

    @property
    def is_http(self) -> bool:
        return bool(self.method)


@dataclass(frozen=True, slots=True)
class Window:
    """From the run's claim to its report, widened by `slack` for clocks that disagree."""

    start: datetime
    end: datetime
    slack: timedelta = timedelta(seconds=5)

    def holds(self, time: datetime | None) -> bool:
        """An entry without a time is held to be in it: it cannot be placed, so it is not ignored."""
        return time is None or self.start - self.slack <= time <= self.end + self.slack


@dataclass(frozen=True, slots=True)
class RequestLine:
    """What identifies a request wherever it is written down: its method, its percent-decoded path,
    and its query as sorted text pairs, or None where a log records no query (then the query is not
    compared). The one test of "this log entry is that request" every matcher uses."""

    method: str
    path: str
    query: QueryPairs | None

    @classmethod
    def of(cls, method: str, path: str, query: Mapping[str, Any] | str | None) -> RequestLine:
        """A request line from its parts as a log or a request gives them: a path may carry its query
        (`/v1/x?a=1`); a query is raw text or a mapping (a list value is several pairs)."""
        bare, question, in_path = path.partition("?")
        if isinstance(query, Mapping):
            pairs: QueryPairs | None = tuple(
                sorted(
                    (str(name), _query_text(item))
                    for name, value in query.items()
                    for item in (value if isinstance(value, list | tuple) else [value])
                )
            )
        elif isinstance(query, str):
            pairs = query_pairs(query)
        else:
            pairs = query_pairs(in_path) if question else None
        return cls(method.upper(), unquote(bare), pairs)

    def agrees(self, other: RequestLine) -> bool:
        """Same method and path, and the same query where both record one."""
        return (
            self.method == other.method
            and self.path == other.path
            and (self.query is None or other.query is None or self.query == other.query)
        )


@dataclass(frozen=True, slots=True)
class CallInLog:
    """One call and the log entry that records it, or none."""

    call: SentCall
    verdict: Verdict
    row: AuditRow | None = None
    matched_by: MatchedBy | None = None
    differences: tuple[str, ...] = ()
    candidates: tuple[AuditRow, ...] = ()
    """For an ambiguous call: the log's entries any of which could be it (none is picked)."""


@dataclass(frozen=True, slots=True)
class Unplanned:
    """A write in the log no approved call made, and what makes it stand out."""

    row: AuditRow
    reuses: int | None = None
    """The seq of the run's call whose request id it carries: another client that read the id."""
    reuses_dry_run: bool = False
    """It carries the id of one of the gate's own dry-run requests, already seen on another entry."""

    @property
    def notes(self) -> tuple[str, ...]:
        notes = []
        if self.reuses is not None:
            notes.append(f"reuses call {self.reuses}'s request id")
        if self.reuses_dry_run:
            notes.append("reuses the request id of one of the gate's dry-run requests")
        if self.row.dry_run_param and not self.row.is_dry_run:
            notes.append("its query asks for a dry run, but it is none of the gate's dry-run requests")
        return tuple(notes)


def unplanned_rows(unplanned: Iterable[Unplanned]) -> list[AuditRow]:
    """The log entries of unplanned writes, without what the matcher noticed about them."""
    return [one.row for one in unplanned]


@dataclass(frozen=True)
class AuditMatch:
    """The run held against the log, and how much of the log was read to say so."""

    calls: tuple[CallInLog, ...]
    unplanned: tuple[Unplanned, ...]
    rows_read: int
    rows_in_window: int
    dry_runs_in_window: int
    malformed: tuple[MalformedLine, ...] = ()
    malformed_count: int = 0
    gate_dry_runs: int = 0
    """Entries the gate's own dry-run requests left, known by the request ids it sent them with: the
    log shows they were asked, not whether the API honoured the dry run. The ids are the proposal's
    (`dry_run.request_ids`), written by whoever ran the dry run: these entries are left out on the
    proposal's word (`excluded_words`)."""

    @property
    def matched(self) -> int:
        return sum(1 for call in self.calls if call.verdict == "matched")

    @property
    def complete(self) -> bool:
        """Whether the log could vouch for the run: it had entries in the window and none unreadable."""
        return self.rows_in_window > 0 and self.malformed_count == 0

    @property
    def verified(self) -> bool:
        """Every call matched, no write nobody approved, and a log that could say so."""
        return self.complete and self.matched == len(self.calls) and not self.unplanned

    @property
    def summary(self) -> str:
        return (
            f"audit: {self.matched} of {len(self.calls)} calls matched; "
            f"{len(self.unplanned)} writes in the audit log no approved call made"
        )


def excluded_words(count: int) -> str:
    """What a verification says of the entries it left out as the dry run's own (`gate_dry_runs`);
    empty for none.

    The request ids come from the proposal, and so from whoever ran its dry run: `reviewer run`'s gate,
    or for the Python library the agent's own process. Nothing in a plan records which in a way the
    agent could not write itself (`dry_run.via` and the agent's name are the submitter's to set, and
    `dry_run` is outside the digest), so the words always say it rests on the proposal, never on the
    gate: an agent that names an id chooses which entry is taken for its own dry run's."""
    if count <= 0:
        return ""
    entries = "audit entry" if count == 1 else "audit entries"
    return (
        f"{count} {entries} excluded as the dry run's own requests, by request ids the proposal names "
        "(the proposal's word, not the API's)"
    )


def sent_calls(
    calls: Sequence[Mapping[str, Any]], request_ids: Sequence[Mapping[str, Any]], base_path: str = ""
) -> list[SentCall]:
    """The report's HTTP calls (`calls` as the queue stores them) with their request ids, by seq.

    The report is the agent's word, free-form where the queue does not check it: a value of the wrong
    kind reads as absent, never as a crash of the verification."""
    ids_by_seq = {entry.get("seq"): entry for entry in request_ids}
    found: list[SentCall] = []
    for call in calls:
        request, outcome, seq = call.get("request"), call.get("outcome"), call.get("seq")
        if not isinstance(request, Mapping) or not isinstance(seq, int):
            continue
        ids = ids_by_seq.get(seq, {})
        query = request.get("query")
        line = RequestLine.of(
            str(request.get("method", "")),
            base_path.rstrip("/") + str(request.get("path", "")),
            query if isinstance(query, Mapping) else {},
        )
        status = outcome.get("http_status") if isinstance(outcome, Mapping) else None
        found.append(
            SentCall(
                seq=seq,
                tool=str(call.get("tool", "")),
                method=line.method,
                path=line.path,
                query=line.query or (),
                http_status=status if type(status) is int else None,
                request_ids=tuple(str(ids[key]) for key in ("request_id", "api_request_id") if ids.get(key)),
                sent_at=_utc_time(ids.get("sent_at")),
            )
        )
    return found


def tool_calls(spans: Sequence[Mapping[str, Any]]) -> list[SentCall]:
    """The run's tool writes that are not HTTP requests (`seq`, `tool`, `sent_at`, `answered_at`), as
    calls found in the log by their time alone."""
    return [
        SentCall(
            seq=span["seq"],
            tool=str(span.get("tool", "")),
            method="",
            path="",
            query=(),
            http_status=None,
            request_ids=(),
            sent_at=_utc_time(span.get("sent_at")),
            answered_at=_utc_time(span.get("answered_at")),
        )
        for span in spans
        if isinstance(span.get("seq"), int)
    ]


def _utc_time(text: Any) -> datetime | None:
    """A time the report wrote as ISO 8601 text, as an aware UTC time; None for anything else."""
    return utc_time(text) if isinstance(text, str) else None


def _query_text(value: Any) -> str:
    """A query value as it reads on the wire (httpx writes booleans in lower case)."""
    if isinstance(value, bool):
        return str(value).lower()
    return "" if value is None else str(value)


def match_audit(
    calls: Sequence[SentCall],
    entries: Iterable[AuditRow | MalformedLine],
    window: Window,
    dry_run_ids: Collection[str] = (),
    keeps_request_ids: bool | None = None,
    dry_run_lines: Mapping[str, RequestLine] | None = None,
) -> AuditMatch:
    """Each call against the log's `entries` (streamed once), and the writes no call made.

    `dry_run_ids` are the request ids the gate sent its own dry-run requests with: the first entry
    carrying one is that request, and not a write. Every other write in the window is a write,
    whatever its query says; so is every further entry carrying a run's id (one id, one entry).
    `dry_run_lines` gives each of those ids its request's line: a request whose id no entry carries
    takes the first entry with no id that records its line (a log that keeps no ids, or another
    header's), since nothing tells the two apart; one entry per request.
    `keeps_request_ids` is what the log's format says of itself; None (a format that may or may not
    keep them) reads it from the log: it keeps them when any entry read carries one."""
    run_ids = {request_id for call in calls for request_id in call.request_ids}
    gate_dry_runs = set(dry_run_ids)
    seen_dry_runs: set[str] = set()
    writes: list[AuditRow] = []
    borrowed: list[Unplanned] = []
    malformed: list[MalformedLine] = []
    malformed_count = rows_read = rows_in_window = dry_runs = own_dry_runs = 0
    any_ids = False
    for entry in entries:
        if isinstance(entry, MalformedLine):
            malformed_count += 1
            if len(malformed) < MALFORMED_KEPT:
                malformed.append(entry)
            continue
        rows_read += 1
        ids = entry.request_ids
        any_ids = any_ids or bool(ids)
        carries_run_id = bool(ids) and not run_ids.isdisjoint(ids)
        dry_run_id = next((request_id for request_id in ids if request_id in gate_dry_runs), None)
        if not window.holds(entry.time) and not carries_run_id and dry_run_id is None:
            continue
        rows_in_window += 1
        if dry_run_id is not None:
            if dry_run_id not in seen_dry_runs:
                seen_dry_runs.add(dry_run_id)
                own_dry_runs += 1
            else:
                borrowed.append(Unplanned(entry, reuses_dry_run=True))
        elif entry.is_dry_run:
            dry_runs += 1
        elif entry.counts_as_write or carries_run_id:
            writes.append(entry)
    claimed = _dry_runs_by_line(writes, dry_run_lines or {}, seen_dry_runs)
    own_dry_runs += len(claimed)
    reused: dict[int, int] = {}
    by_id: dict[str, list[int]] = {}  # each id's writes, in log order: no scan of the log per call
    for index, row in enumerate(writes):
        for request_id in row.request_ids:
            by_id.setdefault(request_id, []).append(index)
    results = [_by_request_id(call, writes, by_id, claimed, reused) for call in calls]
    keeps_ids = any_ids if keeps_request_ids is None else keeps_request_ids
    by_line = {  # a tool call has no request line: an empty one would match a row that names none
        at
        for at, result in enumerate(results)
        if _missing(result, http=True) and not (keeps_ids and result.call.request_ids)
    }
    asked = Counter(_request_line(results[at].call) for at in by_line)
    contested: set[int] = set()
    results = [
        _by_request_line(result.call, writes, claimed, asked, contested) if at in by_line else result
        for at, result in enumerate(results)
    ]
    claimed |= contested
    results = [  # last: what HTTP calls account for is theirs, whatever the time says
        _by_call_time(result.call, writes, claimed) if _missing(result, http=False) else result
        for result in results
    ]
    unplanned = tuple(
        Unplanned(row, reuses=reused.get(index))
        for index, row in enumerate(writes)
        if index not in claimed and (index in reused or window.holds(row.time))
    )
    return AuditMatch(
        calls=tuple(results),
        unplanned=(*borrowed, *unplanned),
        rows_read=rows_read,
        rows_in_window=rows_in_window,
        dry_runs_in_window=dry_runs + own_dry_runs,
        gate_dry_runs=own_dry_runs,
        malformed=tuple(malformed),
        malformed_count=malformed_count,
    )


def _dry_runs_by_line(
    writes: Sequence[AuditRow], lines: Mapping[str, RequestLine], found: Collection[str]
) -> set[int]:
    """The writes with no request id that the gate's dry-run requests not `found` by id take, by their
    method and path (and query, where the log records one): one write a request, first come."""
    missing = [line for request_id, line in lines.items() if request_id not in found]
    if not missing:
        return set()
    id_less: dict[tuple[str, str], list[int]] = {}
    for index, row in enumerate(writes):
        if not row.request_ids:
            line = RequestLine.of(row.method, row.path, row.query or None)
            id_less.setdefault((line.method, line.path), []).append(index)
    taken: set[int] = set()
    for request in missing:
        for index in id_less.get((request.method, request.path), ()):
            row = writes[index]
            if index not in taken and RequestLine.of(row.method, row.path, row.query or None).agrees(request):
                taken.add(index)
                break
    return taken


def _missing(result: CallInLog, *, http: bool) -> bool:
    """A call of that sort (an HTTP request, or a tool's write that is none) no write was found for yet:
    each call claims one write at most."""
    return result.verdict == "missing" and result.call.is_http == http


def _by_request_id(
    call: SentCall,
    writes: Sequence[AuditRow],
    by_id: Mapping[str, Sequence[int]],
    claimed: set[int],
    reused: dict[int, int],
) -> CallInLog:
    """One write carrying one of the call's ids: the first whose method, path and status class agree
    with the call's, else the first (which then differs). Every other write carrying one is a write no
    approved call made that borrowed the call's id (`reused`), except a further event of the same
    request in a format that logs several (Stripe's), when it agrees too."""
    carrying = sorted(
        {
            index
            for request_id in call.request_ids
            for index in by_id.get(request_id, ())
            if index not in claimed
        }
    )
    if not carrying:
        return CallInLog(call, "missing")
    judged = {index: _judged(call, writes[index], "request id") for index in carrying}
    chosen = next((index for index in carrying if judged[index].verdict == "matched"), carrying[0])
    claimed.add(chosen)
    for index in carrying:
        if index == chosen:
            continue
        if writes[index].events_per_request and judged[index].verdict == "matched":
            claimed.add(index)
        else:
            reused[index] = call.seq
    return judged[chosen]


def _request_line(call: SentCall) -> RequestLine:
    return RequestLine(call.method, call.path, call.query)


def _by_request_line(
    call: SentCall,
    writes: Sequence[AuditRow],
    claimed: set[int],
    asked: Counter[RequestLine],
    contested: set[int],
) -> CallInLog:
    """Among the window's writes that carry no id at all, the one of the same method, path and query,
    where there is exactly one and no other call of the run asks for the same line. Two candidates
    (another client's write beside ours, or two calls alike) are never told apart by time: the call
    is ambiguous, and its candidates go to `contested` (named on the call, claimed by no one)."""
    line = _request_line(call)
    candidates = [
        index
        for index, row in enumerate(writes)
        if index not in claimed
        and not row.request_ids
        and RequestLine.of(row.method, row.path, row.query).agrees(line)
    ]
    if not candidates:
        return CallInLog(call, "missing")
    if len(candidates) > 1 or asked[line] > 1:
        contested.update(candidates)
        rows = tuple(writes[index] for index in candidates)
        return CallInLog(call, "ambiguous", matched_by="method, path, query and time", candidates=rows)
    claimed.add(candidates[0])
    return _judged(call, writes[candidates[0]], "method, path, query and time")


def _by_call_time(call: SentCall, writes: Sequence[AuditRow], claimed: set[int]) -> CallInLog:
    """A tool's write that is not an HTTP request (an MCP server's, an SDK's): the unclaimed write
    logged nearest the time it ran (the earliest among equals), within `TOOL_CALL_SLACK`. One each, in
    call order, so calls a log's whole second cannot tell apart still take one write apiece; a tool
    that wrote twice leaves its second write unplanned, which says too much rather than hiding another
    client's write. Only time ties them: request ids are the stronger check."""
    if call.sent_at is None:
        return CallInLog(call, "missing")
    sent, answered = call.sent_at, call.answered_at or call.sent_at
    found = [
        (max(sent - row.time, row.time - answered, timedelta(0)), row.time, index)
        for index, row in enumerate(writes)
        if index not in claimed
        and row.time is not None
        and sent - TOOL_CALL_SLACK <= row.time <= answered + TOOL_CALL_SLACK
    ]
    if not found:
        return CallInLog(call, "missing")
    *_, index = min(found)
    claimed.add(index)
    return CallInLog(call, "matched", writes[index], "time of the tool call")


def _judged(call: SentCall, row: AuditRow, matched_by: MatchedBy) -> CallInLog:
    """Matched, or differs wherever the log and the run disagree, in what the log's format holds: the
    status, method and path of a request line; an error the API logged (CloudTrail's `errorCode`) for
    a call that succeeded; the operation (CloudTrail's `eventName` against the call's `Action`);
    what a vendor's event did (a Stripe event's type) against the call's method and path."""
    differences: list[str] = []
    succeeded = call.http_status is not None and call.http_status < 400
    if row.status is not None and call.http_status is not None and row.status != call.http_status:
        differences.append(f"status: run {call.http_status}, log {row.status}")
    if row.has_http_path and row.method and row.method != call.method:
        differences.append(f"method: run {call.method}, log {row.method}")
    if row.has_http_path and unquote(row.path) != call.path:
        differences.append(f"path: run {call.path}, log {unquote(row.path)}")
    if row.error is not None and (succeeded or call.http_status is None):
        differences.append(f"error: the run's call succeeded, the log says {row.error}")
    if not row.has_http_path and row.action:
        differences.extend(_operation_differences(call, row.action, events=row.events_per_request))
    if not row.has_http_path and not row.is_write and call.method in WRITE_METHODS:
        differences.append(f"operation: run {call.method}, log {row.action or row.method} (a read)")
    verdict: Verdict = "differs" if differences else "matched"
    return CallInLog(call, verdict, row, matched_by, tuple(differences))


def _operation_differences(call: SentCall, action: str, *, events: bool) -> list[str]:
    """A vendor's word for what the request did against what the call asked: an AWS `Action` the
    call named against the record's `eventName`; a Stripe event's type (`customer.deleted`) against
    the call's method and the resource its path names."""
    if not events:
        asked = dict(call.query).get("Action")
        if asked is not None and asked != action:
            return [f"operation: run {asked}, log {action}"]
        return []
    resource, _, happened = action.rpartition(".")
    problems = []
    if (happened == "deleted") != (call.method == "DELETE"):
        problems.append(f"event: run {call.method} {call.path}, log {action}")
    words = {segment[:-1] if segment.endswith("s") else segment for segment in call.path.split("/")}
    if resource and resource.rpartition(".")[2] not in words and not problems:
        problems.append(f"event: run {call.method} {call.path}, log {action} (another kind of object)")
    return problems
