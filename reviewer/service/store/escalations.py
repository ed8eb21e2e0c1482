"""Escalation's events: each step of a pending revision's ladder (its environment's, in the policy)
written to the outbox once when its time comes, as functions of one open transaction.

The ladder belongs to one revision: a decision (or a request for changes), a re-plan (the new
revision starts its own ladder from its own submission), a claim or an expiry ends it. Each step is
one event key, so replicas that sweep at once, a retried sweep or a restart write it once.
"""

from __future__ import annotations

from reviewer.policy.escalation import EscalationStep, due_steps
from reviewer.service import rules
from reviewer.service.rules import Row
from reviewer.service.store import decisions, events, outbox, passkeys
from reviewer.service.store.base import StoreState, Transaction

Ladder = tuple[EscalationStep, ...]


def due_rows(store: StoreState, db: Transaction, now: float) -> list[tuple[Row, Ladder]]:
    """Each revision pending at `now` for at least its environment's first step, with its ladder.

    The environment is the policy's verdict on the revision, evaluated once and kept; a revision
    submitted to another replica is evaluated here on first sight, so `QueueStore.sweep_events`
    calls this in a read transaction before it takes the write lock."""
    firsts = [
        environment.escalation[0].after
        for environment in (store.policy.default, *store.policy.environments.values())
        if environment.escalation
    ]
    if not firsts:
        return []
    rows = db.all(
        "SELECT * FROM proposals WHERE decision IS NULL AND claim_id IS NULL AND executed_at IS NULL "
        "AND pending_expires_at > :now AND submitted_at <= :due ORDER BY submitted_at",
        now=now,
        due=now - min(firsts),
    )
    due: list[tuple[Row, Ladder]] = []
    for row in rows:
        if rules.state_of(row, now) != "pending":
            continue
        environment = decisions.environment(store, db, row["proposal_id"], row["latest_revision"])
        ladder = store.policy.ladder_for(environment)
        if ladder:
            due.append((row, ladder))
    return due


def sweep(store: StoreState, db: Transaction, now: float) -> int:
    """Write `proposal.escalated` for every step that came due and is not written yet; answers how
    many. A step older than the outbox keeps its deliveries is not sent late (as a reminder)."""
    kept_since = now - store.notifying.keep_deliveries
    due = due_rows(store, db, now)
    if not due:
        return 0
    sent = {
        row["event_key"]
        for row in db.all("SELECT DISTINCT event_key FROM outbox WHERE event = 'proposal.escalated'")
    }
    written = 0
    for row, ladder in due:
        body: bytes | None = None
        for step in due_steps(ladder, row["submitted_at"], now):
            revision = row["latest_revision"]
            key = events.event_key("proposal.escalated", row["proposal_id"], revision, str(step))
            if row["submitted_at"] + ladder[step - 1].after < kept_since or key in sent:
                continue
            if body is None:
                body = outbox.revision_body(db, row)
            document = events.escalated(row, body, now, step, len(ladder))
            links = passkeys.event_links(store, db, row["proposal_id"], revision)
            outbox.emit(store, db, now, key, document | links)
            written += 1
    return written
