"""The two tables every aggregate touches: `proposals`, the index of each proposal's latest revision
and its state (read whole, and as a caller may see it), and the trail every write appends to."""

from __future__ import annotations

from reviewer.queue.messages import DecisionState
from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.rules import Row
from reviewer.service.signed_decisions import VerifiedSignature
from reviewer.service.store import trail
from reviewer.service.store.base import Transaction


def visible(db: Transaction, identity: Identity, proposal_id: str) -> Row:
    row = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
    return rules.require_visible(row, identity, proposal_id)


def proposal_row(db: Transaction, proposal_id: str) -> Row:
    row = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
    assert row is not None
    return row


def pending_rows(db: Transaction, now: float) -> list[Row]:
    """The `proposals` rows whose latest revision is pending at `now` by `rules.state_of`, the state
    every answer gives: for the metrics and the policy's second look."""
    return [
        row
        for row in db.all("SELECT * FROM proposals WHERE decision IS NULL")
        if rules.state_of(row, now) == "pending"
    ]


def answer(db: Transaction, proposal_id: str, now: float) -> DecisionState:
    row = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
    assert row is not None
    return rules.decision_state(row, now)


def append_trail(
    db: Transaction,
    now: float,
    actor: str,
    event: str,
    proposal_id: str | None,
    revision: int | None,
    plan_sha256: str | None,
    reason: str | None = None,
    signed: VerifiedSignature | None = None,
    identity: str | None = None,
    report_sha256: str | None = None,
) -> int:
    """Append to the trail, and to its Merkle log (`store.trail`) in the same transaction; its `seq`
    is the list's version and cursor, so it must grow in commit order, which the one write lock of
    `write()` gives on both backends (and the log one order on every replica). The events a replica
    of an older release wrote since the log's last leaf are logged first (`trail.catch_up`), so the
    log holds every event in `seq` order. `identity` is how the actor signed in (`Identity.principal`:
    `token:NAME`, `break-glass:NAME`, `oidc:ISSUER#SUBJECT`). An event that concerns no proposal (a
    sign-in's end) has no proposal, revision or digest, and wakes no one waiting on a proposal."""
    trail.catch_up(db)
    if proposal_id is not None:
        db.changed.add(proposal_id)
    fields = {
        "at": now,
        "actor": actor,
        "event": event,
        "proposal_id": proposal_id,
        "revision": revision,
        "plan_sha256": plan_sha256,
        "reason": reason,
        "statement": signed.statement if signed else None,
        "signature": signed.signature if signed else None,
        "key_fingerprint": signed.key_fingerprint if signed else None,
        "identity": identity,
    }
    row = db.one(
        "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256, reason, statement, "
        "signature, key_fingerprint, identity) VALUES (:now, :actor, :event, :proposal_id, :revision, "
        ":plan_sha256, :reason, :statement, :signature, :key_fingerprint, :identity) RETURNING seq",
        now=now,
        **{name: value for name, value in fields.items() if name != "at"},
    )
    assert row is not None
    trail.append(db, {**fields, "seq": row["seq"]}, report_sha256)
    return int(row["seq"])
