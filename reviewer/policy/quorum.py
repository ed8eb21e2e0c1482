"""What deciding a proposal takes, and the quorum rule it drives, as plain functions.

A requirement says how many distinct reviewers must approve, whether each decision must be signed,
and who may decide. The rule is a function of the decisions so far, so every store calls the same
code and the tests need no HTTP.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Final, Literal

from reviewer.policy.names import folded

MAX_APPROVALS: Final = 20
_SEPARATORS: Final = str.maketrans("", "", "._-")
PROVIDER_PREFIX: Final = "oidc:"


def person(name: str) -> str:
    """Who a token name stands for: names that differ only by case, `.`, `_` or `-`, a digit for the
    letter it passes for, or a look-alike character (`agent1.`, `Agent_l`, `b0b`) are one person,
    who may approve once and is never both an agent and a reviewer."""
    return folded(name).translate(_SEPARATORS)


Signatures = bool | Literal["passkey"]
"""A policy's `signatures`: none, an SSH signature or a passkey assertion (true), or a passkey's only."""


def stricter_signatures(one: Signatures, other: Signatures) -> Signatures:
    """What both ask at once: a passkey where either names it, else a signature where either wants one."""
    return "passkey" if "passkey" in (one, other) else one or other


def signed_words(signatures: Signatures) -> str:
    """How the screen and `policy explain` say it: "signed", "signed by a passkey", or nothing."""
    return "signed by a passkey" if signatures == "passkey" else "signed" if signatures else ""


@dataclass(frozen=True)
class Requirement:
    """What deciding a proposal takes: approvals, signatures, and who may decide.

    `reviewers` holds one tuple of token-name patterns (`finance-*`) per table or rule that listed
    some: a reviewer must match a pattern of each, so two rules that both name reviewers narrow.
    """

    approvals: int = 1
    signatures: Signatures = False
    reviewers: tuple[tuple[str, ...], ...] = ()

    def may_decide(self, reviewer: str) -> bool:
        name = reviewer.casefold()
        return all(
            any(fnmatchcase(name, pattern.casefold()) for pattern in listed) for listed in self.reviewers
        )

    def stricter(self, other: Requirement) -> Requirement:
        """Both requirements at once: the larger quorum, signatures if either wants them, both lists."""
        reviewers = self.reviewers + tuple(
            listed for listed in other.reviewers if listed not in self.reviewers
        )
        return Requirement(
            max(self.approvals, other.approvals),
            stricter_signatures(self.signatures, other.signatures),
            reviewers,
        )

    def listed(self) -> str:
        """The reviewer lists as the messages show them: "alice, bob" or "finance-* and alice"."""
        return " and ".join(", ".join(listed) for listed in self.reviewers)


@dataclass(frozen=True)
class Vote:
    """One reviewer's decision on the current revision."""

    reviewer: str
    decision: Literal["approve", "reject"]
    reason: str = ""
    identity: str | None = None
    """Who cast it as the trail records it; a provider's `oidc:ISSUER#SUBJECT` names one person
    whatever name (email) they signed in under."""
    person_id: str | None = None
    """The provider's name for the person behind the vote (`oidc:ISSUER#SUBJECT`): a provider
    session's own, or that of the person a minted token was bound to (`token create --person`)."""

    def same_person(self, reviewer: str, identity: str | None, person_id: str | None = None) -> bool:
        """Whether `reviewer` (signed in as `identity`, the person `person_id`) is the person who
        cast this vote: one name folded (`person`), one provider person under two names, or one
        person behind a provider session and a token bound to them (or two such tokens)."""
        if person(self.reviewer) == person(reviewer):
            return True
        if person_id is not None and self.person_id == person_id:
            return True
        return identity is not None and self.identity == identity and identity.startswith(PROVIDER_PREFIX)


@dataclass(frozen=True)
class Tally:
    state: Literal["pending", "approved", "rejected"]
    required: int
    approvals: tuple[str, ...]
    """Distinct reviewers who approved, in the order they did."""
    rejected_by: str | None = None
    reason: str | None = None

    def describe(self) -> str:
        return describe_approvals(self.approvals, self.required)


def describe_approvals(approvals: Iterable[str], required: int) -> str:
    """The quorum so far in one wording for the queue's messages, the command line and the app:
    "1 of 2 approvals (alice)"."""
    names = list(approvals)
    listed = f" ({', '.join(names)})" if names else ""
    noun = "approval" if required == 1 else "approvals"
    return f"{len(names)} of {required} {noun}{listed}"


def describe_withdrawals(withdrawn: Iterable[tuple[str, str]]) -> str:
    """The approvals that stopped counting, in one wording for the command line and the app, each
    with who cast it and what ended it: "1 approval withdrawn (alice, sign-in ended)"."""
    items = list(withdrawn)
    noun = "approval" if len(items) == 1 else "approvals"
    return f"{len(items)} {noun} withdrawn ({'; '.join(f'{who}, {why}' for who, why in items)})"


def tally(votes: Iterable[Vote], required: int) -> Tally:
    """Pending until `required` distinct reviewers approved; the first rejection rejects.

    A reviewer counted twice would let one person meet a quorum of two, so repeats count once, and
    so do names that are one `person`, and the names one provider person signed in under.
    """
    approvals: list[str] = []
    counted: list[Vote] = []
    for vote in votes:
        if vote.decision == "reject":
            return Tally("rejected", required, tuple(approvals), vote.reviewer, vote.reason)
        if not any(earlier.same_person(vote.reviewer, vote.identity, vote.person_id) for earlier in counted):
            counted.append(vote)
            approvals.append(vote.reviewer)
        if len(approvals) >= required:
            return Tally("approved", required, tuple(approvals))
    return Tally("pending", required, tuple(approvals))


VoteRefusal = Literal["not_listed", "already_approved"]


def refuse_vote(
    requirement: Requirement,
    votes: Iterable[Vote],
    reviewer: str,
    identity: str | None = None,
    person_id: str | None = None,
) -> VoteRefusal | None:
    """Why `reviewer` (signed in as `identity`) may not add a decision now, or None. A state that is
    no longer pending is the caller's 409; this only answers what the policy adds: a list of who may
    decide, one vote each person."""
    if not requirement.may_decide(reviewer):
        return "not_listed"
    if any(vote.same_person(reviewer, identity, person_id) for vote in votes):
        return "already_approved"
    return None
