"""ReviewerApp: the screens, the keys every screen shares, and the workers that load proposals from a
folder (the demo) or poll them from the queue (live review)."""

from __future__ import annotations

import asyncio
import contextlib
import sys
import threading
from collections import deque
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from textual import events, work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.css.query import NoMatches
from textual.filter import LineFilter
from textual.message import Message
from textual.notifications import SeverityLevel
from textual.screen import Screen
from textual.worker import get_current_worker

from reviewer.plan.sanitize import prepare_hidden_patterns, safe_text
from reviewer.queue.terminal_alerts import TerminalAlerts
from reviewer.tui.alerts import RESTORE_TITLE, SAVE_TITLE, PendingWatch, alert_bytes, desktop_protocol
from reviewer.tui.failures import ReportsWorkerFailures
from reviewer.tui.loader import (
    CompletionJob,
    DriftJob,
    Listing,
    complete,
    first_frame_files,
    prepare_drift,
)
from reviewer.tui.messages import (
    DriftComputed,
    DriftPrepared,
    ExecutionLoaded,
    FileBroken,
    OpenLatest,
    PollingStopped,
    ProposalAnalysed,
    ProposalFetched,
    ProposalListed,
    ProposalRefused,
    ProposalVerified,
    QueueAnswered,
    QueueConnected,
    QueueDown,
    QueueRowListed,
    ScanDone,
)
from reviewer.tui.model.sources import (
    BrokenFile,
    Decider,
    DecisionOutcome,
    DemoDecider,
    QueueItem,
    SourceError,
    proposal_files,
    shown,
)
from reviewer.tui.palette import COLOR_SYSTEMS, THEME, rich_theme, terminal_filters
from reviewer.tui.runtime import LONGEST_CLAIM, Foreground, interpreter_handed_over_often
from reviewer.tui.screens.queue import QueueScreen
from reviewer.tui.status import Link, status_text

if TYPE_CHECKING:  # imported where used: the first paint should not wait for the review screens
    from reviewer.plan.proposal import Proposal
    from reviewer.queue.messages import ProposalRecord
    from reviewer.tui.model.queue_source import QueueSource
    from reviewer.tui.screens.dialogs import HelpSection
    from reviewer.tui.screens.review import ReviewScreen


def prepare_review_screens() -> None:
    """Ahead of the first enter, in the loader's thread (see `ReviewerApp.load_proposals`): the
    review screens' module, and the hidden-character patterns their first rows are read with."""
    import reviewer.tui.screens.review  # noqa: F401

    prepare_hidden_patterns()


class ReviewerApp(ReportsWorkerFailures, App[None]):
    """The review app, fed by a source: `reviewer demo` a folder of files and a decider that sends
    nothing; `reviewer review` the queue (`QueueSource`), polled, deciding through it.

    Live, one worker polls, and schedules its next poll only when the last one finished, so a slow
    queue never sees two polls from one app. Workers return what they fetched in messages; only the
    handlers change the items the screens read.
    """

    CSS_PATH = Path(__file__).parent / "reviewer.tcss"
    TITLE = "reviewer"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        source: Path | QueueSource | None = None,
        *,
        decider: Decider | None = None,
        mode: str = "demo",
        color_system: str | None = None,
        open_first: str | None = None,
        alerts: TerminalAlerts | None = None,
    ) -> None:
        """`source` is a folder (or one file) for the demo, or the queue for live review, which sets
        the mode to "live" and decides through the queue. `color_system` ("standard", "256",
        "truecolor") overrides what the terminal was detected to have (TEXTUAL_COLOR_SYSTEM); tests
        pass it to see the screen in 16 colours. Live, `open_first` names the proposal whose review
        screen opens as soon as it is fetched (`reviewer review ID`, the line a notification gives),
        and `alerts` says how a newly pending proposal is told (bell, window title, desktop)."""
        super().__init__()
        self.use_theme_before_styling()
        self.console.push_theme(rich_theme(self.no_color))
        self.color_system = color_system
        self._terminal_filters: list[LineFilter] | None = None
        # The queue's modules (httpx, signing) load only for live review: the demo's first paint
        # does not wait for them.
        self.folder = source if source is None or isinstance(source, Path) else None
        self.queue: QueueSource | None = None if source is None or isinstance(source, Path) else source
        if self.queue is not None:
            decider, mode = self.queue.decider, "live"
        self.decider: Decider = decider or DemoDecider()
        self.mode = mode
        self.link = Link()
        self._wake = asyncio.Event()
        self.items: dict[str, QueueItem] = {}
        self.queue_screen = self.create_queue_screen()
        self._jobs: deque[CompletionJob | DriftJob] = deque()
        self._jobs_lock = threading.Lock()
        self._completing = False
        self.open_first = open_first
        self.alerts = alerts or TerminalAlerts()
        self.pending_watch = PendingWatch()
        self._title_saved = False
        self.foreground = Foreground()
        self._rows_painted = threading.Event()

    def run(self, **options: Any) -> Any:
        """Textual's `run` (what the app exits with, returned), with the interpreter handed between
        threads every `SWITCH_INTERVAL`; the previous interval returns after."""
        with interpreter_handed_over_often():
            return super().run(**options)

    def use_theme_before_styling(self) -> None:
        """The app's theme, in place before the stylesheet is first read: setting `theme` would
        have Textual parse every stylesheet again after the first frame's styles (about a twentieth
        of what the start costs over a bare Textual app's). What its watcher would change that is
        not yet read: the stylesheet's variables and the app's theme class (the theme is dark, as
        the default is, so the dark-mode classes and the ANSI colours' filter stay as they are)."""
        self.register_theme(THEME)
        self.set_reactive(App.theme, THEME.name)
        self.set_class(True, f"-theme-{THEME.name}", update=False)
        self.stylesheet.set_variables(self.get_css_variables())

    async def on_event(self, event: events.Event) -> None:
        """A key gives the screen the interpreter until its answer is painted: the completion thread
        waits at its next pause (`Foreground`), so opening a plan or its drift is never slowed by the
        checks of another."""
        if isinstance(event, events.Key):
            self.foreground.claim()
            self.call_after_refresh(self._release_after_paint)
        await super().on_event(event)

    def _release_after_paint(self) -> None:
        """One more frame: a key that pushes a screen paints it in the frame after the key's own."""
        self.call_after_refresh(self.foreground.release)

    def push_screen(self, screen: Screen[Any] | str, *args: Any, **kwargs: Any) -> Any:
        """A pushed screen keeps the interpreter until its first frame is painted: the key that
        pushed it may have been answered (and its claim released) before the screen was composed."""
        if isinstance(screen, Screen) and screen is not self.queue_screen:  # no completion runs yet
            self.hold_foreground_until_painted(screen)
        return super().push_screen(screen, *args, **kwargs)

    def hold_foreground_until_painted(self, screen: Screen[Any]) -> None:
        """Claim the interpreter now; release it once `screen` is painted (a callback posted to a
        screen runs after that screen's next refresh, whenever it starts)."""
        self.foreground.claim()
        screen.call_after_refresh(self._release_after_paint)

    def create_queue_screen(self) -> QueueScreen:
        """The first screen; live, with the queue's own columns."""
        return QueueScreen(self.mode, self.queue.now if self.queue else None)

    def create_item(self, proposal_id: str) -> QueueItem:
        """A new proposal's holder; in the demo its state column says "demo"."""
        return QueueItem(proposal_id, "pending" if self.queue else self.mode)

    def create_review_screen(self, item: QueueItem, notice: str | None = None) -> ReviewScreen:
        from reviewer.tui.screens.review import ReviewScreen

        identity = self.link.identity
        who = (shown(identity.name, 30) if identity else "live") if self.queue else None
        return ReviewScreen(item, mode=self.mode, who=who, notice=notice)

    def who(self) -> str:
        """The chrome's first part: the mode, or live who the queue says is signed in."""
        identity = self.link.identity
        return f"{shown(identity.name, 30)} ({identity.role})" if identity else self.mode

    def get_line_filters(self) -> list[LineFilter]:
        """Textual's filters (NO_COLOR among them), then the terminal's own palette: the one asked
        for, else the one detected for a real terminal (a headless test run has none)."""
        if self._terminal_filters is None:
            if self.color_system is None and self.is_headless:
                self._terminal_filters = []
            else:
                system = self.color_system or self.console.color_system or ""
                self._terminal_filters = list(terminal_filters(COLOR_SYSTEMS.get(system)))
        return [*super().get_line_filters(), *self._terminal_filters]

    def get_default_screen(self) -> Screen[Any]:
        """The queue screen is the app's first screen, in place of the blank one Textual would make
        and then cover: no screen is composed, styled and painted before it (about a seventh of what
        the start costs over a bare Textual app's). The demo's first files are scanned here, before
        it is composed, so its first frame shows their rows; the rest are listed from a thread. The
        checks, which hold the interpreter lock for long, start after a paint (`on_scan_done`)."""
        if self.folder is not None:
            self.start_listing(self.folder)
        return self.queue_screen

    def on_mount(self) -> None:
        self.set_interval(LONGEST_CLAIM / 4, self.foreground.expire)
        if self.queue is not None:
            self.set_interval(1.0, self.refresh_status)
            self.call_after_refresh(self.refresh_status)
            if self.open_first is not None:
                self.fetch_first(self.open_first)
            self.watch_queue()

    def start_listing(self, folder: Path) -> None:
        """List the folder's leading files at once (about 10 ms of scanning at most), before the
        queue screen is composed: rows listed before it has its columns wait on it, which adds them
        with its columns. A large file, and every file after it, is listed from the loader's thread."""
        listing = Listing()
        try:
            paths = proposal_files(folder)
        except SourceError as error:
            self.list_broken(BrokenFile(str(folder), str(error)))
            paths = []
        first, rest = first_frame_files(paths)
        for message in listing.messages(first):
            self.take_listed(message)
        self.load_proposals(listing, rest)

    def take_listed(self, message: Message) -> None:
        """A message of the listing, handled here and now rather than posted."""
        if isinstance(message, ProposalListed):
            self.on_proposal_listed(message)
        elif isinstance(message, ExecutionLoaded):
            self.on_execution_loaded(message)
        elif isinstance(message, FileBroken):
            self.on_file_broken(message)

    @work(thread=True, group="load", exit_on_error=False)
    def load_proposals(self, listing: Listing, paths: list[Path]) -> None:
        """List the files the first frame did not (each as soon as its cheap scan is done: about
        0.1 s for the largest file allowed), then have every listed file checked, hashed and
        analysed, smallest first, off the event loop.

        The review screens are imported, and the hidden-character patterns their rows are read with
        built, here rather than on the first enter (about 50 ms, much more while the checks run):
        before a large file is listed, so it opens at once; with nothing left to scan, once the rows
        are painted (`enqueue_completions`), so the first frame is not slowed."""
        if paths:
            prepare_review_screens()
        for message in listing.messages(paths):
            self.post_message(message)
        self.post_message(listing.done())
        if not paths:
            self._rows_painted.wait(timeout=1.0)
            prepare_review_screens()

    def list_item(self, item: QueueItem) -> None:
        """The queue's row for `item`. A worker's message can arrive while the app shuts down, its
        screen's widgets already gone: then there is nothing to show it on."""
        with contextlib.suppress(NoMatches):
            self.queue_screen.show_item(item)

    def list_broken(self, broken: BrokenFile) -> None:
        with contextlib.suppress(NoMatches):
            self.queue_screen.show_broken(broken)

    def on_scan_done(self, message: ScanDone) -> None:
        """Every file is listed (its messages came first): the checks start once a frame has shown
        the rows, since they hold the interpreter lock for long stretches."""
        self.call_after_refresh(self.enqueue_completions, message.listed)

    def enqueue_completions(self, listed: list[tuple[Proposal, str]]) -> None:
        """The re-plans' drifts first (what `d` shows, about 0.1 s for 100,000 calls), then the checks.
        Each revision's analysis is made here, on the event loop, before any completion runs: the
        completion computes its figures on the one the screens read."""
        self._rows_painted.set()
        jobs = [self.completion_job(proposal, source) for proposal, source in listed]
        for item in self.items.values():
            self.enqueue_drift(item)
        for job in jobs:
            self.enqueue_completion(job)

    def enqueue_drift(self, item: QueueItem) -> None:
        """Compare the latest revision with its base ahead of the checks queued after it, unless
        that drift is known already."""
        base = item.drift_base(item.latest_revision)
        if base is not None and item.known_drift(base, item.latest_revision) is None:
            self.enqueue_completion(DriftJob(item, base, item.latest_revision))

    def enqueue_completion(self, job: CompletionJob | DriftJob) -> None:
        """Finish a listed revision in the one completion thread (started when there is work), so
        two large plans are never checked at once and the order given is the order done."""
        with self._jobs_lock:
            self._jobs.append(job)
            if self._completing:
                return
            self._completing = True
        self.call_from_thread(self.run_completions) if self._off_loop() else self.run_completions()

    def _off_loop(self) -> bool:
        return threading.get_ident() != self._thread_id

    @work(thread=True, group="complete", exit_on_error=False)
    def run_completions(self) -> None:
        worker = get_current_worker()
        while not worker.is_cancelled:
            with self._jobs_lock:
                if not self._jobs:
                    self._completing = False
                    return
                job = self._jobs.popleft()
            if isinstance(job, DriftJob):
                messages = prepare_drift(job)
            else:
                messages = complete(job, self.foreground.wait)
            for message in messages:
                self.post_message(message)

    def show_failure(self, words: str) -> None:
        """A failed worker of the app's own (a decision, a drift) is told on the screen in front."""
        screen = self.screen
        if isinstance(screen, ReportsWorkerFailures):
            screen.show_failure(words)

    def completion_job(self, proposal: Proposal, source: str) -> CompletionJob:
        """What the completion thread finishes for a listed revision: the analysis the screens read."""
        return CompletionJob(self.items[proposal.proposal_id].analysis(proposal.revision), source)

    def on_proposal_listed(self, message: ProposalListed) -> None:
        self.list_revision(message.proposal, message.origin, message.digest)

    def list_revision(self, proposal: Proposal, origin: str, digest: str | None) -> None:
        """A revision scanned from a file, or fetched from the queue (with the queue's digest)."""
        item = self.items.get(proposal.proposal_id)
        if item is None:
            item = self.items[proposal.proposal_id] = self.create_item(proposal.proposal_id)
        item.add(proposal, origin, digest)
        self.list_item(item)

    def on_proposal_verified(self, message: ProposalVerified) -> None:
        item = self.items[message.proposal_id]
        self.take_digest(item, message.revision, message.digest)
        item.verified.add(message.revision)
        self._refresh_open(item, message.revision)
        pair = {item.drift_base(item.latest_revision), item.latest_revision}
        if message.revision in pair and pair <= item.verified:
            # the second of the pair to be verified starts the comparison
            base = item.drift_base(item.latest_revision)
            if base is not None:
                self.compute_drift(item, base, item.latest_revision)

    def take_digest(self, item: QueueItem, revision: int, digest: str) -> None:
        """The digest computed from the plan: the demo's only record of it. Live, the queue's record
        stays the digest an approval names; a plan hashing otherwise is flagged and never approvable
        (`local_refusal`)."""
        if self.queue is None:
            item.digests[revision] = digest
            return
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

    def on_proposal_analysed(self, message: ProposalAnalysed) -> None:
        item = self.items[message.proposal_id]
        item.analysed.add(message.revision)
        self.list_item(item)
        self._refresh_open(item, message.revision)

    def on_proposal_refused(self, message: ProposalRefused) -> None:
        item = self.items[message.proposal_id]
        item.problems[message.revision] = message.broken.problem
        self.list_broken(message.broken)
        self.list_item(item)
        self._refresh_open(item, message.revision)

    def open_reviews(self, item: QueueItem) -> list[ReviewScreen]:
        """The review screens of `item` in the stack (none before one was ever opened).

        Asked of every file the loader finishes, while its thread may still be importing the review
        screens (`prepare_review_screens`): importing them here would hold the first frames on that
        import's lock. Until their module has defined the class, no review screen can be open."""
        review_screen = getattr(sys.modules.get("reviewer.tui.screens.review"), "ReviewScreen", None)
        if review_screen is None:
            return []
        stack = self.screen_stack
        return [screen for screen in stack if isinstance(screen, review_screen) and screen.item is item]

    def _refresh_open(self, item: QueueItem, revision: int) -> None:
        """Open review screens of this revision show what the background work has just finished."""
        for screen in self.open_reviews(item):
            if screen.revision == revision:
                with contextlib.suppress(NoMatches):  # a screen being dismissed has lost its widgets
                    screen.show_progress()

    @work(thread=True, group="drift", exit_on_error=False)
    def compute_drift(self, item: QueueItem, base: int, target: int) -> None:
        """The queue marks a re-plan that drifted; comparing two large revisions stays off the event
        loop. The worker only computes: the handler keeps the result."""
        self.post_message(DriftComputed(item.proposal_id, base, target, item.compare(base, target)))

    def on_drift_prepared(self, message: DriftPrepared) -> None:
        self.items[message.proposal_id].keep_prepared_drift(message.base, message.target, message.drift)

    def on_drift_computed(self, message: DriftComputed) -> None:
        item = self.items[message.proposal_id]
        item.keep_drift(message.base, message.target, message.drift)
        self.list_item(item)
        for screen in self.open_reviews(item):
            if screen.is_mounted:
                screen.announce_drift()

    def on_execution_loaded(self, message: ExecutionLoaded) -> None:
        """A real run; kept on its proposal's item, which may be listed before or after it."""
        record = message.record
        item = self.items.get(record.proposal_id)
        if item is None:
            item = self.items[record.proposal_id] = self.create_item(record.proposal_id)
        item.executions[record.revision] = record
        if item.revisions:
            self.list_item(item)

    def on_file_broken(self, message: FileBroken) -> None:
        self.list_broken(message.broken)

    def on_queue_screen_open_requested(self, message: QueueScreen.OpenRequested) -> None:
        item = self.items[message.proposal_id]
        if not item.revisions:  # listed from the queue's row: its plan is fetched, then opened
            self.open_first = message.proposal_id
            self.fetch_first(message.proposal_id)
            return
        self.push_screen(self.create_review_screen(item))
        if self.queue is not None:
            self.fetch_opened(message.proposal_id)

    def on_review_screen_decision_requested(self, message: ReviewScreen.DecisionRequested) -> None:
        self.send_decision(message)

    @work(group="decide", exit_on_error=False)
    async def send_decision(self, message: ReviewScreen.DecisionRequested) -> None:
        item, revision = message.item, message.revision
        outcome = await self.decider.decide(item, revision, message.digest, message.decision, message.reason)
        self.show_outcome(item, revision, outcome)

    def show_outcome(self, item: QueueItem, revision: int, outcome: DecisionOutcome) -> None:
        """The decider's answer on the review screen and as a notification. Live, a decided item takes
        the queue's answer, a 412 opens the new revision, and the queue is polled at once."""
        error = outcome.error
        shown_on = [screen for screen in self.open_reviews(item) if screen is self.screen]
        for screen in shown_on:
            screen.show_decision(outcome.message, error=error)
        # Over another screen (the reviewer moved on while it was sent) the toast names its proposal.
        words = outcome.message if shown_on else f"{shown(item.proposal_id, 128)}: {outcome.message}"
        self.notify(words, title="Decision", severity="error" if error else "information")
        if self.queue is None:
            return
        if outcome.answer:
            item.take_state(outcome.answer)
            self.list_item(item)
            self._refresh_open_reviews(item.proposal_id)
        if outcome.reopen_revision:
            self.reopen(item.proposal_id, outcome.message)
        self.poll_now()

    # --- live review: polling the queue ---

    async def on_unmount(self) -> None:
        self.foreground.close()
        if self._title_saved and self._driver is not None:
            self._driver.write(RESTORE_TITLE)  # the window's title before the pending count
        if self.queue is not None:
            await self.queue.aclose()

    def poll_now(self) -> None:
        """Cut the wait before the next poll short (after a decision, or from a test)."""
        self._wake.set()

    async def _pause(self, delay: float) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._wake.wait(), delay)
        self._wake.clear()

    @work(group="queue-poll", exit_on_error=False)
    async def watch_queue(self) -> None:
        """Poll, wait, poll again: the next poll is scheduled only once the last one has finished (at
        once after a long poll the queue held, `QueueSource.pause`)."""
        from reviewer.queue.messages import ProposalSummary
        from reviewer.queue.refusals import Forbidden, Unauthorized
        from reviewer.tui.model.queue_source import forbidden_words, problem_words, token_refused

        queue = self.queue
        assert queue is not None
        while True:
            delay = queue.poll_interval
            try:
                identity = await queue.connect()
                if identity is not None:
                    self.post_message(QueueConnected(identity))
                async for taken in queue.poll():
                    self.post_message(
                        QueueRowListed(taken)
                        if isinstance(taken, ProposalSummary)
                        else ProposalFetched(taken)
                    )
                self.post_message(QueueAnswered(queue.clock()))
                delay = queue.pause
            except Unauthorized:
                self.post_message(PollingStopped(token_refused(queue.login_hint)))
                return
            except Forbidden as error:
                self.post_message(PollingStopped(forbidden_words(error, queue.login_hint)))
                return
            except Exception as error:  # unreachable, 5xx, an unreadable answer: back off, never crash
                delay = queue.backoff.next_delay()
                self.post_message(QueueDown(queue.clock() + delay, problem_words(error)))
            else:
                queue.backoff.reset()
            await self._pause(delay)

    @work(group="first", exit_on_error=False)
    async def fetch_first(self, proposal_id: str) -> None:
        """The proposal `reviewer review ID` names, fetched at once rather than after the whole list:
        its review screen opens when it arrives (see `on_proposal_fetched`)."""
        from reviewer.queue.refusals import NotFound
        from reviewer.tui.model.queue_source import problem_words

        queue = self.queue
        assert queue is not None
        try:
            self.post_message(ProposalFetched(await queue.fetch(proposal_id)))
        except NotFound:
            self.open_first = None
            self.notify(f"the queue has no proposal {shown(proposal_id, 60)}", severity="error", timeout=30)
        except Exception as error:  # the poll fetches it again, and opens it then
            self.notify(
                f"could not fetch {shown(proposal_id, 60)}: {problem_words(error)}", severity="warning"
            )

    @work(group="opened", exit_on_error=False)
    async def fetch_opened(self, proposal_id: str) -> None:
        """What only an open proposal needs: the revision before the latest (drift) and the reports
        of its real runs (verification)."""
        from reviewer.tui.model.queue_source import problem_words

        queue = self.queue
        assert queue is not None
        try:
            fetched = await queue.fetch(proposal_id, previous=True)
            self.post_message(ProposalFetched(fetched))
            for report in await queue.fetch_executions(fetched.record):
                self.post_message(
                    FileBroken(report) if isinstance(report, BrokenFile) else ExecutionLoaded(report)
                )
        except Exception as error:  # the poll reports an unreachable queue; the screen stays usable
            self.notify(
                f"could not fetch the rest of {shown(proposal_id, 60)}: {problem_words(error)}",
                severity="warning",
            )

    @work(group="reopen", exit_on_error=False)
    async def reopen(self, proposal_id: str, notice: str) -> None:
        """Fetch the revision the agent re-planned to, then open it in place of the stale one."""
        from reviewer.tui.model.queue_source import problem_words

        queue = self.queue
        assert queue is not None
        try:
            fetched = await queue.fetch(proposal_id)
        except Exception as error:
            self.notify(f"could not fetch the new revision: {problem_words(error)}", severity="error")
            return
        self.post_message(ProposalFetched(fetched))
        self.post_message(OpenLatest(proposal_id, notice))

    def refresh_status(self) -> None:
        """Repaint the status line (a timer also calls it each second, so "N s ago" counts up)."""
        queue = self.queue
        # While the app shuts down the screen may be mounted with its widgets already gone.
        with contextlib.suppress(NoMatches):
            if queue is not None and self.queue_screen.is_mounted:
                self.queue_screen.show_status(status_text(self.link, queue.clock(), queue.queue_url))

    def on_queue_connected(self, message: QueueConnected) -> None:
        self.link.identity = message.identity
        self.queue_screen.who = self.who()
        if self.queue_screen.is_mounted:
            self.queue_screen.refresh_chrome()
        self.refresh_status()

    def on_queue_answered(self, message: QueueAnswered) -> None:
        self.pending_watch.first_poll_done = True
        self.link.answered_at = message.at
        self.link.retry_at = None
        self.refresh_status()

    def on_queue_down(self, message: QueueDown) -> None:
        self.link.retry_at = message.retry_at
        self.link.problem = message.problem
        self.refresh_status()

    def on_polling_stopped(self, message: PollingStopped) -> None:
        """The queue refused this reviewer: the status line, and the decision line of every open
        review (which said what the last decision sent), take the queue's words at once."""
        self.link.stopped = message.reason
        self.refresh_status()
        for item in self.items.values():
            for screen in self.open_reviews(item):
                screen.show_decision(message.reason, error=True)
        self.notify(message.reason, title="Queue", severity="error", timeout=30)

    def on_proposal_fetched(self, message: ProposalFetched) -> None:
        """The queue's record first, then each revision fetched (listed at once, checked in the
        completion thread), then the open screens refresh."""
        from reviewer.tui.model.queue_source import FROM_QUEUE

        fetched = message.fetched
        self.take_record(fetched.record)
        for broken in fetched.broken:
            self.list_broken(broken)
        proposal_id = fetched.record.proposal_id
        listed = []
        for proposal, digest in fetched.revisions:
            self.list_revision(proposal, FROM_QUEUE, digest)
            listed.append(self.completion_job(proposal, f"{proposal_id} revision {proposal.revision}"))
        if listed:
            self.enqueue_drift(self.items[proposal_id])
        for job in listed:
            self.enqueue_completion(job)
        self._refresh_open_reviews(proposal_id)
        latest = fetched.record.latest
        item = self.items.get(proposal_id)
        held = item.revisions.get(latest.revision) if item is not None else None
        self.tell_terminal(proposal_id, latest.revision, latest.state, held.title if held else None)
        if proposal_id == self.open_first and item is not None and item.revisions:
            self.open_first = None
            self.push_screen(self.create_review_screen(item))
            self.fetch_opened(proposal_id)  # what opening it from the list fetches: drift, real runs

    def on_queue_row_listed(self, message: QueueRowListed) -> None:
        """A proposal listed from the queue's row (its plan fetched when it is opened)."""
        row = message.row
        item = self.items.get(row.proposal_id)
        if item is None:
            item = self.items[row.proposal_id] = self.create_item(row.proposal_id)
        item.take_listing(row, self.link.identity)
        self.list_item(item)
        self.tell_terminal(row.proposal_id, row.revision, row.state, row.title)

    def tell_terminal(self, proposal_id: str, revision: int, state: str, title: str | None) -> None:
        """Ring, retitle the window and raise a desktop notification for a newly pending revision."""
        before = len(self.pending_watch.pending)
        ring = self.pending_watch.observe(proposal_id, revision, state)
        pending = len(self.pending_watch.pending)
        if not ring and pending == before:
            return
        title = title if self.pending_watch.first_poll_done else None
        written = alert_bytes(self.alerts, desktop_protocol(self.alerts), pending, ring, title)
        if self.alerts.title and not self._title_saved:
            written, self._title_saved = SAVE_TITLE + written, True
        if written and self._driver is not None:
            self._driver.write(written)

    def take_record(self, record: ProposalRecord) -> None:
        item = self.items.get(record.proposal_id)
        if item is None:
            item = self.items[record.proposal_id] = self.create_item(record.proposal_id)
        executed_before = {event.revision for event in item.history if event.event == "executed"}
        item.apply(record, self.link.identity)
        if item.revisions:
            self.list_item(item)
        executed = {event.revision for event in item.history if event.event == "executed"}
        if executed - executed_before and self.open_reviews(item):
            self.fetch_opened(item.proposal_id)

    def _refresh_open_reviews(self, proposal_id: str) -> None:
        item = self.items.get(proposal_id)
        for screen in self.open_reviews(item) if item is not None else []:
            screen.refresh_live()

    def on_open_latest(self, message: OpenLatest) -> None:
        from reviewer.tui.screens.review import ReviewScreen

        item = self.items.get(message.proposal_id)
        screen = self.screen
        if item is None or not isinstance(screen, ReviewScreen) or screen.item is not item:
            return  # the reviewer moved on: the queue screen marks the new revision
        if screen.revision != item.latest_revision:
            self.switch_screen(self.create_review_screen(item, notice=message.notice))

    def notify(
        self,
        message: str,
        *,
        title: str = "",
        severity: SeverityLevel = "information",
        timeout: float | None = None,
        markup: bool = True,
    ) -> None:
        """Notifications are plain text: they may quote a proposal or the queue's answer, so they are
        sanitized and never parsed as markup, whatever the caller asks (`markup` is ignored)."""
        super().notify(
            safe_text(message, multiline=True),
            title=safe_text(title),
            severity=severity,
            timeout=timeout,
            markup=False,
        )

    def help_sections(self) -> list[HelpSection]:
        """The keys of every screen, read from their bindings, so the help cannot fall behind them."""
        from reviewer.tui.screens.dialogs import (
            ConfirmScreen,
            DecisionDialog,
            RejectScreen,
            RequestChangesScreen,
            help_rows,
            key_words,
        )
        from reviewer.tui.screens.drift import DriftScreen
        from reviewer.tui.screens.review import ReviewScreen
        from reviewer.tui.screens.verification import VerificationScreen
        from reviewer.tui.widgets.plan_view import PlanView

        display = key_words
        focus = [
            Binding("tab", "focus_next", "Next pane (scrolls the selected call's detail)"),
            Binding("shift+tab", "focus_previous", "Previous pane"),
        ]
        return [
            ("Queue", help_rows(QueueScreen.BINDINGS, display)),
            ("Review", help_rows([*PlanView.BINDINGS, *ReviewScreen.BINDINGS, *focus], display)),
            ("Drift", help_rows([*DriftScreen.BINDINGS, *focus], display)),
            ("Verification", help_rows([*VerificationScreen.BINDINGS, *focus], display)),
            ("Everywhere", help_rows(self.BINDINGS, display)),
            (
                "Confirmation",
                help_rows(
                    [
                        *ConfirmScreen.BINDINGS,
                        *RejectScreen.BINDINGS,
                        *RequestChangesScreen.BINDINGS,
                        *DecisionDialog.BINDINGS,
                    ],
                    display,
                ),
            ),
        ]

    def action_help_quit(self) -> None:
        """Ctrl+C does not quit (Textual keeps it for copying): say which key does, in plain words,
        since notifications here are never markup."""
        self.notify("Press q to quit the app", title="Do you want to quit?")

    def action_help(self) -> None:
        from reviewer.tui.screens.dialogs import HelpScreen

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections()))
