"""The queue as a source of proposals: the decider that sends decisions, and the poll backoff.

Nothing here imports Textual: the app drives it from its workers and shows what it returns.
"""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from reviewer.api import Decision, Whoami
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
from reviewer.signed_approvals import SignedStatement
from reviewer.signing import Signer, SigningError
from reviewer.sources import DecisionOutcome, QueueItem, local_refusal, shown


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
    ) -> DecisionOutcome:
        refused = local_refusal(item, revision, decision)
        if refused:
            return DecisionOutcome(False, refused, error=True)
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
        return DecisionOutcome(True, message, state=answer.state, answer=answer)

    async def _sign(
        self, proposal_id: str, revision: int, plan_sha256: str, decision: Decision
    ) -> SignedStatement | None:
        if self.signer is None:
            return None
        if self.identity is None:
            self.identity = await self.client.whoami()
        reviewer = self.identity.name
        return await sign_decision(self.signer, proposal_id, revision, plan_sha256, decision, reviewer)

    def refused(self, item: QueueItem, error: QueueError) -> DecisionOutcome:
        """The queue's refusal in the reviewer's words."""
        if isinstance(error, StaleRevision):
            latest = error.latest_revision
            message = f"the agent re-planned: revision {latest} is waiting"
            return DecisionOutcome(False, message, "pending", error=True, reopen_revision=latest)
        if isinstance(error, AlreadyDecided):
            if error.decided_by:
                return DecisionOutcome(
                    False, f"already decided by {shown(error.decided_by)}", error.state, True
                )
            return DecisionOutcome(
                False, f"no longer pending: the proposal is {error.state}", error.state, True
            )
        if isinstance(error, Conflict) and error.code == "already_approved":
            return failed(safe_text(clip(error.body.message, 200)))
        if isinstance(error, Forbidden):
            words = "you proposed this" if item.mine else f"your token may not decide: {error.body.message}"
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


def failed(message: str) -> DecisionOutcome:
    return DecisionOutcome(False, message, error=True)


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
