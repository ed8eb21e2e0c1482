"""The notifications' outbox: each event written once per target in the transaction that makes it
true (the documents are `store.events`'), the events time alone makes true, and the
deliveries' leases, attempts and pruning, as functions of one open transaction."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from typing import Any, Final

from reviewer.service.rules import Row
from reviewer.service.store import events, passkeys
from reviewer.service.store.base import Notifying, StoreState, Transaction


@dataclass(frozen=True)
class Delivery:
    """One event for one target in the outbox, and how its delivery went so far."""

    id: int
    event_id: str
    """Sent as `Reviewer-Delivery`: the same on every retry, so a receiver drops a duplicate."""
    event: str
    proposal_id: str
    target: str
    body: bytes
    state: str
    attempts: int
    created_at: float
    next_attempt_at: float
    give_up_at: float
    last_error: str | None
    finished_at: float | None


DELIVERY_COLUMNS: Final = (
    "id, event_id, event, proposal_id, target, body, state, attempts, created_at, next_attempt_at, "
    "give_up_at, last_error, finished_at"
)


def emit(store: StoreState, db: Transaction, now: float, key: str, document: dict[str, Any]) -> None:
    """Write the event for each target in the caller's transaction; a key already written (a
    second replica's sweep, a retried request) is kept as it was."""
    event_id = uuid.uuid4().hex
    body = events.encode(document, event_id)
    store.emitted.pending = True
    for target in store.notifying.targets:
        if target in store.notifying.only and not events.chosen(store.notifying.only[target], document):
            continue
        db.run(
            "INSERT INTO outbox (event_id, event_key, event, proposal_id, target, created_at, body, "
            "state, attempts, next_attempt_at, give_up_at) VALUES (:event_id, :event_key, :event, "
            ":proposal_id, :target, :now, :body, 'pending', 0, :now, :give_up_at) "
            "ON CONFLICT (event_key, target) DO NOTHING",
            event_id=event_id,
            event_key=key,
            event=document["event"],
            proposal_id=document["proposal_id"],
            target=target,
            now=now,
            body=body,
            give_up_at=now + store.notifying.give_up_after,
        )


def already_written(db: Transaction, key: str) -> bool:
    return db.one("SELECT 1 AS written FROM outbox WHERE event_key = :key LIMIT 1", key=key) is not None


def revision_body(db: Transaction, row: Row) -> bytes:
    """The stored plan of a `proposals` row's latest revision, for the event that names it."""
    stored = db.one(
        "SELECT body FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
        proposal_id=row["proposal_id"],
        revision=row["latest_revision"],
    )
    assert stored is not None
    return bytes(stored["body"])


def sweep(store: StoreState, db: Transaction, now: float) -> int:
    """The events that time alone makes true (`QueueStore.sweep_events`), written; answers how many."""
    written = 0
    remind_after = store.notifying.remind_after
    kept_since = now - store.notifying.keep_deliveries
    if remind_after is not None:
        for row in db.all(
            "SELECT * FROM proposals WHERE decision IS NULL AND claim_id IS NULL "
            "AND executed_at IS NULL AND pending_expires_at > :now AND submitted_at <= :due",
            now=now,
            due=now - remind_after,
        ):
            number = events.reminder_number(row["submitted_at"], now, remind_after)
            key = events.event_key(
                "proposal.reminder", row["proposal_id"], row["latest_revision"], str(number)
            )
            due = row["submitted_at"] + number * remind_after
            if number == 0 or due < kept_since or already_written(db, key):
                continue
            reminder = events.waiting(row, revision_body(db, row), now, "proposal.reminder")
            links = passkeys.event_links(store, db, row["proposal_id"], row["latest_revision"])
            emit(store, db, now, key, reminder | links)
            written += 1
    for row in db.all(
        "SELECT * FROM proposals WHERE claim_id IS NOT NULL AND executed_at IS NULL "
        "AND lease_expires_at <= :now AND lease_expires_at >= :kept_since",
        now=now,
        kept_since=kept_since,
    ):
        key = events.event_key("run.unknown", row["proposal_id"], row["latest_revision"], row["claim_id"])
        if not already_written(db, key):
            emit(store, db, now, key, events.run_unknown(row, now))
            written += 1
    for row in db.all(
        "SELECT * FROM proposals WHERE claim_id IS NULL AND executed_at IS NULL AND "
        "((decision IS NULL AND pending_expires_at <= :now AND pending_expires_at >= :kept_since) "
        "OR (decision = 'approve' AND approval_expires_at <= :now "
        "AND approval_expires_at >= :kept_since))",
        now=now,
        kept_since=kept_since,
    ):
        key = events.event_key("proposal.expired", row["proposal_id"], row["latest_revision"])
        if not already_written(db, key):
            emit(store, db, now, key, events.expired(row, now))
            written += 1
    return written


def claim_deliveries(
    db: Transaction, target: str, limit: int, lease: float, now: float, row_lock: str
) -> list[Delivery]:
    rows = db.all(
        "UPDATE outbox SET leased_until = :until WHERE id IN (SELECT id FROM outbox "
        "WHERE state = 'pending' AND target = :target AND next_attempt_at <= :now "
        "AND (leased_until IS NULL OR leased_until <= :now) ORDER BY id LIMIT :limit"
        f"{row_lock}) RETURNING {DELIVERY_COLUMNS}",
        until=now + lease,
        now=now,
        target=target,
        limit=limit,
    )
    return sorted((delivery(row) for row in rows), key=lambda delivery: delivery.id)


def finish_delivery(
    db: Transaction, delivery_id: int, error: str | None, retry_at: float | None, now: float
) -> None:
    state = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
    db.run(
        "UPDATE outbox SET state = :state, attempts = attempts + 1, leased_until = NULL, "
        "last_error = :error, "
        "next_attempt_at = coalesce(CAST(:retry_at AS DOUBLE PRECISION), next_attempt_at), "
        "finished_at = :finished_at WHERE id = :id",
        state=state,
        error=error,
        retry_at=retry_at,
        finished_at=None if state == "pending" else now,
        id=delivery_id,
    )


def prune(db: Transaction, notifying: Notifying, now: float) -> tuple[int, int]:
    deleted = db.run(
        "DELETE FROM outbox WHERE state <> 'pending' AND finished_at < :before",
        before=now - notifying.keep_deliveries,
    )
    dropped = 0
    for target in notifying.targets:
        dropped += db.run(
            "UPDATE outbox SET state = 'failed', finished_at = :now, leased_until = NULL, "
            "last_error = :error WHERE target = :target AND state = 'pending' AND id <= ("
            "SELECT id FROM outbox WHERE target = :target AND state = 'pending' "
            "ORDER BY id DESC LIMIT 1 OFFSET :backlog)",
            now=now,
            error=f"given up: more than {notifying.backlog} deliveries were waiting",
            target=target,
            backlog=notifying.backlog,
        )
    return deleted, dropped


def list_deliveries(db: Transaction, limit: int) -> list[Delivery]:
    rows = db.all(f"SELECT {DELIVERY_COLUMNS} FROM outbox ORDER BY id DESC LIMIT :limit", limit=limit)
    return [delivery(row) for row in rows]


def delivery(row: Row) -> Delivery:
    return Delivery(
        id=row["id"],
        event_id=row["event_id"],
        event=row["event"],
        proposal_id=row["proposal_id"],
        target=row["target"],
        body=events.with_id(bytes(row["body"]), row["event_id"]),
        state=row["state"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        next_attempt_at=row["next_attempt_at"],
        give_up_at=row["give_up_at"],
        last_error=row["last_error"],
        finished_at=row["finished_at"],
    )
