"""The messages the app's workers post: what was loaded, checked, analysed, fetched or found broken.

Dataclasses, as Textual's own widgets write theirs: a worker returns its result in one of these, and
only the app's handler touches the screens.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from textual.message import Message

from reviewer.tui.model.sources import BrokenFile, ExecutionRecord

if TYPE_CHECKING:
    from reviewer.plan.proposal import Proposal
    from reviewer.queue.messages import ProposalSummary, Whoami
    from reviewer.reading.drift import Drift
    from reviewer.tui.model.queue_source import Fetched


@dataclass
class ProposalListed(Message):
    """A revision scanned (header, call count, cost bound): listed, and readable row by row. Its
    analysis is made when first read (`QueueItem.analysis`): not on the way to the first frame."""

    proposal: Proposal
    origin: str
    digest: str | None = None
    """The queue's digest, live; the demo knows it only once computed (`ProposalVerified`)."""


@dataclass
class ProposalVerified(Message):
    """Every call of a revision checked and its digest computed here: it may now be approved."""

    proposal_id: str
    revision: int
    digest: str


@dataclass
class ProposalAnalysed(Message):
    """A revision's whole-plan figures are computed: panes, alarms and the queue's counts can show."""

    proposal_id: str
    revision: int


@dataclass
class ProposalRefused(Message):
    """A listed revision that failed its checks (or its analysis): broken, never approvable."""

    proposal_id: str
    revision: int
    broken: BrokenFile


@dataclass
class ScanDone(Message):
    """The loader has listed every file; what remains to finish, smallest file first: each revision
    listed, with the file it came from."""

    listed: list[tuple[Proposal, str]]


@dataclass
class DriftPrepared(Message):
    """A re-plan compared with its base from the scans, before the checks: for the drift view."""

    proposal_id: str
    base: int
    target: int
    drift: Drift


@dataclass
class DriftComputed(Message):
    """A re-plan compared with its base in the drift worker, for the handler to keep and show."""

    proposal_id: str
    base: int
    target: int
    drift: Drift


@dataclass
class QueueConnected(Message):
    """The queue said who the token belongs to: the chrome and the status line name them."""

    identity: Whoami


@dataclass
class QueueAnswered(Message):
    """A poll finished; `at` is the source's clock, so the status line counts from it."""

    at: float


@dataclass
class QueueDown(Message):
    """A poll failed: the next one is at `retry_at` (the source's clock)."""

    retry_at: float
    problem: str


@dataclass
class PollingStopped(Message):
    """Polling ended for good (a refused token): only the reviewer can fix it."""

    reason: str


@dataclass
class QueueRowListed(Message):
    """A proposal as the queue's list row tells it, before any of its revisions is fetched."""

    row: ProposalSummary


@dataclass
class ProposalFetched(Message):
    """A proposal as the queue holds it: its record, and the revisions fetched with it."""

    fetched: Fetched


@dataclass
class OpenLatest(Message):
    """The revision a 412 named has arrived: open it in place of the stale one."""

    proposal_id: str
    notice: str


@dataclass
class ExecutionLoaded(Message):
    """A real run (a demo file, or the queue's report): kept on its proposal for `v`."""

    record: ExecutionRecord


@dataclass
class FileBroken(Message):
    """A file (or a revision the queue served) that cannot be listed, with the reason."""

    broken: BrokenFile
