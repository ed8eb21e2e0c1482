"""Where proposals come from: a folder of files for `reviewer demo` (the queue client serves live review).

A source hands the app `QueueItem`s: one per proposal, holding every revision it knows of, so the
screens never care whether a proposal came from a file or from the queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

import msgspec

from reviewer.analysis import Analysis
from reviewer.proposal import (
    MAX_BODY_BYTES,
    Call,
    Proposal,
    ProposalError,
    field_message,
    parse_proposal,
)

BUNDLED_SAMPLES = Path(__file__).resolve().parent / "sample_proposals"
"""The samples ship inside the package (a link to the project's `sample_proposals/` in a checkout)."""


if TYPE_CHECKING:  # imported where used: the demo's first paint should not wait for them
    from reviewer.api import StoredExecution
    from reviewer.drift import Drift

class SourceError(Exception):
    """A source that cannot be read at all (as opposed to one broken file among good ones)."""


class ExecutionRecord(msgspec.Struct, forbid_unknown_fields=True):
    """A real run as the executor reported it: the calls it sent, their answers, the audit lines.

    On disk (`*.execution.json` beside the proposals, for the demo) it carries `format`
    `reviewer.execution/v1` and the proposal it ran.
    """

    proposal_id: str
    revision: int
    plan_sha256: str
    calls: list[Call]
    format: Literal["reviewer.execution/v1"] = "reviewer.execution/v1"
    audit_log: list[dict[str, Any]] | None = None
    executed_by: str | None = None
    note: str | None = None


_execution_decoder = msgspec.json.Decoder(ExecutionRecord)


def execution_from_queue(proposal_id: str, stored: StoredExecution) -> ExecutionRecord:
    """The queue's stored report as the record the verification view reads; the calls are checked
    against the proposal format, since the agent wrote them."""
    try:
        calls = msgspec.convert(stored.calls, list[Call])
    except msgspec.ValidationError as error:
        raise ProposalError(f"{proposal_id} execution", field_message(str(error), "$.calls")) from None
    return ExecutionRecord(
        proposal_id=proposal_id,
        revision=stored.revision,
        plan_sha256=stored.plan_sha256,
        calls=calls,
        audit_log=stored.audit_log,
        executed_by=stored.executed_by,
        note=stored.note,
    )
EXECUTION_SUFFIX = ".execution.json"


@dataclass
class QueueItem:
    """One proposal as the queue screen lists it: its revisions, their analyses, and its state."""

    proposal_id: str
    state: str
    revisions: dict[int, Proposal] = field(default_factory=dict)
    digests: dict[int, str] = field(default_factory=dict)
    """Each revision's plan_sha256: the queue's record live, computed from the file in the demo."""
    origins: dict[int, str] = field(default_factory=dict)
    """Where each revision came from (a file name, or the queue), for the reviewer's orientation."""
    executions: dict[int, ExecutionRecord] = field(default_factory=dict)
    """The real runs the queue (or a demo file) holds, by the revision they executed."""
    seen_revision: int | None = None
    """The revision the reviewer last opened: drift is shown against it when a newer one arrives."""
    _analyses: dict[int, Analysis] = field(default_factory=dict, repr=False)
    _drifts: dict[tuple[int, int], Drift] = field(default_factory=dict, repr=False)

    @property
    def latest_revision(self) -> int:
        return max(tuple(self.revisions))

    @property
    def latest(self) -> Proposal:
        return self.revisions[self.latest_revision]

    def analysis(self, revision: int | None = None) -> Analysis:
        number = self.latest_revision if revision is None else revision
        if number not in self._analyses:
            self._analyses[number] = Analysis(self.revisions[number])
        return self._analyses[number]

    def drift_base(self, revision: int) -> int | None:
        """What to compare `revision` with: the revision last seen if older, else the one before it."""
        if self.seen_revision is not None and self.seen_revision < revision:
            return self.seen_revision
        # A copy first: the drift worker reads this while the event loop may add a revision.
        older = [number for number in tuple(self.revisions) if number < revision]
        return max(older) if older else None

    def drift(self, old: int, new: int) -> Drift:
        if (old, new) not in self._drifts:
            from reviewer.drift import diff_revisions

            self._drifts[old, new] = diff_revisions(self.revisions[old], self.revisions[new])
        return self._drifts[old, new]

    def compute_latest_drift(self) -> None:
        """Compare the latest revision with its base (about 0.1 s for 100,000 calls: run it in a worker)."""
        base = self.drift_base(self.latest_revision)
        if base is not None:
            self.drift(base, self.latest_revision)

    def latest_drift(self) -> tuple[int, Drift] | None:
        """The latest revision's drift from its base, once computed and when it is not empty."""
        base = self.drift_base(self.latest_revision)
        if base is None:
            return None
        drift = self._drifts.get((base, self.latest_revision))
        if drift is None or drift.is_empty:
            return None
        return base, drift

    def add(self, proposal: Proposal, digest: str, origin: str, analysis: Analysis | None = None) -> None:
        self.revisions[proposal.revision] = proposal
        if analysis is not None:
            self._analyses[proposal.revision] = analysis
        self.digests[proposal.revision] = digest
        self.origins[proposal.revision] = origin


@dataclass(frozen=True)
class BrokenFile:
    """A file that is not a valid proposal, listed with the reason so the others still load."""

    name: str
    problem: str


def _read_limited(path: Path) -> bytes:
    """A file's bytes, size-checked before it is read whole."""
    try:
        size = path.stat().st_size
        if size > MAX_BODY_BYTES:
            raise ProposalError(path.name, f"is {size:,} bytes; at most {MAX_BODY_BYTES:,} are read")
        return path.read_bytes()
    except OSError as error:
        raise ProposalError(path.name, f"cannot be read ({error.strerror or error})") from None


def read_proposal_file(path: Path) -> Proposal:
    return parse_proposal(_read_limited(path), path.name)


def proposal_files(folder: Path) -> list[Path]:
    """The `.json` files of a folder in name order; a single file stands for itself."""
    if folder.is_file():
        return [folder]
    if not folder.is_dir():
        raise SourceError(f"{folder} is neither a proposal file nor a folder of them")
    return sorted(path for path in folder.iterdir() if path.suffix == ".json" and path.is_file())


def read_execution_file(path: Path) -> ExecutionRecord:
    data = _read_limited(path)
    try:
        return _execution_decoder.decode(data)
    except msgspec.ValidationError as error:
        raise ProposalError(path.name, field_message(str(error))) from None
    except (msgspec.DecodeError, RecursionError) as error:
        raise ProposalError(path.name, f"is not a valid execution record ({error})") from None


def load_folder(folder: Path) -> Iterator[tuple[Path, Proposal | ExecutionRecord | BrokenFile]]:
    """Each file of `folder` in name order (proposals, and `*.execution.json` real runs), parsed or
    with the reason it could not be."""
    for path in proposal_files(folder):
        try:
            if path.name.endswith(EXECUTION_SUFFIX):
                yield path, read_execution_file(path)
            else:
                yield path, read_proposal_file(path)
        except ProposalError as error:
            yield path, BrokenFile(path.name, error.problem)


@dataclass(frozen=True)
class DecisionOutcome:
    """What happened to a decision, in words the reviewer reads on screen."""

    sent: bool
    message: str
    state: str | None = None


class Decider(Protocol):
    """Where approvals and rejections go: the queue, or nowhere in the demo."""

    async def decide(
        self, item: QueueItem, revision: int, plan_sha256: str, decision: str, reason: str
    ) -> DecisionOutcome: ...


class DemoDecider:
    """The demo sends nothing: it says so, so nobody mistakes a demo approval for a real one."""

    async def decide(
        self, item: QueueItem, revision: int, plan_sha256: str, decision: str, reason: str
    ) -> DecisionOutcome:
        verb = "approval" if decision == "approve" else "rejection"
        return DecisionOutcome(False, f"{verb} of revision {revision}: not sent (demo)")
