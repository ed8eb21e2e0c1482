"""The queue's rules for signed decisions and quorums, as plain functions every store calls.

Whether a reviewer may add a decision under the policy, whether its statement and signature hold
against the keys registered for that reviewer, and what the decisions so far add up to. Nothing
here touches a database: a store hands in its rows and writes what these functions return, so the
SQLite store and any other apply the same rules and the tests need no HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from reviewer.policy.quorum import Requirement, Tally, Vote, refuse_vote, tally
from reviewer.policy.verdict import Verdict, needs
from reviewer.queue.messages import (
    DecisionRequest,
    DecisionSignature,
    DecisionState,
    PolicyRuleState,
    PolicyState,
    is_break_glass,
)
from reviewer.service.errors import AlreadyApproved, Forbidden, SignatureRefused
from reviewer.signing.sshsig import (
    DecisionStatement,
    PublicKey,
    Signer,
    SigningError,
    sign_statement,
    verify_with_keys,
)


@dataclass(frozen=True)
class VerifiedSignature:
    """What the store keeps of a signed decision beside the trail event."""

    statement: str
    signature: str
    key_fingerprint: str


@dataclass(frozen=True)
class CastDecision:
    """A decision already in the trail for the latest revision, as the store reads it back."""

    reviewer: str
    decision: str
    reason: str | None
    at: datetime
    statement: str | None = None
    signature: str | None = None
    key_fingerprint: str | None = None
    seq: int | None = None
    """Its place in the trail."""
    identity: str | None = None
    """Who cast it, as the trail records it (`oidc:ISSUER#SUBJECT` for a provider's person)."""
    person_id: str | None = None
    """The provider's person behind it (`Vote.person_id`)."""

    def vote(self) -> Vote:
        return Vote(
            self.reviewer,
            "reject" if self.decision == "reject" else "approve",
            self.reason or "",
            self.identity,
            self.person_id,
        )


@dataclass(frozen=True)
class KeyRemoval:
    """A reviewer's key taken off the queue (`reviewer keys remove NAME FINGERPRINT`), or, with no
    fingerprint, the reviewer's token revoked (`reviewer token revoke NAME`), and when."""

    reviewer: str
    fingerprint: str | None
    at: datetime
    cause: str = "token was revoked"
    """What ended the token, for the trail's words: `token was revoked`, `token expired`, or a
    provider's person's sign-in ended."""
    seq: int | None = None
    """The one approval an ended token withdraws, by its place in the trail (another person may hold
    the name since); None for a removed key, which withdraws every approval it signed."""


@dataclass(frozen=True)
class Withdrawal:
    """An approval that no longer counts: the key that signed it was removed, or the token that cast
    it revoked, before a quorum was met."""

    approval: CastDecision
    removal: KeyRemoval

    @property
    def reason(self) -> str:
        if self.removal.fingerprint is None:
            return (
                f"{self.approval.reviewer}'s {self.removal.cause}; the approval it cast no longer "
                "counts toward the quorum"
            )
        what = "passkey" if self.removal.fingerprint.startswith("passkey:") else "key"
        named = self.removal.fingerprint.removeprefix("passkey:")
        return (
            f"{self.approval.reviewer}'s {what} {named} was removed; the approval it "
            "signed no longer counts toward the quorum"
        )


def without_removed_keys(
    cast: Sequence[CastDecision], removals: Iterable[KeyRemoval], decided_at: datetime | None
) -> tuple[list[CastDecision], list[Withdrawal]]:
    """The decisions that still count, and the approvals withdrawn: an approval signed by a key its
    reviewer had removed (the lost laptop) stops counting, unless the revision was decided before
    the removal (an approval that already took effect is for the executor's allowed-signers file to
    judge). Removing and adding the key again does not restore it."""
    removals = list(removals)
    kept: list[CastDecision] = []
    withdrawn: list[Withdrawal] = []
    for item in cast:
        removal = next(
            (
                removal
                for removal in removals
                if item.decision == "approve"
                and (removal.fingerprint is None or item.key_fingerprint == removal.fingerprint)
                and item.reviewer.casefold() == removal.reviewer.casefold()
                and (removal.seq is None or item.seq == removal.seq)
                and removal.at >= item.at
                and (decided_at is None or removal.at < decided_at)
            ),
            None,
        )
        if removal is None:
            kept.append(item)
        else:
            withdrawn.append(Withdrawal(item, removal))
    return kept, withdrawn


def admit_decision(
    rule: Requirement,
    cast: Sequence[CastDecision],
    reviewer: str,
    proposal_id: str,
    request: DecisionRequest,
    registered_keys: Iterable[PublicKey],
    environment: str | None,
    identity: str | None = None,
    person_id: str | None = None,
    passkey: VerifiedSignature | None = None,
) -> VerifiedSignature | None:
    """Refuse what the policy or the signature rules forbid; return the verified signature, if any.

    Called after the 412 and 409 checks (the revision is the latest and still pending). Order: who
    may decide (403), one vote each (409), then the signature (422, naming the field). `passkey` is
    a passkey's assertion the store already verified (`decisions.decide_by_passkey`): it meets any
    `signatures`; an SSH signature meets all but `signatures = "passkey"`.
    """
    where = f"environment {environment!r}" if environment else "proposals without an environment"
    refusal = refuse_vote(rule, [item.vote() for item in cast], reviewer, identity, person_id)
    if refusal == "already_approved" and request.break_glass:
        # Breaking glass on one's own approval adds that word, not a second vote: once a person.
        theirs = [item for item in cast if item.vote().same_person(reviewer, identity, person_id)]
        refusal = None if not any(is_break_glass(item.reason) for item in theirs) else refusal
    if refusal == "not_listed":
        listed = rule.listed()
        raise Forbidden(f"{reviewer} may not decide {where}; the policy lists {listed}")
    if refusal == "already_approved":
        so_far = tally([item.vote() for item in cast], rule.approvals)
        raise AlreadyApproved(
            f"{reviewer} already approved this revision ({so_far.describe()}); "
            "another reviewer must approve it",
            state="pending",
        )
    if passkey is not None:
        return passkey
    if rule.signatures == "passkey":
        raise SignatureRefused(
            f"signature: the policy requires decisions bound by a passkey for {where}; decide on the "
            "review page (`reviewer show ID --link`)"
        )
    if request.statement is None and request.signature is None:
        if rule.signatures:
            raise SignatureRefused(
                f"signature: the policy requires signed decisions for {where}; configure your SSH key "
                "(signing_key in config.toml, or REVIEWER_SIGNING_KEY) and decide again"
            )
        return None
    if request.statement is None or request.signature is None:
        missing = "statement" if request.statement is None else "signature"
        raise SignatureRefused(f"{missing}: missing; a signed decision carries both statement and signature")
    keys = list(registered_keys)
    if not keys:
        raise SignatureRefused(
            f"signature: no SSH key is registered for {reviewer}; the queue's operator adds one with "
            f"`reviewer keys add {reviewer} FILE`"
        )
    try:
        statement, key = verify_with_keys(request.statement, request.signature, keys)
    except SigningError as error:
        raise SignatureRefused(str(error)) from None
    different = statement.names(proposal_id, request.revision, request.plan_sha256, request.decision)
    if different:
        raise SignatureRefused(f"{different}: the signed statement names another decision")
    if statement.reviewer != reviewer:
        raise SignatureRefused(
            f"statement.reviewer is {statement.reviewer!r}, but the token deciding is {reviewer!r}"
        )
    return VerifiedSignature(request.statement, request.signature, key.fingerprint)


def outcome(rule: Requirement, cast: Sequence[CastDecision]) -> Tally:
    """What the decisions on the latest revision add up to under `rule`."""
    return tally([item.vote() for item in cast], rule.approvals)


def with_votes(state: DecisionState, rule: Requirement, cast: Sequence[CastDecision]) -> DecisionState:
    """`state` with the quorum so far and every signed decision, as the decision endpoint returns it."""
    so_far = outcome(rule, cast)
    signatures = [
        DecisionSignature(
            reviewer=item.reviewer,
            decision="reject" if item.decision == "reject" else "approve",
            statement=item.statement,
            signature=item.signature,
            key_fingerprint=item.key_fingerprint or "",
            at=item.at,
        )
        for item in cast
        if item.statement is not None and item.signature is not None
    ]
    return state.model_copy(
        update={
            "approvals": list(so_far.approvals),
            "approvals_required": rule.approvals,
            "signatures_required": bool(rule.signatures),
            "signatures": signatures,
        }
    )


@dataclass(frozen=True)
class PolicySigning:
    """The queue's own SSH key (`serve --policy-key`), signing what the policy approves as `principal`:
    an executor trusts it only if its allowed-signers file lists that principal with this key."""

    signer: Signer
    principal: str

    def sign(self, proposal_id: str, revision: int, plan_sha256: str, now: float) -> VerifiedSignature:
        at = datetime.fromtimestamp(now, UTC)
        statement = DecisionStatement.now(proposal_id, revision, plan_sha256, "approve", self.principal, at)
        signature = sign_statement(statement, self.signer)
        return VerifiedSignature(statement.to_bytes().decode(), signature, self.signer.public_key.fingerprint)


def policy_state(verdict: Verdict) -> PolicyState:
    """What the policy asked of a revision, as the decision state carries it to the screen and agent."""
    return PolicyState(
        environment=verdict.environment,
        outcome=verdict.outcome,
        needs=needs(verdict),
        decided_by=verdict.decided_by,
        reason=verdict.reason,
        rules=[
            PolicyRuleState(rule=match.rule, asks=match.asks, error=match.error) for match in verdict.matched
        ],
        alarms=[sentence for _name, sentence in verdict.alarms],
    )
