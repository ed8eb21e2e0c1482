"""The loader's work: listing a folder's files from their scans, then, for each revision listed, its
checks and digest, then its whole-plan figures.

The first files are listed before the first frame; the rest, and the completions, run in the
loader's threads and yield their messages in the order a reviewer can use them.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from textual.message import Message

from reviewer.plan.proposal import Pause, Proposal, ProposalError, check_calls, plan_sha256
from reviewer.tui.messages import (
    DriftPrepared,
    ExecutionLoaded,
    FileBroken,
    ProposalAnalysed,
    ProposalListed,
    ProposalRefused,
    ProposalVerified,
    ScanDone,
)
from reviewer.tui.model.sources import BrokenFile, ExecutionRecord, QueueItem, completion_order, scan_files

if TYPE_CHECKING:
    from reviewer.reading.analysis import Analysis


FIRST_FRAME_BYTES: Final = 4_000_000
"""Bytes of files scanned before the first frame (about 10 ms): the bundled samples, and any folder
of ordinary plans, are on screen in the first frame; the files after those are listed from the
loader's thread, so a large file never delays the first paint."""


def compute_figures(analysis: Analysis, pause: Pause) -> None:
    """The whole-plan figures every pane reads, computed once: about a second for 100,000 calls, so
    only ever in the loader's thread, pausing before each."""
    for figure in ("ratios", "extremes", "alarms", "totals"):
        pause()
        getattr(analysis, figure)


@dataclass
class CompletionJob:
    """What the loader's thread finishes after listing: checks, digest, then analysis."""

    analysis: Analysis
    source: str


@dataclass
class DriftJob:
    """A re-plan to compare with its base before any check runs: the drift view is what a reviewer
    opens next, and 100,000 calls compare in about 0.1 s where their checks take seconds."""

    item: QueueItem
    base: int
    target: int


def prepare_drift(job: DriftJob) -> Iterator[Message]:
    try:
        drift = job.item.compare(job.base, job.target)
    except Exception:  # the drift view compares again, and says what failed; the checks go on
        return
    yield DriftPrepared(job.item.proposal_id, job.base, job.target, drift)


def complete(job: CompletionJob, pause: Pause) -> Iterator[Message]:
    """The messages that finish a listed revision, in the order the reviewer can use them: first
    whether it may be approved (checks and digest), then the figures. `pause` is called every few
    milliseconds of work (`Foreground.wait`)."""
    proposal = job.analysis.proposal
    key = (proposal.proposal_id, proposal.revision)
    try:
        check_calls(proposal, job.source, pause)
        digest = plan_sha256(proposal, pause)
    except ProposalError as error:
        yield ProposalRefused(*key, BrokenFile(job.source, error.problem))
        return
    yield ProposalVerified(*key, digest)
    try:
        compute_figures(job.analysis, pause)
    except Exception as error:  # a bug in analysis must not stop the other files
        problem = f"could not be analysed ({type(error).__name__}: {error})"
        yield ProposalRefused(*key, BrokenFile(job.source, problem))
        return
    yield ProposalAnalysed(*key)


def first_frame_files(paths: list[Path]) -> tuple[list[Path], list[Path]]:
    """The leading files, in the order given, whose bytes together fit `FIRST_FRAME_BYTES`, and the
    rest."""
    total = 0
    for index, path in enumerate(paths):
        with contextlib.suppress(OSError):  # its scan says what is wrong with it
            total += path.stat().st_size
        if total > FIRST_FRAME_BYTES:
            return paths[:index], paths[index:]
    return paths, []


class Listing:
    """The messages that list a folder's files, in name order, from their scans; what is listed is
    remembered, so a second file of the same revision is refused and the checks can follow
    (`done`). Fed in two parts: the files before the first frame, then the rest from a thread."""

    def __init__(self) -> None:
        self._listed_from: dict[tuple[str, int], str] = {}
        self._scanned: list[tuple[Path, Proposal]] = []

    def messages(self, paths: list[Path]) -> Iterator[Message]:
        for path, loaded in scan_files(paths):
            if isinstance(loaded, Proposal):
                loaded = listed_once(loaded, path, self._listed_from)
            if isinstance(loaded, BrokenFile):
                yield FileBroken(loaded)
            elif isinstance(loaded, ExecutionRecord):
                yield ExecutionLoaded(loaded)
            else:
                self._scanned.append((path, loaded))
                yield ProposalListed(loaded, path.name)

    def done(self) -> ScanDone:
        """Every file listed: the revisions to check, smallest file first."""
        ordered = completion_order(self._scanned)
        return ScanDone([(proposal, path.name) for path, proposal in ordered])


def listed_once(
    proposal: Proposal, path: Path, listed_from: dict[tuple[str, int], str]
) -> Proposal | BrokenFile:
    """The first file of a proposal's revision is the one listed; another with the same id and
    revision is a broken file, never a silent replacement of what is on screen. It is checked whole
    first (a rare case), so the reason given is what is wrong with it when something is."""
    key = (proposal.proposal_id, proposal.revision)
    first = listed_from.setdefault(key, path.name)
    if first == path.name:
        return proposal
    try:
        check_calls(proposal, path.name)
    except ProposalError as error:
        return BrokenFile(path.name, error.problem)
    return BrokenFile(
        path.name, f"revision {proposal.revision} of {proposal.proposal_id} is already listed from {first}"
    )
