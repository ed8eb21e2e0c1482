"""ReviewerApp: the screens, the keys every screen shares, and the worker that loads proposals."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.filter import LineFilter
from textual.message import Message
from textual.notifications import SeverityLevel

from reviewer.analysis import Analysis
from reviewer.proposal import Proposal, plan_sha256
from reviewer.sanitize import safe_text
from reviewer.sources import (
    BrokenFile,
    Decider,
    DecisionOutcome,
    DemoDecider,
    ExecutionRecord,
    QueueItem,
    SourceError,
    load_folder,
)
from reviewer.tui.failures import ReportsWorkerFailures
from reviewer.tui.palette import COLOR_SYSTEMS, THEME, rich_theme, terminal_filters
from reviewer.tui.screens.dialogs import (
    ConfirmScreen,
    HelpScreen,
    HelpSection,
    RejectScreen,
    help_rows,
    key_words,
)
from reviewer.tui.screens.queue import QueueScreen
from reviewer.tui.screens.review import ReviewScreen


def analysed(proposal: Proposal) -> tuple[Analysis, str]:
    """The analysis with its panes' figures computed, and the plan digest: run it in a thread, since a
    100,000-call plan takes about a second and the event loop must keep answering keys."""
    analysis = Analysis(proposal)
    _ = analysis.ratios, analysis.extremes, analysis.alarms
    return analysis, plan_sha256(proposal)


class ProposalLoaded(Message):
    def __init__(self, analysis: Analysis, digest: str, origin: str) -> None:
        super().__init__()
        self.analysis = analysis
        self.digest = digest
        self.origin = origin


class ExecutionLoaded(Message):
    def __init__(self, record: ExecutionRecord) -> None:
        super().__init__()
        self.record = record


class FileBroken(Message):
    def __init__(self, broken: BrokenFile) -> None:
        super().__init__()
        self.broken = broken


class ReviewerApp(ReportsWorkerFailures, App[None]):
    """The review app. `reviewer demo` feeds it a folder of files and a decider that sends nothing."""

    CSS_PATH = Path(__file__).parent / "reviewer.tcss"
    TITLE = "reviewer"
    ENABLE_COMMAND_PALETTE = False
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        folder: Path | None = None,
        *,
        decider: Decider | None = None,
        mode: str = "demo",
        color_system: str | None = None,
    ) -> None:
        """`folder` feeds the demo; live review (a subclass) leaves it out and polls the queue.
        `color_system` ("standard", "256", "truecolor") overrides what the terminal was detected to
        have (TEXTUAL_COLOR_SYSTEM); tests pass it to see the screen in 16 colours."""
        super().__init__()
        self.register_theme(THEME)
        self.theme = THEME.name
        self.console.push_theme(rich_theme(self.no_color))
        self.color_system = color_system
        self._terminal_filters: list[LineFilter] | None = None
        self.folder = folder
        self.decider: Decider = decider or DemoDecider()
        self.mode = mode
        self.items: dict[str, QueueItem] = {}
        self.queue_screen = self.create_queue_screen()

    def create_queue_screen(self) -> QueueScreen:
        """The first screen; live review extends it with the queue's own columns."""
        return QueueScreen(self.mode)

    def create_item(self, proposal_id: str) -> QueueItem:
        """A new proposal's holder; in the demo its state column says "demo"."""
        return QueueItem(proposal_id, self.mode)

    def create_review_screen(self, item: QueueItem) -> ReviewScreen:
        return ReviewScreen(item, mode=self.mode)

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

    def on_mount(self) -> None:
        self.push_screen(self.queue_screen)
        if self.folder is not None:
            # Paint first, then load: parsing would otherwise hold the GIL during the first frame.
            self.call_after_refresh(self.load_proposals, self.folder)

    @work(thread=True, group="load", exit_on_error=False)
    def load_proposals(self, folder: Path) -> None:
        """Parse and analyse each file off the event loop: a 100,000-call plan takes about a second,
        and the reviewer can read the small ones meanwhile."""
        try:
            for path, loaded in load_folder(folder):
                if isinstance(loaded, BrokenFile):
                    self.post_message(FileBroken(loaded))
                    continue
                if isinstance(loaded, ExecutionRecord):
                    self.post_message(ExecutionLoaded(loaded))
                    continue
                try:
                    analysis, digest = analysed(loaded)
                except Exception as error:  # a bug in analysis must not stop the other files
                    problem = f"could not be analysed ({type(error).__name__}: {error})"
                    self.post_message(FileBroken(BrokenFile(path.name, problem)))
                    continue
                self.post_message(ProposalLoaded(analysis, digest, path.name))
        except SourceError as error:
            self.post_message(FileBroken(BrokenFile(str(folder), str(error))))

    def show_failure(self, words: str) -> None:
        """A failed worker of the app's own (a decision, a drift) is told on the screen in front."""
        screen = self.screen
        if isinstance(screen, ReportsWorkerFailures):
            screen.show_failure(words)

    def on_proposal_loaded(self, message: ProposalLoaded) -> None:
        proposal = message.analysis.proposal
        item = self.items.get(proposal.proposal_id)
        if item is None:
            item = self.items[proposal.proposal_id] = self.create_item(proposal.proposal_id)
        item.add(proposal, message.digest, message.origin, message.analysis)
        self.queue_screen.show_item(item)
        if len(item.revisions) > 1:
            self.compute_drift(item)

    @work(thread=True, group="drift", exit_on_error=False)
    def compute_drift(self, item: QueueItem) -> None:
        """The queue marks a re-plan that drifted; comparing two large revisions stays off the event loop."""
        item.compute_latest_drift()
        self.call_from_thread(self.drift_known, item)

    def drift_known(self, item: QueueItem) -> None:
        self.queue_screen.show_item(item)
        for screen in self.screen_stack:
            if isinstance(screen, ReviewScreen) and screen.item is item and screen.is_mounted:
                screen.announce_drift()

    def on_execution_loaded(self, message: ExecutionLoaded) -> None:
        """A real run; kept on its proposal's item, which may be listed before or after it."""
        record = message.record
        item = self.items.get(record.proposal_id)
        if item is None:
            item = self.items[record.proposal_id] = self.create_item(record.proposal_id)
        item.executions[record.revision] = record
        if item.revisions:
            self.queue_screen.show_item(item)

    def on_file_broken(self, message: FileBroken) -> None:
        self.queue_screen.show_broken(message.broken)

    def on_queue_screen_open_requested(self, message: QueueScreen.OpenRequested) -> None:
        self.push_screen(self.create_review_screen(self.items[message.proposal_id]))

    def on_review_screen_decision_requested(self, message: ReviewScreen.DecisionRequested) -> None:
        self.send_decision(message)

    @work(group="decide", exit_on_error=False)
    async def send_decision(self, message: ReviewScreen.DecisionRequested) -> None:
        item, revision = message.item, message.revision
        outcome = await self.decider.decide(
            item, revision, item.digests[revision], message.decision, message.reason
        )
        self.show_outcome(item, revision, outcome)

    def show_outcome(
        self, item: QueueItem, revision: int, outcome: DecisionOutcome, *, error: bool = False
    ) -> None:
        """The decider's answer on the review screen and as a notification; live review adds more."""
        if isinstance(self.screen, ReviewScreen):
            self.screen.show_decision(outcome.message, error=error)
        self.notify(outcome.message, title="Decision", severity="error" if error else "information")

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
        from reviewer.tui.screens.drift import DriftScreen
        from reviewer.tui.screens.verification import VerificationScreen
        from reviewer.tui.widgets.plan_view import PlanView

        display = key_words
        focus = [
            Binding("tab", "focus_next", "next pane (scrolls the selected call's detail)"),
            Binding("shift+tab", "focus_previous", "previous pane"),
        ]
        return [
            ("Queue", help_rows([*QueueScreen.BINDINGS, *focus[1:]], display)),
            ("Review", help_rows([*PlanView.BINDINGS, *ReviewScreen.BINDINGS, *focus], display)),
            ("Drift", help_rows([*DriftScreen.BINDINGS, *focus], display)),
            ("Verification", help_rows([*VerificationScreen.BINDINGS, *focus], display)),
            ("Everywhere", help_rows(self.BINDINGS, display)),
            ("Confirmation", help_rows([*ConfirmScreen.BINDINGS, *RejectScreen.BINDINGS], display)),
        ]

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen(self.help_sections()))
