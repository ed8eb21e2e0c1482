"""ReviewerApp: the screens, the keys every screen shares, and the worker that loads proposals."""

from __future__ import annotations

from pathlib import Path
from typing import ClassVar

from textual import work
from textual.app import App
from textual.binding import Binding, BindingType
from textual.message import Message

from reviewer.analysis import Analysis
from reviewer.proposal import plan_sha256
from reviewer.sources import BrokenFile, Decider, DemoDecider, QueueItem, SourceError, load_folder
from reviewer.tui.screens.dialogs import HelpScreen
from reviewer.tui.screens.queue import QueueScreen
from reviewer.tui.screens.review import ReviewScreen


class ProposalLoaded(Message):
    def __init__(self, analysis: Analysis, digest: str, origin: str) -> None:
        super().__init__()
        self.analysis = analysis
        self.digest = digest
        self.origin = origin


class FileBroken(Message):
    def __init__(self, broken: BrokenFile) -> None:
        super().__init__()
        self.broken = broken


class ReviewerApp(App[None]):
    """The review app. `reviewer demo` feeds it a folder of files and a decider that sends nothing."""

    CSS_PATH = Path(__file__).parent / "reviewer.tcss"
    TITLE = "reviewer"
    ENABLE_COMMAND_PALETTE = False
    HORIZONTAL_BREAKPOINTS: ClassVar[list[tuple[int, str]]] = [(0, "-narrow"), (90, "-wide")]
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("question_mark", "help", "Help"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self, folder: Path | None = None, *, decider: Decider | None = None, mode: str = "demo"
    ) -> None:
        """`folder` feeds the demo; live review (a subclass) leaves it out and polls the queue."""
        super().__init__()
        self.folder = folder
        self.decider: Decider = decider or DemoDecider()
        self.mode = mode
        self.items: dict[str, QueueItem] = {}
        self.queue_screen = QueueScreen(mode)

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
                analysis = Analysis(loaded)
                _ = analysis.ratios, analysis.extremes, analysis.alarms
                self.post_message(ProposalLoaded(analysis, plan_sha256(loaded), path.name))
        except SourceError as error:
            self.post_message(FileBroken(BrokenFile(str(folder), str(error))))

    def on_proposal_loaded(self, message: ProposalLoaded) -> None:
        proposal = message.analysis.proposal
        item = self.items.setdefault(proposal.proposal_id, QueueItem(proposal.proposal_id, self.mode))
        item.add(proposal, message.digest, message.origin, message.analysis)
        self.queue_screen.show_item(item)

    def on_file_broken(self, message: FileBroken) -> None:
        self.queue_screen.show_broken(message.broken)

    def on_queue_screen_open_requested(self, message: QueueScreen.OpenRequested) -> None:
        self.push_screen(ReviewScreen(self.items[message.proposal_id], mode=self.mode))

    def on_review_screen_decision_requested(self, message: ReviewScreen.DecisionRequested) -> None:
        self.send_decision(message)

    @work(group="decide", exit_on_error=False)
    async def send_decision(self, message: ReviewScreen.DecisionRequested) -> None:
        item, revision = message.item, message.revision
        outcome = await self.decider.decide(
            item, revision, item.digests[revision], message.decision, message.reason
        )
        if isinstance(self.screen, ReviewScreen):
            self.screen.show_decision(outcome.message)
        self.notify(outcome.message, title="Decision")

    def action_help(self) -> None:
        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen())
