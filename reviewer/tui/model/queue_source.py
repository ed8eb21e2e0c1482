"""The queue as a source of proposals: what a poll fetches, the decider that sends decisions, and the
poll backoff.

Nothing here imports Textual: the app drives it from its workers, and each call returns what it
fetched for the app's handlers to store and show; nothing here touches an item a screen is reading.
"""

from __future__ import annotations

import asyncio
import random
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Final

import httpx

from reviewer.plan.proposal import Proposal, ProposalError
from reviewer.plan.sanitize import clip, safe_text
from reviewer.policy.quorum import describe_approvals
from reviewer.queue.client import Listing, QueueClient
from reviewer.queue.config import Secret
from reviewer.queue.deciding import not_pending_words, signed_statement, stale_words
from reviewer.queue.messages import Decision, ProposalRecord, ProposalSummary, Whoami
from reviewer.queue.refusals import (
    AlreadyDecided,
    Conflict,
    Forbidden,
    NotFound,
    QueueError,
    QueueUnreachable,
    StaleRevision,
    Unauthorized,
)
from reviewer.signing.signed_approvals import SignedStatement
from reviewer.signing.sshsig import Signer, SigningError
from reviewer.tui.model.sources import (
    BrokenFile,
    DecisionOutcome,
    ExecutionRecord,
    QueueItem,
    execution_from_queue,
    local_refusal,
    shown,
)


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
        verb: Decision = DECISIONS.get(decision, "reject")
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
                break_glass=decision == "break_glass",
            )
        except SigningError as error:
            return failed(f"not sent: {safe_text(clip(str(error), 200))}")
        except StaleRevision as error:
            if error.latest_revision == revision:  # the revision is the latest: its digest is not
                return failed(stale_words(error, item.proposal_id, revision, plan_sha256))
            return self.refused(item, error)
        except QueueError as error:
            return self.refused(item, error)
        except Exception as error:  # a bug must not take the app down with it
            return failed(f"the decision could not be sent ({type(error).__name__})")
        how = " (signed)" if signed else ""
        if answer.state == "pending":
            so_far = describe_approvals(map(shown, answer.approvals), answer.approvals_required)
            message = f"your approval counts: {so_far}{how}; revision {answer.revision} waits for more"
        else:
            words = STATE_WORDS.get(answer.state, answer.state)
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
        # In a thread: an agent may wait for its user to confirm (`ssh-add -c`), the app goes on drawing.
        return await asyncio.to_thread(
            signed_statement, self.signer, proposal_id, revision, plan_sha256, decision, reviewer
        )

    def refused(self, item: QueueItem, error: QueueError) -> DecisionOutcome:
        """The queue's refusal in the reviewer's words."""
        if isinstance(error, StaleRevision):
            latest = error.latest_revision
            message = f"the agent re-planned: revision {latest} is waiting"
            return DecisionOutcome(False, message, "pending", error=True, reopen_revision=latest)
        if isinstance(error, AlreadyDecided) and error.state == "executed":
            runs = [event.actor for event in item.history if event.event == "executed"]
            words = not_pending_words(error, runs[-1] if runs else None)
            return DecisionOutcome(False, words, error.state, True)
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
        if isinstance(error, Forbidden) and error.code == OUTSIDE_THE_GROUP:
            return failed(forbidden_words(error, self.login_hint))
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


OUTSIDE_THE_GROUP: Final = "not_in_reviewers_group"
"""The queue's code for a provider's person no longer in its reviewers group (their sign-in ended)."""


def forbidden_words(error: Forbidden, login_hint: str) -> str:
    """A 403 that stops the app, in words that say what helps: on a queue that signs reviewers in
    through a provider, only the provider's group does (the queue refuses minted reviewer tokens)."""
    if error.code == OUTSIDE_THE_GROUP:
        return (
            "your sign-in ended: not in the reviewers group at the identity provider; your pending "
            f"approvals no longer count and decisions are not sent (ask for the group, then `{login_hint}`)"
        )
    return f"this token may not list proposals (not a reviewer's): run `{login_hint}` with a reviewer token"


def token_refused(login_hint: str) -> str:
    """Said by the status line and by a refused decision alike: a 401 is fixed only by logging in."""
    return f"the queue refused your token (revoked, or not one of this queue's): run `{login_hint}`"


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
        delay: float = min(self.maximum, self.base * 2 ** (self.failures - 1))
        return delay * (1 + random.uniform(0, self.jitter)) if self.jitter else delay

    def reset(self) -> None:
        self.failures = 0


DECISIONS: dict[str, Decision] = {
    "approve": "approve",
    "break_glass": "approve",
    "reject": "reject",
    "request_changes": "request_changes",
}
"""The screens' decision words as the queue's; anything else is sent as the safe one, a rejection."""
STATE_WORDS = {"approved": "approved", "rejected": "rejected", "changes_requested": "changes requested"}

DEFAULT_LIST_WAIT = 25.0
"""Seconds the queue holds an idle poll of the list: one request every 25 s, under a proxy's timeout."""
MAX_LIST_PAGES = 10
"""Pages of summaries read per changed poll (50 each): the newest 500 proposals are listed."""
FROM_QUEUE = "from the queue"


@dataclass
class Fetched:
    """One look at a proposal: the queue's record, the revisions fetched (with the queue's digest of
    each), and the ones the queue could not serve."""

    record: ProposalRecord
    revisions: list[tuple[Proposal, str]] = field(default_factory=list)
    broken: list[BrokenFile] = field(default_factory=list)


class QueueSource:
    """Live review's source of proposals: the queue, polled under the reviewer's token.

    A poll asks for the list with its ETag and fetches what changed. Once it holds an ETag, a poll is
    a long poll: the queue answers the moment anything changes, or a bodiless 304 after `list_wait`
    seconds, so an idle app costs one request every `list_wait` seconds and sees a new proposal at
    once. A poll that brought news, or was not held (the first, the first after a failure), is
    followed at once by a held one; one that brought nothing new, or no ETag, by the next
    `poll_interval` after its start at the soonest, so a queue that does not wait is still asked
    only every `poll_interval`.
    Polls fail fast (no client retries), and the caller backs off with `backoff`; decisions go
    through `decider`, whose client retries dropped connections with the decision's key.
    """

    def __init__(
        self,
        queue_url: str,
        token: Secret | httpx.Auth,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        poll_interval: float = 2.0,
        list_wait: float = DEFAULT_LIST_WAIT,
        retry_base: float = 1.0,
        max_backoff: float = 30.0,
        jitter: float = 0.1,
        timeout: float = 10.0,
        signer: Signer | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        """`clock` (seconds, any origin) dates the status line, `now` (the wall clock) a pending
        proposal's age; tests pass fixed ones. `signer` signs every decision with the reviewer's SSH
        key (`signing_key` in the config)."""
        self.queue_url = queue_url
        self.login_hint = f"reviewer login --queue {queue_url}"
        # A provider's session (an `httpx.Auth`) is shared: one renewal serves both clients.
        credential = token.reveal() if isinstance(token, Secret) else token
        self.poll_client = QueueClient(queue_url, credential, transport=transport, retries=0, timeout=timeout)
        decide_client = QueueClient(queue_url, credential, transport=transport, timeout=timeout)
        self.decider = QueueDecider(decide_client, self.login_hint, signer)
        self.clock = clock
        self.now = now
        self.poll_interval = poll_interval
        self.list_wait = list_wait
        self.pause = poll_interval
        """Seconds from the end of the last poll to the next."""
        self.backoff = Backoff(retry_base, max_backoff, jitter)
        self.identity: Whoami | None = None
        self.polls = 0
        self.polls_not_modified = 0
        """List requests sent, and how many were answered 304 (the bench counts them)."""
        self._etag: str | None = None
        self._synced: dict[str, ProposalSummary] = {}
        self._fetched: set[tuple[str, int]] = set()
        self._fetched_ids: set[str] = set()
        """The proposals of which a revision was fetched: a poll fetches their changes in full (an
        approval cast or withdrawn among them: the list row names the approvals so far)."""
        self._executions_fetched: dict[str, set[int]] = {}

    async def connect(self) -> Whoami | None:
        """Who the token belongs to, asked once: the identity the first time, None after."""
        if self.identity is not None:
            return None
        self.identity = await self.poll_client.whoami()
        self.decider.identity = self.identity
        return self.identity

    async def poll(self) -> AsyncIterator[Fetched | ProposalSummary]:
        """One poll: each proposal whose summary changed since the last poll (its approvals so far
        among what the summary holds), as the list row when it waits (with the queue's reading of
        its plan: one request a page, whatever the number pending), else fetched
        (`_fetched_by_poll`). The ETag is kept only once every change is taken, so a poll cut off
        midway is redone in full."""
        self.polls += 1
        asked_at = self.clock()
        held = self._etag is not None and self.backoff.failures == 0  # after a failure: answered at once
        listing = await self.poll_client.list_proposals(etag=self._etag, wait=self.list_wait if held else 0.0)
        self.pause = self._pause_after(held, listing.etag, asked_at)
        self.polls_not_modified += listing.not_modified
        if listing.not_modified:
            return
        for summary in await self._all_summaries(listing):
            if self._synced.get(summary.proposal_id) != summary:
                fetched = self._fetched_by_poll(summary)
                yield await self.fetch(summary.proposal_id) if fetched else summary
                self._synced[summary.proposal_id] = summary
        self._etag = listing.etag

    def _pause_after(self, held: bool, etag: str | None, asked_at: float) -> float:
        """Nothing before the next poll when it will be held (`list_wait`, an ETag) and this one
        brought news or was not held; else what is left of `poll_interval`."""
        changed = etag != self._etag
        if etag is not None and self.list_wait > 0 and (changed or not held):
            return 0.0
        return max(0.0, self.poll_interval - (self.clock() - asked_at))

    def _fetched_by_poll(self, summary: ProposalSummary) -> bool:
        """Whether the poll fetches this proposal's record and latest revision: when the app holds a
        revision of it already (opened, or fetched before: a re-plan is compared with it), when it
        no longer waits (who decided, the executors' refusals and the runs are in its record), or
        when the queue sent no reading of its plan."""
        if summary.reading is None or summary.state != "pending":
            return True
        return summary.proposal_id in self._fetched_ids

    async def _all_summaries(self, listing: Listing) -> list[ProposalSummary]:
        assert listing.page is not None
        summaries = list(listing.page.proposals)
        cursor = listing.page.next_cursor
        for _ in range(MAX_LIST_PAGES - 1):
            if not cursor:
                break
            page = (await self.poll_client.list_proposals(cursor=cursor)).page
            assert page is not None
            summaries.extend(page.proposals)
            cursor = page.next_cursor
        return summaries

    async def fetch(self, proposal_id: str, *, previous: bool = False) -> Fetched:
        """The queue's record of a proposal and its latest revision if not fetched before; with
        `previous`, the revision before it too (for drift, when the reviewer opens the proposal).

        A poll fetches no more than that: older revisions and execution reports are fetched when a
        proposal is opened, so an agent submitting many large revisions costs each reviewer's app one
        revision per change, not every revision on every poll. The app lists a fetched revision at
        once and checks, hashes (against the queue's digest) and analyses it in its completion thread.
        """
        record = await self.poll_client.get_proposal(proposal_id)
        queue_digests = {info.revision: info.plan_sha256 for info in record.revisions}
        latest = record.latest.revision
        wanted = {latest - 1, latest} - {0} if previous else {latest}
        fetched = Fetched(record)
        for number in sorted(wanted):
            if (proposal_id, number) in self._fetched:
                continue
            try:
                proposal = await self.poll_client.get_revision(proposal_id, number)
                if (proposal.proposal_id, proposal.revision) != (proposal_id, number):
                    answered = f"answered {proposal.proposal_id} revision {proposal.revision}"
                    raise ProposalError("the queue", answered)
            except (NotFound, ProposalError) as error:
                self._fetched.add((proposal_id, number))
                self._fetched_ids.add(proposal_id)
                fetched.broken.append(BrokenFile(f"{proposal_id} revision {number}", str(error)))
                continue
            fetched.revisions.append((proposal, queue_digests.get(number, "")))
            self._fetched.add((proposal_id, number))
            self._fetched_ids.add(proposal_id)
        return fetched

    async def fetch_executions(self, record: ProposalRecord) -> list[ExecutionRecord | BrokenFile]:
        """The real runs the queue holds, for the verification view (`v`), fetched once each."""
        proposal_id = record.proposal_id
        executed = {event.revision for event in record.history if event.event == "executed"}
        if not executed - self._executions_fetched.get(proposal_id, set()):
            return []
        reports: list[ExecutionRecord | BrokenFile] = []
        for stored in await self.poll_client.get_executions(proposal_id):
            try:
                reports.append(execution_from_queue(proposal_id, stored))
            except ProposalError as error:
                reports.append(BrokenFile(f"{proposal_id} execution", error.problem))
        self._executions_fetched[proposal_id] = executed
        return reports

    async def aclose(self) -> None:
        await self.poll_client.aclose()
        await self.decider.client.aclose()


def problem_words(error: Exception) -> str:
    """Why a poll failed, in the status line's words."""
    if isinstance(error, QueueUnreachable):
        return "queue unreachable"
    if isinstance(error, QueueError):
        return f"queue failing ({getattr(error, 'status', '?')})"
    return f"queue answer unreadable ({type(error).__name__})"
