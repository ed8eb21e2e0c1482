"""The end of a reviewer's sign-in as the trail records it: a `sign_in_ended` entry saying why, and a
`withdrawn` entry for each pending approval that stopped counting with it, written in the
transaction that ends it, and one log line for each.

The quorum is still computed from the tokens' rows at read time (`decisions.cast_and_withdrawn`):
these entries are the record, so that an auditor holding the verified export reads the withdrawal
beside the approval, with who and why, and a replica's log says it when it happens.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Final

from reviewer.plan.sanitize import clip, safe_text
from reviewer.policy.quorum import PROVIDER_PREFIX
from reviewer.service.rules import Row
from reviewer.service.signed_decisions import Withdrawal
from reviewer.service.store import decisions, index
from reviewer.service.store.base import Transaction

log = logging.getLogger("reviewer.service.store.endings")

OUT_OF_GROUP: Final = "out of the reviewers group"
"""The provider's renewed token no longer counts the person a reviewer."""
ENDED_ON_THE_QUEUE: Final = "ended on the queue"
"""The operator ran `reviewer token revoke` on a provider's person."""
REVOKED: Final = "token revoked"
"""The operator revoked a minted reviewer token."""
EXPIRED: Final = "token expired"
"""A reviewer token reached the end of its lifetime (`token create --expires-in`)."""


def revoked(kind: str) -> str:
    """Why `reviewer token revoke` ended a token of this kind, in the trail's words."""
    return ENDED_ON_THE_QUEUE if kind == "provider" else REVOKED


@dataclass(frozen=True)
class Withdrawn:
    """An approval the ending withdrew, as its `withdrawn` entry names it."""

    reviewer: str
    proposal_id: str
    revision: int


@dataclass(frozen=True)
class Ending:
    """A reviewer's sign-in that ended, why, and the approvals it withdrew."""

    reviewer: str
    identity: str
    cause: str
    withdrawn: tuple[Withdrawn, ...]

    def log(self) -> None:
        """One line for the end, one for each approval withdrawn; names are the provider's or a
        token owner's words, so each is made safe and short first."""
        who = _shown(self.reviewer)
        log.info("sign-in ended: %s (%s): %s", who, _shown(self.identity), self.cause)
        for item in self.withdrawn:
            log.info(
                "approval withdrawn: %s on proposal %s revision %d (sign-in ended: %s)",
                _shown(item.reviewer),
                item.proposal_id,
                item.revision,
                self.cause,
            )


def _shown(text: str) -> str:
    return safe_text(clip(text, 200))


def identity_of(token: Row) -> str:
    """The identity the trail records for a token's row (`Identity.principal`)."""
    if token["kind"] == "provider":
        return f"{PROVIDER_PREFIX}{token['issuer']}#{token['subject']}"
    return f"{'break-glass' if token['kind'] == 'break-glass' else 'token'}:{token['name']}"


def record_ending(db: Transaction, token_id: int, cause: str, now: float) -> Ending | None:
    """Record that the reviewer token `token_id` (a minted one, or a provider's person's row) ended
    at `now` for `cause`, and each pending approval of theirs that it withdrew; None when the row is
    not a reviewer's, or did not end at `now` (a sign-in the provider's word no longer reached)."""
    token = db.one(
        "SELECT id, name, role, kind, issuer, subject, revoked_at FROM tokens WHERE id = :id", id=token_id
    )
    if token is None or token["role"] != "reviewer" or token["revoked_at"] != now:
        return None
    return _record(db, token, cause, now)


def record_expiries(db: Transaction, since: float, now: float) -> list[Ending]:
    """Record the end of each reviewer token whose lifetime ran out after `since` (the last time the
    queue wrote its time down) and by `now`, and the pending approvals it withdrew: the queue
    notices an expiry within a few seconds of it, or, after a stop, at its next start."""
    expired = db.all(
        "SELECT id, name, role, kind, issuer, subject, revoked_at FROM tokens WHERE role = 'reviewer' "
        "AND revoked_at IS NULL AND expires_at > :since AND expires_at <= :now ORDER BY expires_at, id",
        since=since,
        now=now,
    )
    return [_record(db, token, EXPIRED, now) for token in expired]


def _record(db: Transaction, token: Row, cause: str, now: float) -> Ending:
    identity = identity_of(token)
    index.append_trail(db, now, token["name"], "sign_in_ended", None, None, None, cause, identity=identity)
    withdrawn = tuple(
        _record_withdrawal(db, approval, cause, now)
        for approval in _withdrawn_approvals(db, token, identity, now)
    )
    return Ending(token["name"], identity, cause, withdrawn)


def _withdrawn_approvals(db: Transaction, token: Row, identity: str, now: float) -> list[Withdrawal]:
    """The approvals of this reviewer on pending revisions that no longer count, and that no
    `withdrawn` entry records yet. A provider's person is matched by the identity the trail
    recorded (it outlives a rename), a minted token by name, as `decisions.ended_tokens` does."""
    approvals = db.all(
        "SELECT trail.seq, trail.proposal_id, trail.revision FROM trail JOIN proposals "
        "ON proposals.proposal_id = trail.proposal_id AND proposals.latest_revision = trail.revision "
        "WHERE trail.event = 'approved' AND proposals.decision IS NULL AND CASE WHEN :provider "
        "THEN trail.identity = :identity ELSE (trail.identity IS NULL OR trail.identity NOT LIKE 'oidc:%') "
        "AND lower(trail.actor) = lower(:name) END ORDER BY trail.seq",
        provider=token["kind"] == "provider",
        identity=identity,
        name=token["name"],
    )
    found: list[Withdrawal] = []
    for approval in approvals:
        _kept, withdrawn = decisions.cast_and_withdrawn(
            db, approval["proposal_id"], approval["revision"], now
        )
        found += [
            item
            for item in withdrawn
            if item.approval.seq == approval["seq"]
            and not _recorded(db, approval["proposal_id"], approval["revision"], item.approval.reviewer)
        ]
    return found


def _recorded(db: Transaction, proposal_id: str, revision: int, reviewer: str) -> bool:
    return (
        db.one(
            "SELECT 1 AS found FROM trail WHERE proposal_id = :proposal_id AND revision = :revision "
            "AND event = 'withdrawn' AND lower(actor) = lower(:reviewer)",
            proposal_id=proposal_id,
            revision=revision,
            reviewer=reviewer,
        )
        is not None
    )


def withdrawal_reason(reviewer: str, cause: str) -> str:
    """The `withdrawn` entry's reason, in the words the queue gives a withdrawal it computes."""
    ended = {REVOKED: "token was revoked", EXPIRED: "token expired"}.get(cause, f"sign-in ended: {cause}")
    return f"{reviewer}'s {ended}; the approval it cast no longer counts toward the quorum"


def _record_withdrawal(db: Transaction, item: Withdrawal, cause: str, now: float) -> Withdrawn:
    approval = db.one(
        "SELECT proposal_id, revision, plan_sha256 FROM trail WHERE seq = :seq", seq=item.approval.seq
    )
    assert approval is not None
    index.append_trail(
        db,
        now,
        item.approval.reviewer,
        "withdrawn",
        approval["proposal_id"],
        approval["revision"],
        approval["plan_sha256"],
        withdrawal_reason(item.approval.reviewer, cause),
        identity=item.approval.identity,
    )
    return Withdrawn(item.approval.reviewer, approval["proposal_id"], approval["revision"])
