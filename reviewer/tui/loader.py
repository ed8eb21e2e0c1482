"""The loader's work after a revision is listed: its checks and digest, then its whole-plan figures.

Runs in the loader's thread, one revision at a time, and yields the messages that finish it in the
order a reviewer can use them.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from textual.message import Message

from reviewer.plan.proposal import Proposal, ProposalError, check_calls, plan_sha256
from reviewer.tui.messages import ProposalAnalysed, ProposalRefused, ProposalVerified
from reviewer.tui.model.sources import BrokenFile

if TYPE_CHECKING:
    from reviewer.reading.analysis import Analysis


def compute_figures(analysis: Analysis) -> None:
    """The whole-plan figures every pane reads, computed once: about a second for 100,000 calls, so
    only ever in the loader's thread."""
    _ = analysis.ratios, analysis.extremes, analysis.alarms


@dataclass
class CompletionJob:
    """What the loader's thread finishes after listing: checks, digest, then analysis."""

    analysis: Analysis
    source: str


def complete(job: CompletionJob) -> Iterator[Message]:
    """The messages that finish a listed revision, in the order the reviewer can use them: first
    whether it may be approved (checks and digest), then the figures."""
    proposal = job.analysis.proposal
    key = (proposal.proposal_id, proposal.revision)
    try:
        check_calls(proposal, job.source)
        digest = plan_sha256(proposal)
    except ProposalError as error:
        yield ProposalRefused(*key, BrokenFile(job.source, error.problem))
        return
    yield ProposalVerified(*key, digest)
    try:
        compute_figures(job.analysis)
    except Exception as error:  # a bug in analysis must not stop the other files
        problem = f"could not be analysed ({type(error).__name__}: {error})"
        yield ProposalRefused(*key, BrokenFile(job.source, problem))
        return
    yield ProposalAnalysed(*key)


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
