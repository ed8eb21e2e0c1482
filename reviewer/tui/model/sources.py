"""Where proposals come from: a folder of files for `reviewer demo` (`reviewer.tui.model.queue_source` serves
live review), and the `QueueItem` both fill.

A source hands the app `QueueItem`s: one per proposal, holding every revision it knows of and, live,
the queue's record of it (empty in the demo), so the screens never care whether a proposal came from
a file or from the queue.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeVar

import msgspec

from reviewer.plan.proposal import (
    MAX_BODY_BYTES,
    Call,
    Proposal,
    ProposalError,
    field_message,
    parse_proposal,
    scan_proposal,
)
from reviewer.plan.sanitize import clip, safe_text

BUNDLED_SAMPLES = Path(__file__).resolve().parents[2] / "sample_proposals"
"""The samples ship inside the package (a link to the project's `sample_proposals/` in a checkout)."""


if TYPE_CHECKING:  # imported where used: the demo's first paint should not wait for them
    from datetime import datetime

    from reviewer.queue.messages import (
        DecisionSignature,
        DecisionState,
        ExecutorRefusal,
        PolicyState,
        ProposalRecord,
        ProposalSummary,
        StoredExecution,
        TrailEvent,
        Whoami,
        WindowState,
    )
    from reviewer.reading.analysis import Analysis
    from reviewer.reading.drift import Drift

Loaded = TypeVar("Loaded")


def shown(name: str | None, limit: int = 60) -> str:
    """A name from the queue's record (a token's name), made safe to put in a sentence."""
    return safe_text(clip(name or "?", limit))


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
    audit: dict[str, Any] | None = None
    """The run against the audit source its runner read (`reviewer.queue.messages.AuditVerification`),
    checked against that shape where it is shown."""


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
        audit=dict(stored.audit) if stored.audit is not None else None,
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
    verified: set[int] = field(default_factory=set)
    """Revisions whose every call has been checked and whose digest was computed from the plan here:
    only these can be approved. A revision is listed (and can be read) before, from a cheap scan."""
    analysed: set[int] = field(default_factory=set)
    """Revisions whose whole-plan figures (ratios, extremes, alarms) are computed: until then no
    screen reads them, since computing them on the event loop would freeze it."""
    problems: dict[int, str] = field(default_factory=dict)
    """Revisions that were listed from the scan and then refused by the checks, with the reason."""
    # The queue's record (live review): in the demo these stay empty, and the screens show nothing of them.
    proposed_by: str = ""
    decided_by: str | None = None
    claimed_by: str | None = None
    outcome_unknown: bool = False
    """A run claimed the approval and has not reported by the end of its lease: it may have written."""
    refusals: list[ExecutorRefusal] = field(default_factory=list)
    """Executors that refused the latest revision's approval before claiming it (their words untrusted)."""
    reason: str | None = None
    expires_at: datetime | None = None
    history: list[TrailEvent] = field(default_factory=list)
    mine: bool = False
    """The signed-in reviewer submitted it: the app will not approve it."""
    local_digests: dict[int, str] = field(default_factory=dict)
    """Revisions whose fetched plan hashes to something else than the queue's digest: never approvable."""
    approvals: list[str] = field(default_factory=list)
    approvals_required: int = 1
    signatures: list[DecisionSignature] = field(default_factory=list)
    """The latest revision's quorum so far and its signed decisions, from the queue's record."""
    policy: PolicyState | None = None
    """What the queue's policy asks of the latest revision, and its alarms of where the plan runs."""
    window: WindowState | None = None
    """Whether the latest revision's plan may run now under its environment's change windows."""
    drifts_viewed: set[tuple[int, int]] = field(default_factory=set)
    """(base, revision) pairs whose drift the reviewer has seen: the queue's Δ mark is cleared."""
    _analyses: dict[int, Analysis] = field(default_factory=dict, repr=False)
    _drifts: dict[tuple[int, int], Drift] = field(default_factory=dict, repr=False)
    _prepared_drifts: dict[tuple[int, int], Drift] = field(default_factory=dict, repr=False)
    """Drifts computed from the scans before the checks, for the drift view only: the queue's mark
    and the re-plan notice wait for the checked comparison (`keep_drift`)."""

    listing: ProposalSummary | None = None
    """The queue's list row, while no revision is fetched (live): what the queue read of the plan
    when it was submitted. The revision is fetched when the reviewer opens the proposal."""

    @property
    def latest_revision(self) -> int:
        if not self.revisions and self.listing is not None:
            return self.listing.revision
        return max(tuple(self.revisions))

    def take_listing(self, row: ProposalSummary, me: Whoami | None) -> None:
        """The queue's list row as the truth about state and proposer, for a proposal listed before
        any of its revisions is fetched."""
        self.listing = row
        self.state = row.state
        self.decided_by = row.decided_by
        self.claimed_by = row.claimed_by
        self.outcome_unknown = bool(row.outcome_unknown)
        self.expires_at = row.expires_at
        self.proposed_by = row.proposed_by
        self.mine = me is not None and row.proposed_by == me.name

    @property
    def latest(self) -> Proposal:
        return self.revisions[self.latest_revision]

    def analysis(self, revision: int | None = None) -> Analysis:
        number = self.latest_revision if revision is None else revision
        if number not in self._analyses:
            from reviewer.reading.analysis import Analysis

            self._analyses[number] = Analysis(self.revisions[number])
        return self._analyses[number]

    def figures(self, revision: int | None = None) -> Analysis | None:
        """The analysis once its whole-plan figures are computed (by the loader, in a thread), else None."""
        number = self.latest_revision if revision is None else revision
        return self.analysis(number) if number in self.analysed else None

    def still_computing(self, revision: int | None = None) -> list[str]:
        """What the background work has not finished for a revision, in words for the panes."""
        number = self.latest_revision if revision is None else revision
        if number in self.problems:
            return []
        pending = []
        if number not in self.verified:
            pending.append(f"checking {len(self.revisions[number].calls):,} calls and the digest")
        if number not in self.analysed:
            pending.append("the analysis")
        return pending

    def approval_blocker(self, revision: int) -> str | None:
        """Why `revision` cannot be approved yet (or at all), or None when it can."""
        if revision in self.problems:
            return f"the proposal is broken: {self.problems[revision]}"
        if revision not in self.verified:
            return (
                "not every call has been checked and the digest is still being computed: "
                "an approval names the digest, so it waits for it"
            )
        return None

    def execution_expected(self, revision: int) -> bool:
        """The queue's trail says this revision ran: its report is fetched when the proposal is opened
        (never in the demo, whose trail is empty)."""
        return any(event.event == "executed" and event.revision == revision for event in self.history)

    def changes_asked(self, revision: int) -> str | None:
        """ "changes requested by NAME: REASON" when a reviewer asked to change `revision` (the queue's
        trail says so), for the drift of the revision that answered it; None otherwise."""
        asked = next(
            (
                event
                for event in self.history
                if event.event == "changes_requested" and event.revision == revision
            ),
            None,
        )
        if asked is None:
            return None
        return f"changes requested by {shown(asked.actor)}: {shown(asked.reason or '', 200)}"

    def submitted_at(self, revision: int) -> datetime | None:
        """When the queue received `revision` (its trail, or its list row before the trail is fetched;
        None in the demo, whose trail is empty)."""
        listed = self.listing.submitted_at if self.listing and self.listing.revision == revision else None
        return next(
            (
                event.at
                for event in reversed(self.history)
                if event.event == "submitted" and event.revision == revision
            ),
            listed,
        )

    @property
    def is_new(self) -> bool:
        """Pending with a revision newer than any the reviewer opened (`seen_revision`, set on opening)."""
        opened = self.seen_revision or 0
        listed = bool(self.revisions) or self.listing is not None
        return listed and self.state == "pending" and self.latest_revision > opened

    def apply(self, record: ProposalRecord, me: Whoami | None) -> None:
        """Take the queue's record as the truth about state, proposer and history."""
        self.take_state(record.latest)
        self.proposed_by = record.proposed_by
        self.history = list(record.history)
        self.mine = me is not None and record.proposed_by == me.name
        for info in record.revisions:
            if info.revision in self.digests:
                self.digests[info.revision] = info.plan_sha256

    def take_state(self, latest: DecisionState) -> None:
        """The queue's word on the latest revision: state, who decided or claimed it, the quorum, the
        signatures."""
        self.state = latest.state
        self.decided_by = latest.decided_by
        self.claimed_by = latest.claimed_by
        self.outcome_unknown = bool(latest.outcome_unknown)
        self.refusals = list(latest.refusals)
        self.reason = latest.reason
        self.expires_at = latest.expires_at
        self.approvals = list(latest.approvals)
        self.approvals_required = latest.approvals_required
        self.signatures = list(latest.signatures)
        self.policy = latest.policy
        self.window = latest.window

    @property
    def state_label(self) -> str:
        """The state column's word: the queue's state, `unknown` for a claimed run past its lease, or
        `changes` when a reviewer asked for changes (the column is eight cells; the line under the
        table says who asked and what)."""
        if self.state == "changes_requested":
            return "changes"
        return "unknown" if self.state == "claimed" and self.outcome_unknown else self.state

    def state_words(self) -> str:
        """The queue's state as the chrome shows it: `approved by alice`, `claimed by agent-7`,
        `executed by runner-1` (whoever reported the run, never the approver), or while a quorum
        gathers `pending · 1 of 2 approvals (alice)`, with any approval withdrawn since
        (`1 approval withdrawn (bob, sign-in ended)`); then who refused to run it, if an executor did
        (`refusal_words` says why, in the alarm line)."""
        words = self._decided_words()
        if not self.refusals:
            return words
        return (
            f"{words} · refused by executor {', '.join(sorted({shown(r.refused_by) for r in self.refusals}))}"
        )

    def refusal_words(self) -> list[str]:
        """Each executor's refusal of the latest revision for the review screen's alarm line, newest
        first: who, why (`trail`, `signatures`, `ledger`, `other`) and its words, sanitized (an
        executor's text is untrusted)."""
        return [
            f"refused by executor {shown(refusal.refused_by)} ({shown(refusal.kind, 20)}): "
            f"{shown(refusal.message, 300)}"
            for refusal in reversed(self.refusals)
        ]

    def _decided_words(self) -> str:
        if self.state == "claimed":
            words = f"claimed by {shown(self.claimed_by)} (running)"
            if self.outcome_unknown:
                words = f"claimed by {shown(self.claimed_by)}: outcome unknown, no report by its lease's end"
            return words
        if self.state == "executed":
            reporter = next(
                (event.actor for event in reversed(self.history) if event.event == "executed"), None
            )
            approver = f", approved by {shown(self.decided_by)}" if self.decided_by else ""
            return f"executed by {shown(reporter)}{approver}" if reporter else f"executed{approver}"
        if self.decided_by and self.state in ("approved", "rejected"):
            return f"{self.state} by {shown(self.decided_by)}"
        if self.state == "changes_requested":
            return f"changes requested by {shown(self.decided_by)}: {shown(self.reason or '', 200)}"
        if self.state == "pending":
            from reviewer.policy.quorum import describe_approvals

            parts = ["pending"]
            if self.approvals_required > 1:
                parts.append(describe_approvals(map(shown, self.approvals), self.approvals_required))
            return " · ".join([*parts, *self.withdrawal_words()])
        return self.state

    def withdrawal_words(self) -> list[str]:
        """The latest revision's approvals that stopped counting, with who and what ended them, as
        the queue's trail says (`1 approval withdrawn (alice, sign-in ended)`); none while not pending.
        A file's proposal has no history: the demo loads neither the queue's messages nor the policy."""
        if self.state != "pending" or not self.revisions or not self.history:
            return []
        from reviewer.policy.quorum import describe_withdrawals
        from reviewer.queue.answers import withdrawals_of

        withdrawn = withdrawals_of(self.history, self.latest_revision)
        return [describe_withdrawals((shown(who), why) for who, why in withdrawn)] if withdrawn else []

    def revision_state_words(self, revision: int) -> tuple[str, str]:
        """The chrome's state of `revision` and its `STATE_STYLES` key: the queue's state for the latest
        revision; an earlier one is superseded (never pending: nothing can decide it any more), and
        says when a reviewer's request for changes closed it."""
        latest = self.latest_revision
        if revision >= latest:
            return self.state_words(), self.state_label
        asked = any(
            event.event == "changes_requested" and event.revision == revision for event in self.history
        )
        return f"superseded by rev {latest}" + (", changes requested" if asked else ""), "superseded"

    def policy_words(self) -> list[str]:
        """The policy's alarms for the review screen's alarm line: where the plan runs when its
        environment was not what it said ("says environment 'staging', but its base URL is
        'production''s"), and what matched rules ask ("needs 2 approvals: rule `deletes in
        production`"), sanitized: rule names are the operator's, environment names the agent's."""
        policy = self.policy
        if policy is None:
            return []
        words = [safe_text(clip(sentence, 200)) for sentence in policy.alarms]
        if policy.outcome == "human" and policy.rules:
            words.insert(0, safe_text(clip(policy.needs, 200)))
        if self.window is not None and self.state in ("pending", "approved"):
            words.insert(0, self.window.words())
        return words

    def signature_words(self) -> list[tuple[str, bool]]:
        """Each signed decision on the latest revision as words, and whether it checked out here:
        a valid signature by the key it carries over a statement naming this revision and digest.
        Whether that key is the reviewer's is the queue's registration (and the executor's file). A
        passkey's assertion carries no key: here its statement is read, the queue checked the rest."""
        if not self.signatures:
            return []
        from reviewer.signing.passkeys import is_passkey_assertion
        from reviewer.signing.signed_approvals import SignedStatement, statement_by_passkey, verify_decision
        from reviewer.signing.sshsig import SigningError

        revision = self.latest_revision
        digest = self.digests.get(revision, "")
        words = []
        for item in self.signatures:
            signed = SignedStatement(item.statement, item.signature)
            try:
                if is_passkey_assertion(item.signature):
                    statement, passkey = statement_by_passkey(signed, self.proposal_id, revision, digest)
                    signer = f"passkey {passkey[:12]}… (checked by the queue)"
                else:
                    statement, key = verify_decision(signed, self.proposal_id, revision, digest)
                    signer = f"✓ {key.fingerprint[:19]}…"
            except SigningError as error:
                words.append((f"{shown(item.reviewer, 20)} ✗ {safe_text(clip(str(error), 60))}", False))
                continue
            verb = "approved" if statement.decision == "approve" else "rejected"
            words.append((f"{shown(statement.reviewer, 20)} {verb} {signer}", True))
        return words

    def drift_base(self, revision: int) -> int | None:
        """What to compare `revision` with: the revision last seen if older, else the one before it."""
        if self.seen_revision is not None and self.seen_revision < revision:
            return self.seen_revision
        older = [number for number in self.revisions if number < revision]
        return max(older) if older else None

    def compare(self, old: int, new: int) -> Drift:
        """The drift of `new` against `old`, from the cache or computed (about 0.1 s for 100,000
        calls: a worker calls it). It stores nothing, so a worker's thread never changes the item a
        screen is reading: the handler that receives the result keeps it (`keep_drift`)."""
        cached = self.known_drift(old, new)
        if cached is not None:
            return cached
        from reviewer.reading.drift import diff_revisions

        return diff_revisions(self.revisions[old], self.revisions[new])

    def known_drift(self, old: int, new: int) -> Drift | None:
        """The drift of `new` against `old` if a worker has computed it already."""
        checked = self._drifts.get((old, new))
        return checked if checked is not None else self._prepared_drifts.get((old, new))

    def keep_prepared_drift(self, old: int, new: int, drift: Drift) -> None:
        """A comparison made ahead of the checks, so `d` shows it at once (see `_prepared_drifts`)."""
        self._prepared_drifts[old, new] = drift

    def keep_drift(self, old: int, new: int, drift: Drift) -> None:
        """A comparison a worker made, kept by the event loop for the queue's mark and the screens."""
        self._drifts[old, new] = drift

    def latest_drift(self) -> tuple[int, Drift] | None:
        """The latest revision's drift from its base, once computed and when it is not empty."""
        base = self.drift_base(self.latest_revision)
        if base is None:
            return None
        drift = self._drifts.get((base, self.latest_revision))
        if drift is None or drift.is_empty:
            return None
        return base, drift

    def add(self, proposal: Proposal, origin: str, digest: str | None = None) -> None:
        """A revision as listed from its scan (`digest` is the queue's record live, absent in the demo);
        its analysis, which the loader completes in the background, is made when first asked for
        (`analysis`), so listing does not import the analysis."""
        self.revisions[proposal.revision] = proposal
        self._analyses.pop(proposal.revision, None)  # a revision listed again is read afresh
        if digest is not None:
            self.digests[proposal.revision] = digest
        self.origins[proposal.revision] = origin


DECIDED_STATES = frozenset({"approved", "rejected", "changes_requested", "claimed", "executed", "expired"})


def no_longer_pending(item: QueueItem, revision: int) -> str | None:
    """Why `revision` can no longer be decided (it ran, or the queue says it is decided or expired),
    or None."""
    if revision in item.executions or item.execution_expected(revision):
        return (
            f"revision {revision} has already been executed: its approval was used by that run, "
            "and nothing is sent"
        )
    latest = max(item.revisions, default=revision)
    if revision < latest:
        return (
            f"revision {revision} is superseded by revision {latest}: nothing is sent (escape, then enter "
            "opens the latest)"
        )
    if item.state in DECIDED_STATES:
        return f"revision {revision} is no longer pending ({item.state_words()}): nothing is sent"
    return None


def local_refusal(item: QueueItem, revision: int, decision: str) -> str | None:
    """Why the app will not send this decision at all, or None: a proposal no longer pending for
    either (a break-glass approval may join an approval no run claimed yet); for an approval also your
    own proposal or a digest mismatch (rejecting stays possible)."""
    finished = no_longer_pending(item, revision)
    joins_approval = decision == "break_glass" and item.state == "approved"
    if finished and not (joins_approval and revision == item.latest_revision):
        return finished
    if decision not in ("approve", "break_glass"):
        return None
    if item.mine:
        return "you proposed this: another reviewer must approve it"
    if revision in item.local_digests:
        return (
            "the plan fetched does not hash to the queue's digest: do not approve it; "
            "tell the queue's operator"
        )
    return None


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
    """A proposal file checked whole (the tests and tools that want it at once)."""
    return parse_proposal(_read_limited(path), path.name)


def scan_proposal_file(path: Path) -> Proposal:
    """A proposal file after the cheap scan only (see `reviewer.plan.proposal.scan_proposal`)."""
    return scan_proposal(_read_limited(path), path.name)


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


def scan_folder(folder: Path) -> Iterator[tuple[Path, Proposal | ExecutionRecord | BrokenFile]]:
    """Each file of `folder` in name order, scanned (proposals) or read (`*.execution.json` real
    runs), or with the reason it could not be. A scan reads the bytes once and costs about 0.1 s for
    the largest file allowed, so a large file holds the listing of the next ones back by that much;
    the expensive checks come after, smallest first (`completion_order`)."""
    return scan_files(proposal_files(folder))


def scan_files(paths: list[Path]) -> Iterator[tuple[Path, Proposal | ExecutionRecord | BrokenFile]]:
    """`scan_folder` over files already listed, in the order given."""
    for path in paths:
        try:
            if path.name.endswith(EXECUTION_SUFFIX):
                yield path, read_execution_file(path)
            else:
                yield path, scan_proposal_file(path)
        except ProposalError as error:
            yield path, BrokenFile(path.name, error.problem)


def completion_order(scanned: list[tuple[Path, Loaded]]) -> list[tuple[Path, Loaded]]:
    """Smallest files first, so the reviewer can approve the small ones while a large one is checked."""

    def size(pair: tuple[Path, Loaded]) -> tuple[int, str]:
        try:
            return pair[0].stat().st_size, pair[0].name
        except OSError:
            return 0, pair[0].name

    return sorted(scanned, key=size)


@dataclass(frozen=True)
class DecisionOutcome:
    """What happened to a decision, in words the reviewer reads on screen, and what the screen does
    next: an error banner, the queue's new state (`answer`), or open the newer revision a 412 named."""

    sent: bool
    message: str
    state: str | None = None
    error: bool = False
    reopen_revision: int | None = None
    answer: DecisionState | None = None


class Decider(Protocol):
    """Where approvals and rejections go: the queue, or nowhere in the demo."""

    async def decide(
        self, item: QueueItem, revision: int, plan_sha256: str, decision: str, reason: str
    ) -> DecisionOutcome: ...


DECISION_NOUNS = {"approve": "approval", "reject": "rejection", "request_changes": "request for changes"}
"""What each decision is called in a sentence; an unknown word is named as itself, never as another."""


class DemoDecider:
    """The demo sends nothing: it says so, so nobody mistakes a demo approval for a real one."""

    async def decide(
        self, item: QueueItem, revision: int, plan_sha256: str, decision: str, reason: str
    ) -> DecisionOutcome:
        noun = DECISION_NOUNS.get(decision, decision)
        return DecisionOutcome(False, f"{noun} of revision {revision}: not sent (demo)")
