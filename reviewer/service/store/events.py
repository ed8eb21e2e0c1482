"""The notifications the queue sends, as plain functions of the stores' rows: which event is due, its key
and its document.

Each store writes an event's document to its outbox in the transaction that makes the event true,
one row per notification target; the delivery loop sends it later. Keeping the documents and the
"is a reminder due" arithmetic here means SQLite and PostgreSQL write the same bytes, and both are
unit-tested without a database. Every string an agent wrote is passed through `safe_text` and
clipped: a receiver may show it as it is.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, Final, Literal, get_args

import msgspec

from reviewer.plan.proposal import parse_proposal
from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.ids import review_command
from reviewer.reading.summary import PlanReading, from_stored, one_line, read_plan
from reviewer.service.rules import Row, required_timestamp

EventName = Literal[
    "proposal.waiting",
    "proposal.reminder",
    "proposal.escalated",
    "proposal.decided",
    "proposal.changes_requested",
    "proposal.expired",
    "proposal.break_glass",
    "run.ended",
    "run.unknown",
]
EVENT_NAMES: Final[tuple[EventName, ...]] = get_args(EventName)
FORMAT: Final = "reviewer.event/v1"
MAX_TEXT_CHARS: Final = 300
"""An agent's title in a page or a chat line: enough to recognise the plan, never a 10 MB string."""


def agent_text(text: str | None) -> str | None:
    """An agent's string as a notification carries it: hidden characters shown, and clipped."""
    return None if text is None else clip(safe_text(text), MAX_TEXT_CHARS)


class _Target(msgspec.Struct):
    api: str = ""
    base_url: str | None = None
    environment: str | None = None


class _DryRun(msgspec.Struct):
    write_requests: int | None = None
    writes_kept: int | None = None


class _Plan(msgspec.Struct):
    """The parts of a stored proposal an event names; msgspec skips the calls unread."""

    target: _Target = msgspec.field(default_factory=_Target)
    dry_run: _DryRun = msgspec.field(default_factory=_DryRun)


_plan_decoder: Final = msgspec.json.Decoder(_Plan)


def event_key(event: EventName, proposal_id: str, revision: int, detail: str = "") -> str:
    """What makes two events one: a retry, a second replica's sweep or a restart writes the same key,
    and the outbox keeps one row per key and target."""
    return f"{event}:{proposal_id}:{revision}" + (f":{detail}" if detail else "")


def chosen(events: frozenset[str], document: dict[str, Any]) -> bool:
    """Whether a target given `events` (`--notify EVENTS=URL`) gets `document`: its event named, or
    for a step of a ladder, the event and that step (`proposal.escalated:2`)."""
    event = document["event"]
    return event in events or ("step" in document and f"{event}:{document['step']}" in events)


def reminder_number(submitted_at: float, now: float, remind_after: float | None) -> int:
    """How many `remind_after` periods a proposal has waited: 0 before the first reminder is due.

    A service that was down for three periods sends the third reminder, not three at once.
    """
    if remind_after is None or remind_after <= 0 or now < submitted_at + remind_after:
        return 0
    return math.floor((now - submitted_at) / remind_after)


def _base(event: EventName, proposal_id: str, revision: int, now: float) -> dict[str, Any]:
    return {
        "format": FORMAT,
        "event": event,
        "at": required_timestamp(now).isoformat(),
        "proposal_id": proposal_id,
        "revision": revision,
        "open": review_command(proposal_id),
    }


MAX_ALARMS: Final = 10
"""Alarms an event names; a plan can raise a few more, and the review screen shows them all."""


def reading_document(reading: PlanReading) -> dict[str, Any]:
    """What a plan does, for a page to say in one line: the counts of each effect, the alarms (by
    name, in words), the money it moves per currency, and `summary`, all of it in one sentence:
    "2 updates, 1 delete in production; 1 real refusal" (`reviewer.reading.summary.one_line`)."""
    return {
        "counts": {
            "creates": reading.creates,
            "updates": reading.updates,
            "deletes": reading.deletes,
            "other": reading.reads + reading.unknown,
            "destructive": reading.destructive,
        },
        "alarms": [{"name": alarm.name, "text": alarm.text} for alarm in reading.alarms[:MAX_ALARMS]],
        "totals": [total.as_json() for total in reading.totals],
        "summary": one_line(reading),
    }


READINGS_KEPT: Final = 1024
"""Readings of plans stored before the queue kept one beside each proposal, remembered by digest: a
reminder or a list page reads such a plan once per process, not once per sweep or poll."""
_readings: OrderedDict[str, PlanReading] = OrderedDict()
_readings_lock = threading.Lock()


def row_reading(row: Row, body: Callable[[], bytes]) -> PlanReading:
    """The reading stored in a `proposals` row; for a row stored before readings were kept, the
    reading of its revision's `body()`, read once and remembered by digest (a digest names one
    plan, so what it says of the plan never changes)."""
    if row["summary"] is not None:
        return from_stored(row["summary"])
    plan_sha256 = row["plan_sha256"]
    with _readings_lock:
        known = _readings.get(plan_sha256)
    if known is None:
        known = read_plan(parse_proposal(body(), "stored proposal"))
        with _readings_lock:
            _readings[plan_sha256] = known
            while len(_readings) > READINGS_KEPT:
                _readings.popitem(last=False)
    return known


def waiting(
    row: Row,
    body: bytes,
    now: float,
    event: EventName = "proposal.waiting",
    reading: PlanReading | None = None,
    runs_from: datetime | None = None,
) -> dict[str, Any]:
    """`proposal.waiting` (or `proposal.reminder`) for a `proposals` row and its revision's stored body;
    `reading` is the body's, `row_reading` of the row when not given. `runs_from` is set when the
    plan's change windows would not let it run now (`runs_from` null: none lets it soon)."""
    plan = _plan_decoder.decode(body)
    if reading is None:
        reading = row_reading(row, lambda: body)
    return {
        **_base(event, row["proposal_id"], row["latest_revision"], now),
        "title": agent_text(row["title"]),
        "agent": agent_text(row["agent_name"]),
        "proposed_by": row["owner"],
        "api": agent_text(plan.target.api),
        "environment": agent_text(plan.target.environment),
        "base_url": agent_text(plan.target.base_url),
        "calls": row["call_count"],
        "write_requests": plan.dry_run.write_requests,
        "writes_kept": plan.dry_run.writes_kept,
        "plan_sha256": row["plan_sha256"],
        "submitted_at": required_timestamp(row["submitted_at"]).isoformat(),
        "waited_seconds": max(0, round(now - row["submitted_at"])),
        "expires_at": required_timestamp(row["pending_expires_at"]).isoformat(),
        **reading_document(reading),
        **({} if runs_from is None else {"runs_from": runs_from.isoformat()}),
    }


def break_glass(
    row: Row, reviewer: str, reason: str, given: Sequence[str], required: int | None, now: float
) -> dict[str, Any]:
    """`proposal.break_glass`: a reviewer approved so that the plan may run outside its change windows,
    why, and who broke glass so far of how many it takes."""
    return {
        **_base("proposal.break_glass", row["proposal_id"], row["latest_revision"], now),
        "title": agent_text(row["title"]),
        "reviewer": reviewer,
        "reason": agent_text(reason),
        "break_glass": list(given),
        "break_glass_required": required,
        "plan_sha256": row["plan_sha256"],
    }


def escalated(row: Row, body: bytes, now: float, step: int, of: int) -> dict[str, Any]:
    """`proposal.escalated`: what `proposal.waiting` says, at `step` of the environment's `of`
    escalation steps, for whoever that step pages."""
    return {**waiting(row, body, now, "proposal.escalated"), "step": step, "of": of}


def decided(row: Row, now: float, event: EventName = "proposal.decided") -> dict[str, Any]:
    """`proposal.decided`: approved (a quorum met) or rejected, by whom and why; or
    `proposal.changes_requested`: by whom, and what to change (`reason`)."""
    return {
        **_base(event, row["proposal_id"], row["latest_revision"], now),
        "title": agent_text(row["title"]),
        "decision": row["decision"],
        "decided_by": row["decided_by"],
        "reason": agent_text(row["reason"]),
        "plan_sha256": row["plan_sha256"],
    }


def run_ended(
    row: Row, claim: Row, ended: str | None, calls: Sequence[object], reported_by: str, now: float
) -> dict[str, Any]:
    """`run.ended`: how the claimed run ended, how many calls it sent, and how many the API kept
    (a call whose outcome is `ok`).

    `calls` are a report's calls as the service holds them: each the JSON bytes it was sent as
    (`msgspec.Raw`, from `bodies.parse_report`), or already a dict."""
    kept = sum(1 for call in calls if call_status(call) == "ok")
    return {
        **_base("run.ended", claim["proposal_id"], claim["revision"], now),
        "title": agent_text(row["title"]),
        "ended": ended,
        "claim_id": claim["claim_id"],
        "reported_by": reported_by,
        "calls_sent": len(calls),
        "calls_kept": kept,
        "plan_sha256": claim["plan_sha256"],
    }


class _CallStatus(msgspec.Struct):
    """The two places a call's status may be; msgspec skips the rest of the call unread."""

    outcome: msgspec.Raw = msgspec.Raw(b"null")
    status: Any = None


class _OutcomeStatus(msgspec.Struct):
    status: Any = None


def call_status(call: object) -> object:
    """A reported call's `outcome.status` (or its `status`), whether it is held as bytes or a dict."""
    if isinstance(call, Mapping):
        outcome = call.get("outcome")
        return outcome.get("status") if isinstance(outcome, Mapping) else call.get("status")
    if not isinstance(call, msgspec.Raw):
        return None
    try:
        parts = _call_decoder.decode(call)
        if bytes(parts.outcome).lstrip().startswith(b"{"):
            return _outcome_decoder.decode(parts.outcome).status
    except msgspec.DecodeError:  # the route checked it is an object; a call it is not counts as not kept
        return None
    return parts.status


_call_decoder: Final = msgspec.json.Decoder(_CallStatus)
_outcome_decoder: Final = msgspec.json.Decoder(_OutcomeStatus)


def run_unknown(row: Row, now: float) -> dict[str, Any]:
    """`run.unknown`: a claim's lease ran out without a report; the run may have written."""
    return {
        **_base("run.unknown", row["proposal_id"], row["latest_revision"], now),
        "title": agent_text(row["title"]),
        "claim_id": row["claim_id"],
        "claimed_by": row["claimed_by"],
        "claimed_at": required_timestamp(row["claimed_at"]).isoformat(),
        "lease_expired_at": required_timestamp(row["lease_expires_at"]).isoformat(),
        "plan_sha256": row["plan_sha256"],
    }


def expired(row: Row, now: float) -> dict[str, Any]:
    """`proposal.expired`: a pending revision no reviewer decided in time (`was: pending`), or an
    approval no run claimed before it lapsed (`was: approved`); either authorizes nothing now."""
    approved = row["decision"] == "approve"
    lapsed_at = row["approval_expires_at"] if approved else row["pending_expires_at"]
    return {
        **_base("proposal.expired", row["proposal_id"], row["latest_revision"], now),
        "title": agent_text(row["title"]),
        "was": "approved" if approved else "pending",
        "decided_by": row["decided_by"] if approved else None,
        "expired_at": required_timestamp(lapsed_at).isoformat(),
        "plan_sha256": row["plan_sha256"],
    }


def with_id(body: bytes, event_id: str) -> bytes:
    """An event's body as it is delivered: an event queued by a release that wrote no `id` into it
    gets its delivery id there (the same on every retry, as `Reviewer-Delivery` is), placed as
    `encode` places it; any other body is sent as it was stored. A body `encode` wrote (the `id`
    right after the `format`, where it puts it) is returned as it is, never decoded: a listing of
    the outbox reads each row's bytes once."""
    if _id_placed(body):
        return body
    try:
        document = msgspec.json.decode(body)
    except msgspec.DecodeError:
        return body
    if not isinstance(document, dict) or "id" in document or "format" not in document:
        return body
    return encode(document, event_id)


def _id_placed(body: bytes) -> bool:
    """Whether `body` opens as `encode` writes one: `{"format":"...","id":` (a format is plain text,
    no quote or escape in it)."""
    opening = b'{"format":"'
    if not body.startswith(opening):
        return False
    end = body.find(b'"', len(opening))
    return end != -1 and b"\\" not in body[len(opening) : end] and body.startswith(b',"id":', end + 1)


def encode(document: dict[str, Any], event_id: str) -> bytes:
    """The bytes that are stored, signed and sent: the same on every retry. They hold the event's id
    (sent as `Reviewer-Delivery` too), so the signature covers it: a captured delivery re-sent under
    another id no longer passes a receiver's check and its de-duplication."""
    return msgspec.json.encode({"format": document["format"], "id": event_id, **document})
