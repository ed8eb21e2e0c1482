"""The queue as a source of proposals: live items, the decider that sends decisions, and the poll backoff.

Nothing here imports Textual (it could move next to `reviewer.sources`): the app drives it from its
workers and shows what it returns.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass, field
from datetime import datetime

from reviewer.api import Decision, DecisionSignature, DecisionState, ProposalRecord, TrailEvent, Whoami
from reviewer.client import (
    AlreadyDecided,
    Conflict,
    Forbidden,
    NotFound,
    QueueClient,
    QueueError,
    QueueUnreachable,
    StaleRevision,
    Unauthorized,
)
from reviewer.deciding import sign_decision
from reviewer.policy import describe_approvals
from reviewer.sanitize import clip, safe_text
from reviewer.signed_approvals import SignedStatement, verify_decision
from reviewer.signing import Signer, SigningError
from reviewer.sources import DecisionOutcome, QueueItem


def shown(name: str | None, limit: int = 60) -> str:
    """A name from the queue's record (a token's name), made safe to put in a sentence."""
    return safe_text(clip(name or "?", limit))


@dataclass
class LiveItem(QueueItem):
    """A proposal as the queue holds it: who proposed it, its state, its trail, and what was opened."""

    proposed_by: str = ""
    decided_by: str | None = None
    claimed_by: str | None = None
    outcome_unknown: bool = False
    """A run claimed the approval and has not reported by the end of its lease: it may have written."""
    reason: str | None = None
    expires_at: datetime | None = None
    history: list[TrailEvent] = field(default_factory=list)
    mine: bool = False
    """The signed-in reviewer submitted it: the app will not approve it."""
    local_digests: dict[int, str] = field(default_factory=dict)
    """Revisions whose fetched plan hashes to something else than the queue's digest: never approvable."""
    approvals: list[str] = field(default_factory=list)
    approvals_required: int = 1
    signatures: list[DecisionSignature] = field(default_factory=list)
    """The latest revision's quorum so far and its signed decisions, from the queue's record."""

    @property
    def is_new(self) -> bool:
        """Pending with a revision newer than any the reviewer opened (`seen_revision`, set on opening)."""
        opened = self.seen_revision or 0
        return bool(self.revisions) and self.state == "pending" and self.latest_revision > opened

    def apply(self, record: ProposalRecord, me: Whoami | None) -> None:
        """Take the queue's record as the truth about state, proposer and history."""
        latest: DecisionState = record.latest
        self.take_state(latest)
        self.proposed_by = record.proposed_by
        self.history = list(record.history)
        self.mine = me is not None and record.proposed_by == me.name
        for info in record.revisions:
            if info.revision in self.digests:
                self.digests[info.revision] = info.plan_sha256

    def take_state(self, latest: DecisionState) -> None:
        """The queue's word on the latest revision: state, who decided or claimed it, the quorum, the
        signatures."""
        self.state = latest.state
        self.decided_by = latest.decided_by
        self.claimed_by = latest.claimed_by
        self.outcome_unknown = bool(latest.outcome_unknown)
        self.reason = latest.reason
        self.expires_at = latest.expires_at
        self.approvals = list(latest.approvals)
        self.approvals_required = latest.approvals_required
        self.signatures = list(latest.signatures)

    @property
    def state_label(self) -> str:
        """The state column's word: the queue's state, or `unknown` for a claimed run past its lease."""
        return "unknown" if self.state == "claimed" and self.outcome_unknown else self.state

    def state_words(self) -> str:
        """The queue's state as the chrome shows it: `approved by alice`, `claimed by agent-7`,
        `executed by runner-1` (whoever reported the run, never the approver), or while a quorum
        gathers `pending · 1 of 2 approvals (alice)`."""
        if self.state == "claimed":
            words = f"claimed by {shown(self.claimed_by)} (running)"
            if self.outcome_unknown:
                words = f"claimed by {shown(self.claimed_by)}: outcome unknown, no report by its lease's end"
            return words
        if self.state == "executed":
            reporter = next(
                (event.actor for event in reversed(self.history) if event.event == "executed"), None
            )
            approver = f", approved by {shown(self.decided_by)}" if self.decided_by else ""
            return f"executed by {shown(reporter)}{approver}" if reporter else f"executed{approver}"
        if self.decided_by and self.state in ("approved", "rejected"):
            return f"{self.state} by {shown(self.decided_by)}"
        if self.state == "pending" and self.approvals_required > 1:
            return f"pending · {describe_approvals(map(shown, self.approvals), self.approvals_required)}"
        return self.state

    def signature_words(self) -> list[tuple[str, bool]]:
        """Each signed decision on the latest revision as words, and whether it checked out here:
        a valid signature by the key it carries over a statement naming this revision and digest.
        Whether that key is the reviewer's is the queue's registration (and the executor's file)."""
        revision = self.latest_revision
        digest = self.digests.get(revision, "")
        words = []
        for item in self.signatures:
            signed = SignedStatement(item.statement, item.signature)
            try:
                statement, key = verify_decision(signed, self.proposal_id, revision, digest)
            except SigningError as error:
                words.append((f"{shown(item.reviewer, 20)} ✗ {safe_text(clip(str(error), 60))}", False))
                continue
            verb = "approved" if statement.decision == "approve" else "rejected"
            words.append((f"{shown(statement.reviewer, 20)} {verb} ✓ {key.fingerprint[:19]}…", True))
        return words


def local_refusal(item: QueueItem, revision: int, decision: str) -> str | None:
    """Why the app will not send this approval at all, or None. Rejecting stays possible."""
    if decision != "approve" or not isinstance(item, LiveItem):
        return None
    if item.mine:
        return "you proposed this: another reviewer must approve it"
    if revision in item.local_digests:
        return (
            "the plan fetched does not hash to the queue's digest: do not approve it; "
            "tell the queue's operator"
        )
    return None


@dataclass(frozen=True)
class LiveOutcome(DecisionOutcome):
    """A decision's outcome with what the screen does next: an error banner, or open a newer revision."""

    error: bool = False
    reopen_revision: int | None = None
    answer: DecisionState | None = None


class QueueDecider:
    """Sends approvals and rejections to the queue under the reviewer's token, and says what happened.

    Each decision gets its own Idempotency-Key (uuid4), which the client reuses when it retries a
    dropped connection, so a decision lands once however often the network fails after the commit.
    No error escapes: every answer becomes words on the screen.
    """

    def __init__(self, client: QueueClient, login_hint: str, signer: Signer | None = None) -> None:
        self.client = client
        self.login_hint = login_hint
        self.identity: Whoami | None = None
        self.signer = signer
        """Signs each decision first when the reviewer configured a key; nothing is sent if it cannot."""

    async def decide(
        self, item: QueueItem, revision: int, plan_sha256: str, decision: str, reason: str
    ) -> LiveOutcome:
        refused = local_refusal(item, revision, decision)
        if refused:
            return LiveOutcome(False, refused, error=True)
        verb: Decision = "approve" if decision == "approve" else "reject"
        try:
            signed = await self._sign(item.proposal_id, revision, plan_sha256, verb)
            answer = await self.client.decide(
                item.proposal_id,
                revision,
                plan_sha256,
                verb,
                reason,
                idempotency_key=str(uuid.uuid4()),
                statement=signed.statement if signed else None,
                signature=signed.signature if signed else None,
            )
        except SigningError as error:
            return failed(f"not sent: {safe_text(clip(str(error), 200))}")
        except QueueError as error:
            return self.refused(item, error)
        except Exception as error:  # a bug must not take the app down with it
            return failed(f"the decision could not be sent ({type(error).__name__})")
        how = " (signed)" if signed else ""
        if answer.state == "pending":
            so_far = describe_approvals(map(shown, answer.approvals), answer.approvals_required)
            message = f"your approval counts: {so_far}{how}; revision {answer.revision} waits for more"
        else:
            words = "approved" if answer.state == "approved" else "rejected"
            message = f"{words} by {shown(answer.decided_by)}{how}: revision {answer.revision}"
        return LiveOutcome(True, message, state=answer.state, answer=answer)

    async def _sign(
        self, proposal_id: str, revision: int, plan_sha256: str, decision: Decision
    ) -> SignedStatement | None:
        if self.signer is None:
            return None
        if self.identity is None:
            self.identity = await self.client.whoami()
        reviewer = self.identity.name
        return await sign_decision(self.signer, proposal_id, revision, plan_sha256, decision, reviewer)

    def refused(self, item: QueueItem, error: QueueError) -> LiveOutcome:
        """The queue's refusal in the reviewer's words."""
        if isinstance(error, StaleRevision):
            latest = error.latest_revision
            message = f"the agent re-planned: revision {latest} is waiting"
            return LiveOutcome(False, message, "pending", error=True, reopen_revision=latest)
        if isinstance(error, AlreadyDecided):
            if error.decided_by:
                return LiveOutcome(False, f"already decided by {shown(error.decided_by)}", error.state, True)
            return LiveOutcome(False, f"no longer pending: the proposal is {error.state}", error.state, True)
        if isinstance(error, Conflict) and error.code == "already_approved":
            return failed(safe_text(clip(error.body.message, 200)))
        if isinstance(error, Forbidden):
            mine = isinstance(item, LiveItem) and item.mine
            words = "you proposed this" if mine else f"your token may not decide: {error.body.message}"
            return failed(safe_text(clip(words, 200)))
        if isinstance(error, Unauthorized):
            return failed(token_refused(self.login_hint))
        if isinstance(error, QueueUnreachable):
            return failed(
                "the queue did not answer: the decision may not be recorded; "
                "the list shows the queue's state once it answers again"
            )
        if isinstance(error, NotFound):
            return failed("the queue no longer knows this proposal")
        return failed(f"the queue refused the decision: {safe_text(clip(str(error), 300))}")


def failed(message: str) -> LiveOutcome:
    return LiveOutcome(False, message, error=True)


def token_refused(login_hint: str) -> str:
    """Said by the status line and by a refused decision alike: a 401 is fixed only by logging in."""
    return f"the queue refused your token (expired or revoked): run `{login_hint}`"


@dataclass
class Backoff:
    """Exponential delays between failed polls (base, 2 base, 4 base … up to `maximum`), with jitter so
    that many apps do not return to a restarted queue in the same instant."""

    base: float
    maximum: float
    jitter: float = 0.1
    failures: int = 0

    def next_delay(self) -> float:
        self.failures += 1
        delay = min(self.maximum, self.base * 2 ** (self.failures - 1))
        return delay * (1 + random.uniform(0, self.jitter)) if self.jitter else delay

    def reset(self) -> None:
        self.failures = 0
