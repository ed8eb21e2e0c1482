"""Executors' refusals: an approval its executor would not run (the queue's trail went backwards or
forked, its signatures do not satisfy the executor's signers, the executor's ledger says it ran),
appended and read in one open transaction.

A refusal changes no state: the queue's word that the revision is approved stays what it was (another
executor may trust it), and the refusals ride along with it in the decision state
(`decisions.voted_state`), so a reviewer who reads "approved" also reads that nothing ran and why.
The table is append-only, like every history table; `runs.record_refusal` is the write.
"""

from __future__ import annotations

from reviewer.queue.messages import ExecutorRefusal, RefusalReport
from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.store.base import Transaction


def append(db: Transaction, identity: Identity, proposal_id: str, report: RefusalReport, now: float) -> None:
    db.run(
        "INSERT INTO refusals (proposal_id, revision, plan_sha256, kind, message, refused_by, refused_at) "
        "VALUES (:proposal_id, :revision, :plan_sha256, :kind, :message, :refused_by, :now)",
        proposal_id=proposal_id,
        revision=report.revision,
        plan_sha256=report.plan_sha256,
        kind=report.kind,
        message=report.message,
        refused_by=identity.name,
        now=now,
    )


def refusals_of(db: Transaction, proposal_id: str, revision: int) -> list[ExecutorRefusal]:
    """The refusals of one revision, oldest first."""
    rows = db.all(
        "SELECT revision, plan_sha256, kind, message, refused_by, refused_at FROM refusals "
        "WHERE proposal_id = :proposal_id AND revision = :revision ORDER BY id",
        proposal_id=proposal_id,
        revision=revision,
    )
    return [
        ExecutorRefusal(
            revision=row["revision"],
            plan_sha256=row["plan_sha256"],
            kind=row["kind"],
            message=row["message"],
            refused_by=row["refused_by"],
            at=rules.required_timestamp(row["refused_at"]),
        )
        for row in rows
    ]
