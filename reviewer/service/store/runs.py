"""Runs: an approval claimed for one run, the report of that run stored under its claim, the
reports of a proposal as the agents sent them, and an approval its executor refused to claim, as
functions of one open transaction."""

from __future__ import annotations

import hashlib
import uuid
from datetime import datetime
from typing import Final

import msgspec

from reviewer.queue.messages import Claim, ClaimRequest, DecisionState, ExecutionReport, RefusalReport
from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.rules import Row
from reviewer.service.store import (
    change_windows,
    decisions,
    events,
    idempotency,
    index,
    outbox,
    refusals,
    tokens,
)
from reviewer.service.store.base import Clock, StoreState, Transaction


def claim_approval(
    store: StoreState,
    db: Transaction,
    identity: Identity,
    proposal_id: str,
    request: ClaimRequest,
    idempotency_key: str,
    fingerprint: str,
    now: float,
) -> tuple[bool, Claim]:
    """Take the approval for one run (`QueueStore.claim`) in the caller's write transaction."""
    row, earlier = idempotency.idempotent_write(
        db, identity, proposal_id, idempotency_key, fingerprint, "claim", Claim, store.clock
    )
    if earlier is not None:
        return True, earlier
    rules.check_claim(row, request.revision, request.plan_sha256, now)
    environment = decisions.environment(store, db, proposal_id, request.revision)
    cast = decisions.cast_decisions(db, proposal_id, request.revision, now)
    window = change_windows.window_state(store.policy, environment, cast, now)
    change_windows.require_may_run(window, proposal_id, request.revision)
    lease_expires_at = now + store.claim_lease
    claim = Claim(
        claim_id=uuid.uuid4().hex,
        proposal_id=proposal_id,
        revision=request.revision,
        plan_sha256=request.plan_sha256,
        claimed_by=identity.name,
        claimed_at=rules.required_timestamp(now),
        lease_expires_at=rules.required_timestamp(lease_expires_at),
        window=window,
    )
    db.run(
        "INSERT INTO claims (claim_id, decision_id, proposal_id, revision, plan_sha256, claimed_by, "
        "claimed_at, lease_expires_at) VALUES (:claim_id, :decision_id, :proposal_id, :revision, "
        ":plan_sha256, :claimed_by, :now, :lease_expires_at)",
        claim_id=claim.claim_id,
        decision_id=row["decision_id"],
        proposal_id=proposal_id,
        revision=request.revision,
        plan_sha256=request.plan_sha256,
        claimed_by=identity.name,
        now=now,
        lease_expires_at=lease_expires_at,
    )
    index.append_trail(
        db,
        now,
        identity.name,
        "claimed",
        proposal_id,
        request.revision,
        request.plan_sha256,
        identity=identity.principal,
    )
    db.run(
        "UPDATE proposals SET claim_id = :claim_id, claimed_by = :claimed_by, claimed_at = :now, "
        "lease_expires_at = :lease_expires_at, deadline = :lease_expires_at "
        "WHERE proposal_id = :proposal_id",
        claim_id=claim.claim_id,
        claimed_by=identity.name,
        now=now,
        lease_expires_at=lease_expires_at,
        proposal_id=proposal_id,
    )
    idempotency.remember(db, identity, idempotency_key, fingerprint, claim, now)
    return False, claim


def record_refusal(
    store: StoreState,
    db: Transaction,
    identity: Identity,
    proposal_id: str,
    report: RefusalReport,
    idempotency_key: str,
    fingerprint: str,
    now: float,
) -> tuple[bool, DecisionState]:
    """Store an executor's refusal of an approval it did not claim (`QueueStore.record_refusal`) in
    the caller's write transaction; the answer is the decision state that now lists it."""
    row, earlier = idempotency.idempotent_write(
        db, identity, proposal_id, idempotency_key, fingerprint, "refusal", DecisionState, store.clock
    )
    if earlier is not None:
        return True, earlier
    stored = db.one(
        "SELECT plan_sha256 FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
        proposal_id=proposal_id,
        revision=report.revision,
    )
    rules.check_refusal(
        row, None if stored is None else stored["plan_sha256"], report.revision, report.plan_sha256
    )
    refusals.append(db, identity, proposal_id, report, now)
    answer = decisions.voted_state(store, db, row, now)
    idempotency.remember(db, identity, idempotency_key, fingerprint, answer, now)
    return False, answer


def check_report_allowed(
    db: Transaction, identity: Identity, proposal_id: str, idempotency_key: str | None, clock: Clock
) -> None:
    """`QueueStore.check_report_allowed` in the caller's read transaction."""
    tokens.require_active(db, identity, clock)
    index.visible(db, identity, proposal_id)
    if idempotency_key is not None and idempotency.idempotent(db, identity, idempotency_key) is not None:
        return
    newest_claim = db.one(
        "SELECT claim_id, claim_id IN (SELECT claim_id FROM executions) AS reported FROM claims "
        "WHERE proposal_id = :proposal_id AND lower(claimed_by) = lower(:name) "
        "ORDER BY claimed_at DESC LIMIT 1",
        proposal_id=proposal_id,
        name=identity.name,
    )
    rules.require_open_claim(newest_claim, proposal_id)


def claim_of(
    db: Transaction, identity: Identity, proposal_id: str, claim_id: str | None
) -> tuple[Row | None, bool]:
    """The reporter's own claim named `claim_id`, and whether its run was already reported."""
    if claim_id is None:
        return None, False
    claim = db.one(
        "SELECT * FROM claims WHERE claim_id = :claim_id AND proposal_id = :proposal_id "
        "AND lower(claimed_by) = lower(:name)",
        claim_id=claim_id,
        proposal_id=proposal_id,
        name=identity.name,
    )
    reported = db.one("SELECT 1 AS reported FROM executions WHERE claim_id = :claim_id", claim_id=claim_id)
    return claim, reported is not None


def record_execution(
    store: StoreState,
    db: Transaction,
    identity: Identity,
    proposal_id: str,
    report: ExecutionReport,
    body: bytes | bytearray,
    idempotency_key: str | None,
    fingerprint: str,
    now: float,
) -> tuple[bool, DecisionState]:
    """Store the real run under its claim (`QueueStore.record_execution`) in the caller's write
    transaction."""
    _row, earlier = idempotency.idempotent_write(
        db,
        identity,
        proposal_id,
        idempotency_key,
        fingerprint,
        "execution report",
        DecisionState,
        store.clock,
    )
    if earlier is not None:
        return True, earlier
    claim_row, reported = claim_of(db, identity, proposal_id, report.claim_id)
    claim = rules.check_report(
        claim_row, reported, proposal_id, report.claim_id, report.revision, report.plan_sha256
    )
    db.run(
        "INSERT INTO executions (decision_id, claim_id, proposal_id, revision, reported_by, "
        "reported_at, ended, body) VALUES (:decision_id, :claim_id, :proposal_id, :revision, "
        ":reported_by, :now, :ended, :body)",
        decision_id=claim["decision_id"],
        claim_id=claim["claim_id"],
        proposal_id=proposal_id,
        revision=claim["revision"],
        reported_by=identity.name,
        now=now,
        ended=report.ended,
        body=body,
    )
    index.append_trail(
        db,
        now,
        identity.name,
        "executed",
        proposal_id,
        claim["revision"],
        claim["plan_sha256"],
        report.ended,
        identity=identity.principal,
        report_sha256=hashlib.sha256(body).hexdigest(),
    )
    # Only the revision this claim holds turns executed; a newer one keeps its own state.
    db.run(
        "UPDATE proposals SET executed_at = :now, deadline = NULL "
        "WHERE proposal_id = :proposal_id AND claim_id = :claim_id",
        now=now,
        proposal_id=proposal_id,
        claim_id=claim["claim_id"],
    )
    updated = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
    assert updated is not None
    if store.notifying.targets:
        outbox.emit(
            store,
            db,
            now,
            events.event_key("run.ended", proposal_id, claim["revision"], claim["claim_id"]),
            events.run_ended(updated, claim, report.ended, report.calls, identity.name, now),
        )
    answer = decisions.voted_state(store, db, updated, now)
    if idempotency_key is not None:
        idempotency.remember(db, identity, idempotency_key, fingerprint, answer, now)
    return False, answer


def execution_rows(db: Transaction, identity: Identity, proposal_id: str) -> list[Row]:
    """The reports stored for a proposal, oldest first (`QueueStore.list_executions`)."""
    index.visible(db, identity, proposal_id)
    return db.all(
        "SELECT reported_by, reported_at, claim_id, body FROM executions "
        "WHERE proposal_id = :proposal_id ORDER BY id",
        proposal_id=proposal_id,
    )


def execution_history(proposal_id: str, rows: list[Row]) -> bytes:
    """The JSON of `ExecutionHistory` of the rows `execution_rows` read, each report spliced in as sent."""
    executions = []
    for row in rows:
        report = msgspec.json.decode(bytes(row["body"]), type=_StoredReport)
        executions.append(
            _StoredExecutionWire(
                revision=report.revision,
                plan_sha256=report.plan_sha256,
                executed_by=row["reported_by"],
                at=rules.required_timestamp(row["reported_at"]),
                claim_id=row["claim_id"],
                ended=report.ended,
                calls=report.calls,
                unknown_outcomes=report.unknown_outcomes,
                audit_log=msgspec.UNSET if bytes(report.audit_log) == b"null" else report.audit_log,
                note=report.note,
                request_ids=msgspec.UNSET if bytes(report.request_ids) == b"null" else report.request_ids,
                audit=msgspec.UNSET if bytes(report.audit) == b"null" else report.audit,
            )
        )
    return msgspec.json.encode(_ExecutionHistoryWire(proposal_id=proposal_id, executions=executions))


_NULL: Final = msgspec.Raw(b"null")
"""An absent audit log as read (msgspec holds no `Raw` in a union with None); written as UNSET, left out."""


class _StoredReport(msgspec.Struct):
    """A stored report as the agent sent it (validated when it arrived), its lists left as bytes."""

    revision: int
    plan_sha256: str
    calls: msgspec.Raw
    claim_id: str | None = None
    ended: str | None = None
    unknown_outcomes: list[int] = []
    audit_log: msgspec.Raw = _NULL
    note: str | None = None
    request_ids: msgspec.Raw = _NULL
    audit: msgspec.Raw = _NULL


class _StoredExecutionWire(msgspec.Struct, omit_defaults=True):
    """`reviewer.queue.messages.StoredExecution` on the wire (its field order and names), by msgspec."""

    revision: int
    plan_sha256: str
    executed_by: str
    at: datetime
    calls: msgspec.Raw
    claim_id: str | None = None
    ended: str | None = None
    unknown_outcomes: list[int] = []
    audit_log: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    note: str | None = None
    request_ids: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    audit: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _ExecutionHistoryWire(msgspec.Struct):
    proposal_id: str
    executions: list[_StoredExecutionWire]
