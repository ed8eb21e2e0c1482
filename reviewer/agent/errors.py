"""The errors an agent runner can meet, each with a message that says what to do next."""

from __future__ import annotations

from datetime import datetime
from typing import Any


class AgentError(Exception):
    """Base of every error `reviewer.agent` raises on purpose; anything else is a bug."""


class UnknownBackend(AgentError):
    """A dry-run backend name nobody defined: raising is the only safe answer, never a real write."""

    def __init__(self, name: object, known: tuple[str, ...]) -> None:
        self.name = name
        super().__init__(
            f"unknown dry-run backend {name!r}; choose one of {', '.join(known)} "
            "(nothing was sent to the API)"
        )


class DryRunParameterUnknown(AgentError):
    """A server dry run was asked for, and nobody named the API's dry-run parameter.

    Never guessed: an API that does not know the parameter usually drops it and performs the write.
    """

    def __init__(self, how_to_name: str) -> None:
        super().__init__(
            "a server dry run needs the API's own dry-run parameter, and none was named, so nothing was "
            f"sent: give {how_to_name}. An API without a documented dry run is dry-run with "
            "the 'record' backend (the default): its writes are only recorded"
        )


class LiveClientRefused(AgentError):
    """A fake backend was handed a client that talks to a real API."""

    def __init__(self, backend: str, client: object) -> None:
        self.backend = backend
        kind = "base URL" if isinstance(client, str) else type(client).__name__
        super().__init__(
            f"the {backend!r} dry-run backend was handed a live {kind}; a fake must never hold a "
            "client that can reach the real API. Pass no client (or an httpx client built on "
            "httpx.MockTransport), or use the 'server' backend to ask the API itself."
        )


class NoActiveRun(AgentError):
    """A write tool was called outside any run, so nobody decided whether it may write."""

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"write tool {tool!r} was called outside a run; call it inside "
            "`async with dry_run(...)` or from a task given to `execute_approved(...)`"
        )


class ToolDefinitionError(AgentError):
    """A write tool whose declaration would let the model steer the dry-run flag or break recording."""


class NoApproval(AgentError):
    """The queue gives no approval for this revision of this proposal, so nothing may run for real.

    The subclasses say why (not approved, rejected, no decision in time); callers that only need to
    know that nothing may run catch this one.
    """

    def __init__(self, proposal_id: str, revision: int, message: str) -> None:
        self.proposal_id = proposal_id
        self.revision = revision
        super().__init__(message)


class NotApproved(NoApproval):
    """The queue does not hold a current approval for exactly this plan, so nothing may run for real."""

    def __init__(self, proposal_id: str, revision: int, why: str) -> None:
        self.why = why
        super().__init__(
            proposal_id,
            revision,
            f"proposal {proposal_id} revision {revision} may not run for real: {why}. "
            "Submit the plan and wait for a reviewer to approve this revision; nothing was sent.",
        )


class OutsideChangeWindow(NotApproved):
    """The queue's change windows keep the approved plan from running now: `window` names the window,
    `runs_from` when it may run next (None: no window lets it soon). The approval was not used: run it
    again from then, or ask reviewers to break glass."""

    def __init__(
        self, proposal_id: str, revision: int, why: str, window: str | None, runs_from: datetime | None
    ) -> None:
        self.window = window
        self.runs_from = runs_from
        self.why = why
        NoApproval.__init__(
            self,
            proposal_id,
            revision,
            f"{why}. Nothing was sent: run it again then, or ask reviewers to approve it with "
            "--break-glass REASON",
        )


class UnsignedApproval(NotApproved):
    """The queue says approved, but not enough of the people this runner trusts signed exactly this
    proposal, revision and digest: the queue's word alone runs nothing here."""


class TargetMismatch(NoApproval):
    """The real run's client points at another API than the one the plan was approved for."""

    def __init__(self, proposal_id: str, revision: int, approved_url: str, given_url: str) -> None:
        self.approved_url = approved_url
        self.given_url = given_url
        super().__init__(
            proposal_id,
            revision,
            f"proposal {proposal_id} revision {revision} was approved for {approved_url}, but the client "
            f"is pointed at {given_url or '(no base URL)'}; nothing was sent. Run it with "
            "httpx.AsyncClient(base_url=<the approved URL>), or re-plan against the other target and "
            "get that plan approved.",
        )


class DecisionTimeout(NoApproval):
    """No decision arrived within the wait; the proposal stays in the queue, pending."""

    def __init__(self, proposal_id: str, revision: int, seconds: float) -> None:
        super().__init__(
            proposal_id,
            revision,
            f"no decision on proposal {proposal_id} revision {revision} after {seconds:g} s; "
            "it is still pending in the queue: wait again later or ask a reviewer to look at it",
        )


class PlanStop(AgentError):
    """The real run stopped before sending a call the approved plan does not cover.

    Raised inside the agent's task at the call that did not match; the call was not sent, and
    every later write tool call in the same run raises too, so swallowing it cannot resume writing.
    """

    def __init__(
        self, position: int, tool: str, reason: str, expected: Any = None, actual: Any = None
    ) -> None:
        self.position = position
        self.tool = tool
        self.reason = reason
        self.expected = expected
        self.actual = actual
        super().__init__(
            f"real call {position} ({tool}) stopped before it was sent: {reason}. "
            "The approved plan does not cover it; re-plan, submit the new revision and get it approved."
        )


class WindowClosed(PlanStop):
    """The run outlasted its change window: it stopped before the next write, which was not sent."""


class ProposalRejected(NoApproval):
    """A reviewer rejected the plan: it must not run; re-plan or stop."""

    def __init__(self, proposal_id: str, revision: int, decided_by: str | None, reason: str | None) -> None:
        self.decided_by = decided_by
        self.reason = reason
        because = f": {reason}" if reason else ""
        super().__init__(
            proposal_id,
            revision,
            f"{decided_by or 'a reviewer'} rejected proposal {proposal_id} revision {revision}{because}. "
            "Nothing may run; re-plan and submit a new revision, or stop.",
        )


class ChangesRequested(NoApproval):
    """A reviewer asked for changes: this revision must not run; re-plan with `reason` and submit the
    next revision of the same proposal (`Gate.run(..., max_revisions=N)` does it)."""

    def __init__(self, proposal_id: str, revision: int, decided_by: str | None, reason: str | None) -> None:
        self.decided_by = decided_by
        self.reason = reason
        super().__init__(
            proposal_id,
            revision,
            f"{decided_by or 'a reviewer'} asked for changes to proposal {proposal_id} revision {revision}: "
            f"{reason or '(no reason given)'}. Nothing may run; re-plan with this feedback and submit "
            f"revision {revision + 1} of the same proposal.",
        )


class ProposalExpired(NoApproval):
    """The revision expired: pending past the queue's `--pending-ttl` with no decision, or approved and
    not claimed before its approval lapsed. Nothing ran; it authorizes nothing now."""

    def __init__(self, proposal_id: str, revision: int, approved_by: str | None) -> None:
        self.approved_by = approved_by
        how = (
            f"its approval by {approved_by} lapsed before a run claimed it"
            if approved_by
            else "no reviewer decided it before the queue's pending time ran out"
        )
        super().__init__(
            proposal_id,
            revision,
            f"proposal {proposal_id} revision {revision} expired: {how}. Nothing ran; submit the plan "
            "again for a new decision.",
        )


class LiveClientRequired(AgentError):
    """A run that must talk to the real API (a server dry run, a real run) was given no live client."""

    def __init__(self, what: str) -> None:
        super().__init__(
            f"{what} talks to the API itself: pass client=httpx.AsyncClient(base_url=<the API's URL>)"
        )


class NoTarget(NoApproval):
    """The approved plan names no `target.base_url`, so no request of a real run could be checked."""

    def __init__(self, proposal_id: str, revision: int) -> None:
        super().__init__(
            proposal_id,
            revision,
            f"proposal {proposal_id} revision {revision} names no target.base_url, so a real run could "
            "send its calls anywhere; nothing was sent. Record the API's base URL in the plan's target, "
            "or pass allow_any_target=True to run it against the client's URL on purpose.",
        )


class OffTarget(PlanStop):
    """A request of the real run would leave the approved base URL (an absolute URL, `//host`, dot
    segments); it was not sent, and the run stopped there."""


class RunEnded(AgentError):
    """A write tool was called on a real run that had already ended (a task spawned inside it)."""

    def __init__(self, tool: str) -> None:
        super().__init__(
            f"write tool {tool!r} was called after its real run ended; nothing was sent. A task spawned "
            "inside a run must finish before the run does."
        )


class RunStopped(AgentError):
    """A real run that did not make every approved call successfully: it stopped, failed or was
    cancelled. It was reported to the queue; `execution` says which calls ran and how each ended."""

    def __init__(self, execution: Any, message: str) -> None:
        self.execution = execution
        super().__init__(message)


class LedgerRequired(AgentError):
    """An executor that checks signatures was not told where to keep its ledger."""

    def __init__(self) -> None:
        super().__init__(
            "an executor given allowed_signers keeps its own ledger of the approvals it ran, so that no "
            "queue can make it run one twice: pass ledger=PATH, a local file this executor keeps"
        )


class ReportNotStored(AgentError):
    """A real run wrote, and the queue did not store its report: the writes happened all the same.

    Send it again with `QueueAgent.report(execution)` (the queue stores it once); never run the plan
    again, whatever the queue's answer said.
    """

    def __init__(self, execution: Any, problem: object) -> None:
        self.execution = execution
        super().__init__(
            f"{execution.summary()}. The queue did not store the report of this run ({problem}); the calls "
            "it sent were sent for real whatever that answer says. Send the report again with "
            "QueueAgent.report(execution); do not run the plan again."
        )


class WritesKept(AgentError):
    """The dry run kept writes: the API ignored its dry-run parameter, so the "dry" run wrote for real."""

    def __init__(self, writes_kept: int) -> None:
        self.writes_kept = writes_kept
        super().__init__(
            f"the dry run kept {writes_kept} write(s): the API ignored the dry-run parameter and wrote for "
            "real. Nothing was submitted. Check the API's dry-run parameter (or use the record backend); "
            "to submit anyway, so a reviewer sees the alarm, pass allow_kept_writes=True."
        )


class UnresolvablePlaceholder(AgentError):
    """A write call holds a placeholder that names no earlier call of the plan: no real run could ever
    resolve it, so the call is refused in the dry run instead of stopping the approved plan half-run."""

    def __init__(self, tool: str, seq: int, placeholder: str) -> None:
        self.tool = tool
        self.placeholder = placeholder
        super().__init__(
            f"{tool} (call {seq}) was not recorded: {placeholder} names no earlier call of this plan. "
            "Use a placeholder an earlier call answered, such as <id from call 1>, or the value itself."
        )


class MintedValueUnsafe(AgentError):
    """A write call carries a value a dry-run write minted (the id a dry-run create answered) where no
    placeholder can stand for it safely: the real run would send the dry run's value, which names
    nothing yet, or by then another client's resource. The dry run stops: nothing is submitted."""

    def __init__(self, sentence: str) -> None:
        self.sentence = sentence
        super().__init__(
            f"the dry run stopped: {sentence}. The real run would send the dry run's value, which names "
            "nothing yet (or by then another client's resource). Pass the placeholder the earlier call "
            "answered (such as <id from call 1>) as a whole value, or declare the field stable on its "
            "tool if it echoes the input. Nothing was submitted."
        )


class SandboxKeptWrite(AgentError):
    """The sandbox check's create, sent with the dry-run parameter, was kept: the API ignores the
    parameter, so a server dry run against it would write for real. The dry run stops before it begins."""

    def __init__(self, url: str, parameter: str, what_changed: str) -> None:
        self.url = url
        super().__init__(
            f"the sandbox check's create, sent to {url} with {parameter}, was kept ({what_changed}): the "
            "API ignores its dry-run parameter and would write for real. The dry run was stopped before "
            "it began; nothing was sent to the API. Dry-run it with the record backend instead"
        )


class SandboxCheckFailed(AgentError):
    """The sandbox check could not prove anything (the sandbox did not answer, refused the create, or
    listed no JSON): a server dry run is not started on a proof that was never made."""

    def __init__(self, url: str, problem: str) -> None:
        self.url = url
        super().__init__(
            f"the sandbox check against {url} proved nothing: {problem}. The dry run was stopped before it "
            "began; nothing was sent to the API"
        )
