"""The agent's side of the queue: submit a plan, wait for the decision, claim it, run it once, report it."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable, Iterable
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any, Final

import httpx
import msgspec
from pydantic import ValidationError

from reviewer.agent.audit import DEFAULT_AUDIT_READ_TIMEOUT
from reviewer.agent.errors import (
    ChangesRequested,
    DecisionTimeout,
    LedgerRequired,
    NotApproved,
    OutsideChangeWindow,
    ProposalExpired,
    ProposalRejected,
    ReportNotStored,
    RunStopped,
    UnsignedApproval,
)
from reviewer.agent.execution import DEFAULT_REQUEST_ID_HEADER, Approval, Execution
from reviewer.agent.fitting import fit_calls
from reviewer.agent.ledger import AlreadyRun, Ledger, LedgerError
from reviewer.agent.tools import GatedTool, WriteTool
from reviewer.agent.waiting import Patience, Result
from reviewer.audit.registry import AuditSource
from reviewer.plan.proposal import MAX_STRING_CHARS, Proposal, plan_sha256
from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.client import DecisionPoll, QueueClient
from reviewer.queue.messages import (
    AuditVerification,
    DecisionState,
    ExecutionReport,
    RefusalKind,
    SubmissionAnswer,
)
from reviewer.queue.refusals import ClaimRefused, NotFound, OutsideWindow, QueueError, StaleRevision
from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.signed_approvals import SignedStatement, check_signed_approvals
from reviewer.trail.memory import TrailRefused, check_trail

DEFAULT_POLL_INTERVAL = 2.0
DEFAULT_DECISION_TIMEOUT = 15 * 60.0
DEFAULT_DECISION_WAIT: Final = 30.0
"""Seconds a long poll for a decision is held by the queue: well under a proxy's read timeout."""
REFUSAL_REPORT_TIMEOUT = 60.0
"""The longest a refusal waits for an away queue to hear of it: the refusal is raised after that with a
note, never held for the queue's whole outage."""
MAX_REFUSAL_MESSAGE = 2000
"""Characters of the refusal's words sent to the queue: enough for why, small in every decision state."""


_INTERRUPTIONS: Final = (asyncio.CancelledError, KeyboardInterrupt, SystemExit)


class QueueAgent:
    """An agent talking to the queue under its own token (`QueueClient` with an agent token).

    The queue is asked again right before a real run: an approval held in memory may have been
    superseded by a newer revision, used up, or expired since it arrived, and then it authorizes
    nothing.
    """

    def __init__(
        self,
        client: QueueClient,
        *,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        allowed_signers: AllowedSigners | None = None,
        signatures_required: int = 1,
        ledger: Ledger | Path | str | None = None,
        patience: Patience | None = None,
        outage_timeout: float = DEFAULT_DECISION_TIMEOUT,
        decision_wait: float = DEFAULT_DECISION_WAIT,
    ) -> None:
        """A queue that is away (restarted, upgraded) is waited for with `patience`'s backoff, at most
        `outage_timeout` seconds for a request outside the wait for a decision (whose own deadline
        bounds it), and said once when it goes and once when it is back.

        With `allowed_signers` (an OpenSSH allowed-signers file, `AllowedSigners.parse`), an approval
        counts only when `signatures_required` distinct people in it signed exactly this proposal,
        revision and digest: the queue's word is then not enough, so a queue whose database or host is
        in other hands cannot make this agent run anything. Such an executor also names a `ledger`, a
        local file where it records each signed approval it claims before the first write, and never
        runs one the file holds: nor can that queue make it run anything twice."""
        if allowed_signers is not None and ledger is None:
            raise LedgerRequired()
        self.client = client
        self.poll_interval = poll_interval
        self.allowed_signers = allowed_signers
        self.signatures_required = signatures_required
        self.ledger = ledger if isinstance(ledger, Ledger) or ledger is None else Ledger(ledger)
        self.patience = patience or Patience()
        self.outage_timeout = outage_timeout
        self.decision_wait = decision_wait
        """Seconds each long poll for a decision asks the queue to hold it (the queue caps it)."""

    async def _patiently(
        self,
        request: Callable[[], Awaitable[Result]],
        what: str,
        until: float | None = None,
        held: float = 0.0,
    ) -> Result:
        """`request()` through an outage of the queue, until `until` (monotonic) or `outage_timeout`;
        `held` is how long the queue may rightly hold it (a long poll's wait)."""
        if until is None:
            until = self.patience.clock() + self.outage_timeout
        return await self.patience.call(
            request, until=until, what=what, where=self.client.base_url, held=held
        )

    async def submit(self, proposal: Proposal) -> SubmissionAnswer:
        """Submit a revision; sent again through an outage, it is stored once (by its revision)."""
        named = f"submitting {proposal.proposal_id} revision {proposal.revision}"
        return await self._patiently(partial(self.client.submit, proposal), named)

    async def wait_for_decision(
        self,
        proposal_id: str,
        revision: int,
        *,
        plan_digest: str | None = None,
        timeout: float = DEFAULT_DECISION_TIMEOUT,
        poll_interval: float | None = None,
    ) -> Approval:
        """Wait until this revision is decided; return the approval, or raise why there is none.

        Each ask is a long poll (`QueueClient.await_decision`): the queue answers the moment a
        reviewer decides, so the run starts within milliseconds of the approval. A queue that
        answers at once instead (an older release) is asked again every `poll_interval` seconds.
        The approval carries the plan as the queue stores it (what the reviewer saw), checked
        against the digest the approval names. `plan_digest`, when given, must be that digest too.
        """
        interval = self.poll_interval if poll_interval is None else poll_interval
        clock = self.patience.clock
        deadline = clock() + timeout
        until = deadline
        known: DecisionPoll | None = None
        while True:
            asked_at = clock()
            wait = max(0.0, min(self.decision_wait, deadline - asked_at))
            asking = partial(self.client.await_decision, proposal_id, wait=wait, known=known)
            answer = await self._patiently(
                asking, f"waiting for a decision on {proposal_id}", until, held=wait
            )
            unchanged = answer.state == known.state if known else answer.state.state == "pending"
            known, state = answer, answer.state
            until = min(deadline, clock() + _seconds_left(state) + interval)
            self._require_revision(state, revision, plan_digest)
            if state.state == "approved":
                return await self._approval(state)
            if state.state == "rejected":
                raise ProposalRejected(proposal_id, revision, state.decided_by, state.reason)
            if state.state == "changes_requested":
                raise ChangesRequested(proposal_id, revision, state.decided_by, state.reason)
            if state.state == "expired":
                raise ProposalExpired(proposal_id, revision, state.decided_by)
            if state.state != "pending":
                raise NotApproved(proposal_id, revision, _why_not(state))
            remaining = deadline - clock()
            if remaining <= 0:
                raise DecisionTimeout(proposal_id, revision, timeout)
            early = interval - (clock() - asked_at)
            if unchanged and early > 0:  # answered at once with nothing new: a queue that does not wait
                await self.patience.sleep(min(early, remaining))

    async def submit_and_wait(
        self, proposal: Proposal, *, timeout: float = DEFAULT_DECISION_TIMEOUT
    ) -> Approval:
        answer = await self.submit(proposal)
        return await self.wait_for_decision(
            answer.proposal_id, answer.revision, plan_digest=answer.plan_sha256, timeout=timeout
        )

    async def require_current(self, approval: Approval) -> None:
        """Raise `NotApproved` unless the queue still holds this approval as current and unused."""
        state = await self.state(approval.proposal_id)
        self._require_revision(state, approval.revision, approval.plan_sha256)
        if state.state != "approved":
            raise NotApproved(approval.proposal_id, approval.revision, _why_not(state))

    async def execute(
        self,
        approval: Approval,
        *,
        client: httpx.AsyncClient | None,
        task: Callable[[], Awaitable[Any]] | None = None,
        tools: Iterable[WriteTool | GatedTool] = (),
        audit: AuditSource | None = None,
        allow_any_target: bool = False,
        request_id_header: str = DEFAULT_REQUEST_ID_HEADER,
        audit_read_timeout: float = DEFAULT_AUDIT_READ_TIMEOUT,
    ) -> Execution:
        """Claim the approval, run it for real, report the run whatever ends it, and raise unless it
        made every approved call successfully.

        The run replays the approved calls (`Execution.replay`, with `tools` to rebuild calls that are
        theirs) unless `task` is given: then the agent's task runs again, re-sampling the model, each
        call checked against the plan. The claim comes before the first write and makes this the one
        run of the approval; another runner's claim is refused (`NotApproved`). The report is sent
        after a success, a stop, an exception from the task or framework, and a cancellation alike
        (shielded from a second cancellation), and the queue stores it under the claim whatever
        happened meanwhile. With an `audit` source, the run is held against it before the report, which
        carries the verification (the source's name, each call's verdict, the writes nobody approved);
        a source still being read after `audit_read_timeout` seconds is left, and the report says so.
        Then `RunStopped` (its `execution` says which calls ran and how each
        ended) is raised for anything but a complete, successful run; a cancellation is raised as is.
        """
        if not isinstance(approval, Approval):
            raise TypeError(
                "QueueAgent.execute(approval, client=..., task=None) takes the approval first; "
                "pass the agent's task as task= to re-sample instead of replaying the approved calls"
            )
        execution = Execution(
            approval, client, audit, allow_any_target=allow_any_target, request_id_header=request_id_header
        )
        await self._check_before_claim(approval)
        await self._claim(approval, execution)
        if self.ledger is not None:
            await self._record_in_ledger(self.ledger, execution)
        error = await execution.run(task if task is not None else partial(execution.replay, tools))
        if audit is not None and not isinstance(error, _INTERRUPTIONS):
            try:  # a cancellation while the log is read still lets the report go, below
                await asyncio.shield(execution.read_audit(audit_read_timeout))
            except asyncio.CancelledError as cancelled:
                error = cancelled
        try:
            await asyncio.shield(self.report(execution))
        except QueueError as lost:
            if error is None:
                raise ReportNotStored(execution, lost) from lost
            error.add_note(f"the report of this run could not be stored: {lost}")
        if isinstance(error, _INTERRUPTIONS):
            raise error
        if error is not None:
            raise RunStopped(execution, execution.summary()) from error
        execution.raise_for_stop()
        return execution

    async def _check_before_claim(self, approval: Approval) -> None:
        """This executor's own word on the approval, before its claim: the signatures it trusts (asked
        again now: the approval may be a stale object), its ledger, and the queue's trail. A refusal
        is reported to the queue, so reviewers see why an approval sits unrun, then raised."""
        try:
            if self.allowed_signers is not None:
                state = await self.state(approval.proposal_id)
                self._require_revision(state, approval.revision, approval.plan_sha256)
                self._require_signatures(state)
            if self.ledger is not None:
                self.ledger.require_unclaimed(approval.proposal_id, approval.revision, approval.plan_sha256)
            await check_trail(self.client)
        except (UnsignedApproval, AlreadyRun, LedgerError, TrailRefused) as refused:
            await self._report_refusal(approval.proposal_id, approval.revision, approval.plan_sha256, refused)
            raise

    async def _report_refusal(
        self, proposal_id: str, revision: int, plan_sha256: str, refused: Exception
    ) -> None:
        """Tell the queue this executor refused the approval (one Idempotency-Key for every try). A
        refusal the queue cannot be told of is still raised, with a note that the queue does not know."""
        # Escaped here too: the words may quote a hostile queue, and no store should meet a NUL.
        message = safe_text(clip(f"{type(refused).__name__}: {refused}", MAX_REFUSAL_MESSAGE))
        reporting = partial(
            self.client.report_refusal,
            proposal_id,
            revision,
            plan_sha256,
            _refusal_kind(refused),
            message,
            str(uuid.uuid4()),
        )
        until = self.patience.clock() + min(self.outage_timeout, REFUSAL_REPORT_TIMEOUT)
        try:
            await asyncio.shield(self._patiently(reporting, f"reporting the refusal of {proposal_id}", until))
        except (QueueError, ValidationError) as lost:
            refused.add_note(f"the queue at {self.client.base_url} was not told of this refusal: {lost}")

    async def _record_in_ledger(self, ledger: Ledger, execution: Execution) -> None:
        """On disk before the first write. Refused (another run on this host got here first, or the
        file cannot be written): nothing runs, and the queue's claim is reported as a run that sent
        nothing, so it does not wait out its lease as an unknown outcome."""
        approval = execution.approval
        try:
            ledger.claim(approval.proposal_id, approval.revision, approval.plan_sha256)
        except (AlreadyRun, LedgerError) as refused:
            execution.ended, execution.failure = "stopped", f"{type(refused).__name__}: {refused}"
            try:
                await asyncio.shield(self.report(execution))
            except QueueError as lost:
                refused.add_note(f"the queue's claim could not be released: {lost}")
            raise

    async def _claim(self, approval: Approval, execution: Execution) -> None:
        """Claim the run (`execution.claim_id`), and learn until when its change window lets it write; a
        refusal is `OutsideChangeWindow` (the windows keep it now) or `NotApproved` (not approved now, or
        another run holds it). One Idempotency-Key for every try: a claim whose answer was lost in an
        outage is this run's.

        The queue's clock decides, never this process's: the claim says when the window closes in the
        queue's time, and the run counts down the time left from before it asked, on its monotonic clock.
        """
        key = str(uuid.uuid4())
        claiming = partial(
            self.client.claim, approval.proposal_id, approval.revision, approval.plan_sha256, key
        )
        asked_at = self.patience.clock()
        try:
            claim = await self._patiently(claiming, f"claiming {approval.proposal_id}")
        except OutsideWindow as kept:
            raise OutsideChangeWindow(
                approval.proposal_id, approval.revision, kept.body.message, kept.window, kept.runs_from
            ) from None
        except (ClaimRefused, StaleRevision, NotFound) as refused:
            raise NotApproved(approval.proposal_id, approval.revision, refused.body.message) from None
        execution.claim_id = claim.claim_id
        window = claim.window
        if window is not None and window.runs_until is not None:
            left = (window.runs_until - claim.claimed_at).total_seconds()
            execution.window_closes = asked_at + left
            execution.window_name = window.window
            execution.monotonic = self.patience.clock

    async def report(self, execution: Execution) -> DecisionState:
        """Send the real calls, how the run ended and its audit verification, under its claim;
        an answer too large for the queue's limits is sent clipped, with its length and SHA-256.

        Safe to call again when an answer was lost: every report of one execution carries the same
        Idempotency-Key, so the queue stores it once and answers a retry with the first answer.
        """
        note = _run_note(execution)
        audit = execution.audit_verification
        try:
            return await self._send_report(execution, note, audit)
        except ValidationError as invalid:
            if audit is None:
                raise
            why = (
                f"the audit verification against {audit.get('source', 'its source')} was left out: "
                f"it does not fit the report ({invalid.error_count()} errors, first at "
                f"{'.'.join(map(str, invalid.errors()[0]['loc']))})"
            )
            return await self._send_report(execution, f"{note}; {why}" if note else why, None)

    async def _send_report(
        self, execution: Execution, note: str | None, audit: AuditVerification | None
    ) -> DecisionState:
        report = ExecutionReport(
            revision=execution.approval.revision,
            plan_sha256=execution.approval.plan_sha256,
            claim_id=execution.claim_id,
            ended=execution.ended,
            calls=fit_calls([msgspec.to_builtins(call) for call in execution.executed_calls()]),
            unknown_outcomes=[call.seq for call in execution.outcome_unknown],
            note=note[:MAX_STRING_CHARS] if note else None,
            request_ids=execution.request_ids() or None,
            audit=audit,
        )
        sending = partial(
            self.client.report_execution,
            execution.approval.proposal_id,
            report,
            idempotency_key=execution.report_key,
        )
        return await self._patiently(sending, f"reporting the run of {execution.approval.proposal_id}")

    async def state(self, proposal_id: str) -> DecisionState:
        """The queue's state of the latest revision, asked again through an outage."""
        return await self._patiently(
            partial(self.client.decision_state, proposal_id), f"asking the state of {proposal_id}"
        )

    def _require_signatures(self, state: DecisionState) -> None:
        """`NotApproved` unless enough people this runner trusts signed this exact approval."""
        if self.allowed_signers is None:
            return
        check = check_signed_approvals(
            self.allowed_signers,
            self.signatures_required,
            state.proposal_id,
            state.revision,
            state.plan_sha256,
            [SignedStatement(item.statement, item.signature) for item in state.signatures],
        )
        if not check.authorized:
            raise UnsignedApproval(
                state.proposal_id,
                state.revision,
                f"the queue says {state.state}, but this runner requires signed approvals: {check.explain()}",
            )

    async def _approval(self, state: DecisionState) -> Approval:
        reading = partial(self.client.get_revision, state.proposal_id, state.revision)
        proposal = await self._patiently(reading, f"reading the approved plan of {state.proposal_id}")
        try:
            if plan_sha256(proposal) != state.plan_sha256:
                raise NotApproved(
                    state.proposal_id,
                    state.revision,
                    "the queue's copy of the plan does not match its digest",
                )
            self._require_signatures(state)
        except NotApproved as refused:
            await self._report_refusal(state.proposal_id, state.revision, state.plan_sha256, refused)
            raise
        expires_at = state.expires_at.isoformat() if state.expires_at else None
        return Approval(proposal, state.plan_sha256, state.decided_by or "unknown reviewer", expires_at)

    @staticmethod
    def _require_revision(state: DecisionState, revision: int, plan_digest: str | None) -> None:
        if state.revision != revision:
            raise NotApproved(
                state.proposal_id,
                revision,
                f"revision {state.revision} superseded it; an approval of an old revision authorizes nothing",
            )
        if plan_digest is not None and state.plan_sha256 != plan_digest:
            raise NotApproved(
                state.proposal_id, revision, "the queue holds another plan under this revision number"
            )


def _refusal_kind(refused: Exception) -> RefusalKind:
    """The queue's word for why this executor refused an approval."""
    if isinstance(refused, TrailRefused):
        return "trail"
    if isinstance(refused, UnsignedApproval):
        return "signatures"
    if isinstance(refused, AlreadyRun | LedgerError):
        return "ledger"
    return "other"


def _run_note(execution: Execution) -> str | None:
    """How the run ended when it did not make every call: the report's note."""
    if execution.stop is not None:
        return f"stopped before call {execution.stop.position}: {execution.stop.reason}"
    if execution.failure is not None:
        return f"the run {execution.ended}: {execution.failure}"
    if execution.unexecuted:
        return f"the run made {len(execution.executed)} of the plan's {len(execution.plan)} calls"
    return None


def _seconds_left(state: DecisionState) -> float:
    """Seconds until a pending revision expires (when the queue said when), else no bound."""
    if state.state != "pending" or state.expires_at is None:
        return float("inf")
    expires_at = state.expires_at if state.expires_at.tzinfo else state.expires_at.replace(tzinfo=UTC)
    return max(0.0, (expires_at - datetime.now(UTC)).total_seconds())


def _why_not(state: DecisionState) -> str:
    return {
        "pending": "no reviewer has approved it yet",
        "rejected": f"{state.decided_by or 'a reviewer'} rejected it",
        "changes_requested": f"{state.decided_by or 'a reviewer'} asked for changes: {state.reason or ''}",
        "expired": "it expired before it ran; submit it again for a new decision",
        "claimed": f"a run by {state.claimed_by or 'another runner'} holds its approval (one run each)",
        "executed": "its approval was already used by an execution (an approval authorizes one run)",
    }.get(state.state, f"its state is {state.state}")
