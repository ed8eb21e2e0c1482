"""What `GET /metrics` reports of the queue every replica shares, read in one transaction: plain
figures, so the exporter holds no SQL and "pending" means what it means everywhere (`index.pending_rows`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import get_args

from reviewer.queue.messages import RefusalKind
from reviewer.service.store import decisions, index
from reviewer.service.store.base import StoreState, Transaction

RUN_ENDINGS = ("completed", "stopped", "failed", "cancelled", "reported", "running", "unknown")
DECISION_KINDS = ("approve", "reject", "request_changes")
REFUSAL_KINDS: tuple[str, ...] = get_args(RefusalKind)


@dataclass(frozen=True)
class Waiting:
    """The pending proposals of one policy environment (None: the `[default]` one)."""

    environment: str | None
    count: int
    oldest_seconds: float


@dataclass(frozen=True)
class Latency:
    """Seconds from a revision's submission to each decision on it: how many, their sum, and how many
    within each of the bounds asked for (cumulative, as a histogram's buckets)."""

    count: int
    total: float
    within: tuple[int, ...]


@dataclass(frozen=True)
class OutboxCount:
    target: str
    state: str
    count: int
    attempts: int


@dataclass(frozen=True)
class Figures:
    waiting: tuple[Waiting, ...]
    latency: Latency
    decisions: dict[str, int]
    """Decisions taken by kind, every kind of `DECISION_KINDS` present."""
    runs: dict[str, int]
    """Claimed runs by ending (`RUN_ENDINGS`): a report's, `running` within its lease, `unknown` past it."""
    outbox: tuple[OutboxCount, ...]
    refusals: dict[str, int]
    """Executors' refusals of approvals by kind, every kind of `REFUSAL_KINDS` present."""


def read(store: StoreState, db: Transaction, now: float, latency_bounds: Sequence[float]) -> Figures:
    return Figures(
        waiting=waiting(store, db, now),
        latency=latency(db, latency_bounds),
        decisions=decisions_by_kind(db),
        runs=runs_by_ending(db, now),
        outbox=outbox_counts(db),
        refusals=refusals_by_kind(db),
    )


def waiting(store: StoreState, db: Transaction, now: float) -> tuple[Waiting, ...]:
    counts: dict[str | None, int] = {}
    oldest: dict[str | None, float] = {}
    for row in index.pending_rows(db, now):
        environment = decisions.environment(store, db, row["proposal_id"], row["latest_revision"])
        counts[environment] = counts.get(environment, 0) + 1
        oldest[environment] = max(oldest.get(environment, 0.0), now - row["submitted_at"])
    return tuple(Waiting(environment, counts[environment], oldest[environment]) for environment in counts)


def latency(db: Transaction, bounds: Sequence[float]) -> Latency:
    """Bucketed by the database: one row, however many decisions."""
    seconds = "(decisions.decided_at - revisions.submitted_at)"
    buckets = ", ".join(
        f"SUM(CASE WHEN {seconds} <= {float(bound)!r} THEN 1 ELSE 0 END) AS le_{number}"
        for number, bound in enumerate(bounds)
    )
    row = db.one(
        f"SELECT COUNT(*) AS count, COALESCE(SUM({seconds}), 0) AS total{', ' if buckets else ''}{buckets} "
        "FROM decisions JOIN revisions ON revisions.proposal_id = decisions.proposal_id "
        "AND revisions.revision = decisions.revision"
    )
    assert row is not None
    return Latency(
        count=int(row["count"]),
        total=float(row["total"]),
        within=tuple(int(row[f"le_{number}"] or 0) for number in range(len(bounds))),
    )


def decisions_by_kind(db: Transaction) -> dict[str, int]:
    found = {
        row["decision"]: int(row["count"])
        for row in db.all("SELECT decision, COUNT(*) AS count FROM decisions GROUP BY decision")
    }
    return {kind: found.get(kind, 0) for kind in DECISION_KINDS}


def refusals_by_kind(db: Transaction) -> dict[str, int]:
    found = {
        row["kind"]: int(row["count"])
        for row in db.all("SELECT kind, COUNT(*) AS count FROM refusals GROUP BY kind")
    }
    return {kind: found.get(kind, 0) for kind in REFUSAL_KINDS}


def runs_by_ending(db: Transaction, now: float) -> dict[str, int]:
    """A late report still moves an `unknown` run to its ending."""
    rows = db.all(
        "SELECT CASE WHEN executions.id IS NOT NULL THEN COALESCE(executions.ended, 'reported') "
        "WHEN claims.lease_expires_at <= :now THEN 'unknown' ELSE 'running' END AS ending, "
        "COUNT(*) AS count FROM claims LEFT JOIN executions ON executions.claim_id = claims.claim_id "
        "GROUP BY ending",
        now=now,
    )
    found = {row["ending"]: int(row["count"]) for row in rows}
    return {ending: found.get(ending, 0) for ending in RUN_ENDINGS}


def outbox_counts(db: Transaction) -> tuple[OutboxCount, ...]:
    rows = db.all(
        "SELECT target, state, COUNT(*) AS count, SUM(attempts) AS attempts FROM outbox "
        "GROUP BY target, state ORDER BY target, state"
    )
    return tuple(
        OutboxCount(row["target"], row["state"], int(row["count"]), int(row["attempts"] or 0)) for row in rows
    )
