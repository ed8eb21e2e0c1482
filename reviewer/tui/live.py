"""LiveReviewerApp: the review app fed by the queue, polling it and deciding under the reviewer's token."""

from __future__ import annotations

import asyncio
import contextlib
import math
import time
from collections.abc import Callable
from dataclasses import dataclass

import httpx
from rich.text import Text
from textual import work
from textual.css.query import NoMatches
from textual.message import Message

from reviewer.analysis import Analysis
from reviewer.api import ProposalRecord, ProposalSummary, Whoami
from reviewer.client import (
    Forbidden,
    Listing,
    NotFound,
    QueueClient,
    QueueError,
    QueueUnreachable,
    Unauthorized,
)
from reviewer.config import Secret
from reviewer.proposal import ProposalError
from reviewer.queue_source import Backoff, QueueDecider, token_refused
from reviewer.signing import Signer
from reviewer.sources import BrokenFile, DecisionOutcome, QueueItem, execution_from_queue, shown
from reviewer.tui.app import CompletionJob, ExecutionLoaded, FileBroken, ProposalListed, ReviewerApp
from reviewer.tui.screens.queue import QueueScreen
from reviewer.tui.screens.review import ReviewScreen

MAX_LIST_PAGES = 10
"""Pages of summaries read per changed poll (50 each): the newest 500 proposals are listed."""
FROM_QUEUE = "from the queue"


@dataclass
class Link:
    """What the status line says about the queue: who we are, when it last answered, why it does not."""

    identity: Whoami | None = None
    answered_at: float | None = None
    retry_at: float | None = None
    problem: str = ""
    stopped: str = ""


def status_text(link: Link, now: float, queue_url: str) -> Text:
    """The line above the footer. `now` comes from the app's clock, so a snapshot shows fixed figures."""
    if link.stopped:
        return Text(link.stopped, "danger")
    if link.retry_at is not None:
        text = Text(f"{link.problem}, retrying in {max(0, math.ceil(link.retry_at - now))} s", "warn.strong")
        text.append(f" · {queue_url}", "muted")
        if link.answered_at is not None:
            text.append(f" · last answer {int(now - link.answered_at)} s ago", "muted")
        return text
    if link.identity is None:
        return Text(f"connecting to {queue_url}…", "italic")
    text = Text(f"signed in as {shown(link.identity.name)} ({link.identity.role})")
    if link.answered_at is not None:
        text.append(f" · queue answered {int(now - link.answered_at)} s ago", "muted")
    return text


def problem_words(error: Exception) -> str:
    if isinstance(error, QueueUnreachable):
        return "queue unreachable"
    if isinstance(error, QueueError):
        return f"queue failing ({getattr(error, 'status', '?')})"
    return f"queue answer unreadable ({type(error).__name__})"


class LiveReviewerApp(ReviewerApp):
    """`reviewer review`: the demo's screens, fed by polling the queue, deciding through it.

    One worker polls, and schedules its next poll only when the last one finished, so a slow queue
    never sees two polls from one app; an idle poll is a bodiless 304 (If-None-Match). Polls fail
    fast (no client retries) and back off; decisions retry dropped connections with their key.
    """

    @dataclass
    class Connected(Message):
        """The queue said who the token belongs to: the chrome and the status line name them."""

        identity: Whoami

    @dataclass
    class Answered(Message):
        """A poll finished; `at` is the app's clock, so the status line counts from it."""

        at: float

    @dataclass
    class Down(Message):
        """A poll failed: the next one is at `retry_at` (the app's clock)."""

        retry_at: float
        problem: str

    @dataclass
    class Stopped(Message):
        """Polling ended for good (a refused token): only the reviewer can fix it."""

        reason: str

    @dataclass
    class RecordArrived(Message):
        """The queue's record of a proposal: its state, trail and each revision's digest."""

        record: ProposalRecord

    @dataclass
    class Synced(Message):
        """Every revision fetched for a proposal has been posted: open screens may refresh."""

        proposal_id: str

    @dataclass
    class OpenLatest(Message):
        """The revision a 412 named has arrived: open it in place of the stale one."""

        proposal_id: str
        notice: str

    def __init__(
        self,
        queue_url: str,
        token: Secret,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        clock: Callable[[], float] = time.monotonic,
        poll_interval: float = 2.0,
        retry_base: float = 1.0,
        max_backoff: float = 30.0,
        jitter: float = 0.1,
        timeout: float = 10.0,
        signer: Signer | None = None,
    ) -> None:
        """`clock` (seconds, any origin) dates the status line; tests pass a fixed one. `signer` signs
        every decision with the reviewer's SSH key (`signing_key` in the config)."""
        self.queue_url = queue_url
        self.login_hint = f"reviewer login --queue {queue_url}"
        self.poll_client = QueueClient(
            queue_url, token.reveal(), transport=transport, retries=0, timeout=timeout
        )
        decide_client = QueueClient(queue_url, token.reveal(), transport=transport, timeout=timeout)
        self.queue_decider = QueueDecider(decide_client, self.login_hint, signer)
        super().__init__(decider=self.queue_decider, mode="live")
        self.clock = clock
        self.poll_interval = poll_interval
        self.backoff = Backoff(retry_base, max_backoff, jitter)
        self.link = Link()
        self.polls = 0
        self.polls_not_modified = 0
        """List requests sent, and how many were answered 304 (the bench counts them)."""
        self._identity: Whoami | None = None
        self._etag: str | None = None
        self._synced: dict[str, ProposalSummary] = {}
        self._fetched: set[tuple[str, int]] = set()
        self._executions_fetched: dict[str, set[int]] = {}
        self._wake = asyncio.Event()

    # --- hooks of ReviewerApp ---

    def create_queue_screen(self) -> QueueScreen:
        return QueueScreen("live")

    def create_item(self, proposal_id: str) -> QueueItem:
        return QueueItem(proposal_id, "pending")

    def create_review_screen(self, item: QueueItem, notice: str | None = None) -> ReviewScreen:
        identity = self.link.identity
        who = shown(identity.name, 30) if identity else "live"
        return ReviewScreen(item, mode="live", who=who, notice=notice)

    def who(self) -> str:
        identity = self.link.identity
        return f"{shown(identity.name, 30)} ({identity.role})" if identity else "live"

    async def on_mount(self) -> None:
        self.set_interval(1.0, self.refresh_status)
        self.call_after_refresh(self.refresh_status)
        self.watch_queue()

    async def on_unmount(self) -> None:
        await self.poll_client.aclose()
        await self.queue_decider.client.aclose()

    # --- polling ---

    def poll_now(self) -> None:
        """Cut the wait before the next poll short (after a decision, or from a test)."""
        self._wake.set()

    async def _pause(self, delay: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)
        self._wake.clear()

    @work(group="queue-poll", exit_on_error=False)
    async def watch_queue(self) -> None:
        """Poll, wait, poll again: the next poll is scheduled only once the last one has finished."""
        while True:
            delay = self.poll_interval
            try:
                await self.poll_once()
            except Unauthorized:
                self.post_message(self.Stopped(token_refused(self.login_hint)))
                return
            except Forbidden:
                self.post_message(
                    self.Stopped(
                        f"this token may not list proposals (not a reviewer's): run `{self.login_hint}` "
                        "with a reviewer token"
                    )
                )
                return
            except Exception as error:  # unreachable, 5xx, an unreadable answer: back off, never crash
                delay = self.backoff.next_delay()
                self.post_message(self.Down(self.clock() + delay, problem_words(error)))
            else:
                self.backoff.reset()
            await self._pause(delay)

    async def poll_once(self) -> None:
        if self._identity is None:
            self._identity = await self.poll_client.whoami()
            self.queue_decider.identity = self._identity
            self.post_message(self.Connected(self._identity))
        self.polls += 1
        listing = await self.poll_client.list_proposals(etag=self._etag)
        self.polls_not_modified += listing.not_modified
        if not listing.not_modified:
            for summary in await self._all_summaries(listing):
                if self._synced.get(summary.proposal_id) != summary:
                    await self.sync_proposal(summary.proposal_id)
                    self._synced[summary.proposal_id] = summary
            self._etag = listing.etag  # only now: a poll cut off midway is redone in full
        self.post_message(self.Answered(self.clock()))

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

    async def sync_proposal(self, proposal_id: str, *, previous: bool = False) -> ProposalRecord:
        """The queue's record of a proposal and its latest revision if the app lacks it; with
        `previous`, the revision before it too (for drift, when the reviewer opens the proposal).

        A poll fetches no more than that: older revisions and execution reports are fetched when a
        proposal is opened, so an agent submitting many large revisions costs each reviewer's app one
        revision per change, not every revision on every poll. A fetched revision is listed at once
        and checked, hashed (against the queue's digest) and analysed in the completion thread.
        """
        record = await self.poll_client.get_proposal(proposal_id)
        queue_digests = {info.revision: info.plan_sha256 for info in record.revisions}
        latest = record.latest.revision
        wanted = {latest - 1, latest} - {0} if previous else {latest}
        listed: list[ProposalListed] = []
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
                self.post_message(FileBroken(BrokenFile(f"{proposal_id} revision {number}", str(error))))
                continue
            listed.append(ProposalListed(Analysis(proposal), FROM_QUEUE, queue_digests.get(number, "")))
            self._fetched.add((proposal_id, number))
        self.post_message(self.RecordArrived(record))
        for message in listed:
            self.post_message(message)
            self.enqueue_completion(
                CompletionJob(
                    message.analysis, f"{proposal_id} revision {message.analysis.proposal.revision}"
                )
            )
        self.post_message(self.Synced(proposal_id))
        return record

    async def sync_executions(self, record: ProposalRecord) -> None:
        """The real runs the queue holds, for the verification view (`v`), fetched once each."""
        proposal_id = record.proposal_id
        executed = {event.revision for event in record.history if event.event == "executed"}
        if not executed - self._executions_fetched.get(proposal_id, set()):
            return
        for stored in await self.poll_client.get_executions(proposal_id):
            try:
                self.post_message(ExecutionLoaded(execution_from_queue(proposal_id, stored)))
            except ProposalError as error:
                self.post_message(FileBroken(BrokenFile(f"{proposal_id} execution", error.problem)))
        self._executions_fetched[proposal_id] = executed

    @work(group="opened", exit_on_error=False)
    async def fetch_opened(self, proposal_id: str) -> None:
        """What only an open proposal needs: the revision before the latest (drift) and the reports
        of its real runs (verification)."""
        try:
            record = await self.sync_proposal(proposal_id, previous=True)
            await self.sync_executions(record)
        except Exception as error:  # the poll reports an unreachable queue; the screen stays usable
            self.notify(
                f"could not fetch the rest of {shown(proposal_id, 60)}: {problem_words(error)}",
                severity="warning",
            )

    def on_queue_screen_open_requested(self, message: QueueScreen.OpenRequested) -> None:
        super().on_queue_screen_open_requested(message)
        self.fetch_opened(message.proposal_id)

    # --- handlers: the only code that touches the screens ---

    def refresh_status(self) -> None:
        """Repaint the status line (a timer also calls it each second, so "N s ago" counts up)."""
        # While the app shuts down the screen may be mounted with its widgets already gone.
        with contextlib.suppress(NoMatches):
            if self.queue_screen.is_mounted:
                self.queue_screen.show_status(status_text(self.link, self.clock(), self.queue_url))

    def on_live_reviewer_app_connected(self, message: Connected) -> None:
        self.link.identity = message.identity
        self.queue_screen.who = self.who()
        if self.queue_screen.is_mounted:
            self.queue_screen.refresh_chrome()
        self.refresh_status()

    def on_live_reviewer_app_answered(self, message: Answered) -> None:
        self.link.answered_at = message.at
        self.link.retry_at = None
        self.refresh_status()

    def on_live_reviewer_app_down(self, message: Down) -> None:
        self.link.retry_at = message.retry_at
        self.link.problem = message.problem
        self.refresh_status()

    def on_live_reviewer_app_stopped(self, message: Stopped) -> None:
        self.link.stopped = message.reason
        self.refresh_status()
        self.notify(message.reason, title="Queue", severity="error", timeout=30)

    def on_live_reviewer_app_record_arrived(self, message: RecordArrived) -> None:
        record = message.record
        item = self.items.get(record.proposal_id)
        if item is None:
            item = self.items[record.proposal_id] = self.create_item(record.proposal_id)
        executed_before = {event.revision for event in item.history if event.event == "executed"}
        item.apply(record, self.link.identity)
        if item.revisions:
            self.list_item(item)
        executed = {event.revision for event in item.history if event.event == "executed"}
        if executed - executed_before and self._is_open(item):
            self.fetch_opened(item.proposal_id)

    def _is_open(self, item: QueueItem) -> bool:
        stack = self.screen_stack
        return any(isinstance(screen, ReviewScreen) and screen.item is item for screen in stack)

    def take_digest(self, item: QueueItem, revision: int, digest: str) -> None:
        """The queue's record stays the digest an approval names; a plan hashing otherwise is flagged
        and never approvable (`local_refusal`)."""
        if item.digests.get(revision) == digest:
            return
        item.local_digests[revision] = digest
        self.list_item(item)
        self.notify(
            f"{shown(item.proposal_id, 128)}: the fetched plan does not hash to the queue's digest",
            title="Digest mismatch",
            severity="error",
            timeout=30,
        )

    def on_live_reviewer_app_synced(self, message: Synced) -> None:
        self._refresh_open_reviews(message.proposal_id)

    def _refresh_open_reviews(self, proposal_id: str) -> None:
        for screen in self.screen_stack:
            if isinstance(screen, ReviewScreen) and screen.item.proposal_id == proposal_id:
                screen.refresh_live()

    def show_outcome(
        self, item: QueueItem, revision: int, outcome: DecisionOutcome, *, error: bool = False
    ) -> None:
        """The answer in words; a decided item takes the queue's answer; a 412 opens the new revision."""
        super().show_outcome(item, revision, outcome, error=outcome.error)
        if outcome.answer:
            item.take_state(outcome.answer)
            self.list_item(item)
            self._refresh_open_reviews(item.proposal_id)
        if outcome.reopen_revision:
            self.reopen(item.proposal_id, outcome.message)
        self.poll_now()

    @work(group="reopen", exit_on_error=False)
    async def reopen(self, proposal_id: str, notice: str) -> None:
        """Fetch the revision the agent re-planned to, then open it in place of the stale one."""
        try:
            await self.sync_proposal(proposal_id)
        except Exception as error:
            self.notify(f"could not fetch the new revision: {problem_words(error)}", severity="error")
            return
        self.post_message(self.OpenLatest(proposal_id, notice))

    def on_live_reviewer_app_open_latest(self, message: OpenLatest) -> None:
        item = self.items.get(message.proposal_id)
        screen = self.screen
        if item is None or not isinstance(screen, ReviewScreen) or screen.item is not item:
            return  # the reviewer moved on: the queue screen marks the new revision
        if screen.revision != item.latest_revision:
            self.switch_screen(self.create_review_screen(item, notice=message.notice))
