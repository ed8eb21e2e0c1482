"""What reviewers asked of a proposal's earlier revisions, read from the trail for the policy.

A policy judges a revision with its history (`plan.changes_requested`): the third re-plan of a
delete that a reviewer asked to keep may want more eyes than the first. The trail is append-only
and a request for changes closes its revision, so once revision N exists what was asked before it
never changes, and a verdict evaluated with it holds for good.
"""

from __future__ import annotations

from typing import Any, Protocol

from reviewer.policy.verdict import ChangeRequest
from reviewer.service.rules import Row


class Reads(Protocol):
    """The part of a store's transaction this module uses."""

    def all(self, sql: str, **params: Any) -> list[Row]: ...


def changes_requested_before(db: Reads, proposal_id: str, revision: int) -> tuple[ChangeRequest, ...]:
    """Every request for changes on revisions of `proposal_id` before `revision`, oldest first."""
    rows = db.all(
        "SELECT revision, actor, reason FROM trail WHERE proposal_id = :proposal_id "
        "AND revision < :revision AND event = 'changes_requested' ORDER BY seq",
        proposal_id=proposal_id,
        revision=revision,
    )
    return tuple(ChangeRequest(row["revision"], row["actor"], row["reason"] or "") for row in rows)
