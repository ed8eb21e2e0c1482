"""A plan built across many requests: calls recorded as they arrive, one submission, then one real run.

An MCP host or a graph runtime calls each tool in a request (a task) of its own, so no `async with
dry_run(...)` block can span the plan, and a host that waits minutes for a reviewer inside one call times
out. `PlanSession` holds the plan between requests instead: `call` records, `submit` sends it to the
queue and returns at once, `status` answers the state and, the first time it finds the plan approved,
claims it and runs it once. Whatever asks again gets the stored answer; nothing runs twice.

A session given `replay_tools` runs an approved plan it did not record itself (its process restarted
between the submission and the approval) from the queue's copy: the queue holds the tool names and
arguments, `replay_tools` the means to call them. The claim keeps that to one run whoever asks. Once
a plan is executed, its status is read from the report the queue stored, so it says how the run ended
and what ran, whichever process ran it.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from reviewer.agent.errors import AgentError, NoApproval, RunStopped
from reviewer.agent.execution import Execution
from reviewer.agent.feedback import Feedback
from reviewer.agent.gate import Gate
from reviewer.agent.http_values import CallAnswer
from reviewer.agent.replan import next_revision
from reviewer.agent.runs import Recording
from reviewer.agent.tools import WriteTool
from reviewer.plan.proposal import Proposal
from reviewer.queue.messages import DecisionState, StoredExecution, SubmissionAnswer
from reviewer.queue.refusals import NotFound

ReplayTools = Callable[[Proposal], Awaitable[Iterable[WriteTool]]]
"""The write tools that replay an approved plan; raises when this process must not run it."""


class PlanInProgress(AgentError):
    """A write came after the plan was submitted and before its decision and run ended."""

    def __init__(self, proposal_id: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"plan {proposal_id} is submitted and not ended yet; this call was not recorded. A new plan "
            f"starts after this one ends: ask reviewer_plan_status for {proposal_id} until it is "
            "executed, rejected, changes_requested or expired, then call the tool again."
        )


class EmptyPlan(AgentError):
    """A submission with no recorded call."""

    def __init__(self) -> None:
        super().__init__("no write tool call was recorded, so there is no plan to submit")


class UnknownPlan(AgentError):
    """A status asked for a proposal the queue does not know (or does not show to this agent)."""

    def __init__(self, proposal_id: str) -> None:
        super().__init__(
            f"the queue knows no proposal {proposal_id!r} submitted by this agent; use the proposal_id "
            "that reviewer_submit_plan answered"
        )


class PlanSession:
    """One gated plan at a time, built by calls from any number of requests (see the module)."""

    def __init__(
        self, gate: Gate, *, title: str | None = None, replay_tools: ReplayTools | None = None
    ) -> None:
        self.gate = gate
        self.default_title = title
        self.replay_tools = replay_tools
        self._recording: Recording | None = None
        self._tools: dict[str, WriteTool] = {}
        self._submitted: SubmissionAnswer | None = None
        self._changes: tuple[str, Feedback] | None = None
        """The proposal a reviewer asked to change, and what they asked: the next plan is its next
        revision."""
        self._answers: dict[str, dict[str, Any]] = {}
        self._lock = asyncio.Lock()

    async def call(self, tool: WriteTool, arguments: Mapping[str, Any]) -> CallAnswer:
        """Record one call of `tool` in the plan being built (its arguments already checked)."""
        async with self._lock:
            if self._submitted is not None:
                raise PlanInProgress(self._submitted.proposal_id)
            if self._recording is None:  # kept only once started: a failed start is tried again
                recording = self.gate.recorder()
                await recording.start()
                self._recording = recording
            self._tools[tool.name] = tool
            recording = self._recording
        return await recording.perform(tool, dict(arguments), ())

    async def submit(self, title: str | None = None) -> dict[str, Any]:
        """Submit what was recorded as one proposal and answer at once, without waiting for a decision."""
        async with self._lock:
            if self._submitted is not None:
                raise PlanInProgress(self._submitted.proposal_id)
            recording = self._recording
            if recording is None or not recording.calls:
                raise EmptyPlan()
            await recording.finish()
            proposal_id, feedback = self._changes or (None, None)
            proposal = self.gate.propose(
                recording,
                title=title or self.default_title or "Agent plan",
                proposal_id=proposal_id,
                revision=next_revision(feedback),
            )
            answer = await self.gate.submit(proposal)
            self._submitted, self._changes = answer, None
            self._recording = None
            return {
                "proposal_id": answer.proposal_id,
                "revision": answer.revision,
                "plan_sha256": answer.plan_sha256,
                "state": answer.state,
            }

    async def status(self, proposal_id: str) -> dict[str, Any]:
        """The plan's state; the first time it is found approved, it is claimed and run once, here."""
        async with self._lock:
            if proposal_id in self._answers:
                return self._answers[proposal_id]
            try:
                state = await self.gate.status(proposal_id)
            except NotFound:
                raise UnknownPlan(proposal_id) from None
            ours = self._submitted is not None and self._submitted.proposal_id == proposal_id
            if state.state == "executed":
                if ours:
                    self._submitted = None
                return await self._stored_answer(state)
            if state.state == "approved" and (ours or self.replay_tools is not None):
                answer = await self._run(proposal_id, state)
                self._answers[proposal_id] = answer
                if ours:
                    self._submitted = None
                return answer
            if state.state == "approved":
                return {
                    **_state_answer(state),
                    "note": "this gate holds no plan under this id (another gate submitted it, or this one "
                    "restarted), so it runs nothing; the approval stays unused until it expires",
                }
            if ours and state.state in ("rejected", "changes_requested", "expired"):
                self._submitted = None  # the plan ended: a new one may start
            if ours and state.state == "changes_requested":
                asked = Feedback(state.reason or "", state.decided_by or "a reviewer", state.revision)
                self._changes = (proposal_id, asked)
                return {
                    **_state_answer(state),
                    "note": "a reviewer asked for changes (reason): re-plan with them, call the tools "
                    f"again and submit; the new plan is revision {next_revision(asked)} of this proposal",
                }
            return _state_answer(state)

    async def _run(self, proposal_id: str, state: DecisionState) -> dict[str, Any]:
        try:
            approval = await self.gate.approval(proposal_id)
            if self.replay_tools is not None:
                tools = list(await self.replay_tools(approval.proposal))
            else:
                tools = list(self._tools.values())
            execution = await self.gate.execute(approval, tools=tools)
        except RunStopped as stopped:
            execution = stopped.execution
        except NoApproval as refused:
            return {**_state_answer(state), "state": "not run", "reason": str(refused)}
        return _execution_answer(state, execution)

    async def _stored_answer(self, state: DecisionState) -> dict[str, Any]:
        """`executed`, from the report the queue stored for this revision: how the run ended and what ran."""
        executions = await self.gate.queue.client.get_executions(state.proposal_id)
        report = next((run for run in reversed(executions) if run.revision == state.revision), None)
        if report is None:
            return _state_answer(state)
        record = await self.gate.queue.client.get_proposal(state.proposal_id)
        planned = next(
            (info.call_count for info in record.revisions if info.revision == state.revision), None
        )
        answer = _report_answer(state, report, planned)
        self._answers[state.proposal_id] = answer
        return answer


def _state_answer(state: DecisionState) -> dict[str, Any]:
    answer: dict[str, Any] = {
        "proposal_id": state.proposal_id,
        "revision": state.revision,
        "plan_sha256": state.plan_sha256,
        "state": state.state,
    }
    if state.decided_by:
        answer["decided_by"] = state.decided_by
    if state.reason:
        answer["reason"] = state.reason
    if state.outcome_unknown:
        answer["outcome_unknown"] = True
        answer["note"] = (
            "a run claimed this approval and never reported: its calls may have been made; it is never "
            "run again"
        )
    return answer


def _execution_answer(state: DecisionState, execution: Execution) -> dict[str, Any]:
    """`executed`, how the run ended, and each call's result (or error) in plan order."""
    calls = []
    for call in execution.executed:
        entry: dict[str, Any] = {"seq": call.seq, "tool": call.tool, "status": call.answer.status}
        if call.answer.message:
            entry["message"] = call.answer.message
        if call.answer.result is not None:
            entry["result"] = call.answer.result
        calls.append(entry)
    answer = {**_state_answer(state), "state": "executed", "ended": execution.ended, "calls": calls}
    answer["summary"] = execution.summary()
    return answer


def _report_answer(state: DecisionState, report: StoredExecution, planned: int | None) -> dict[str, Any]:
    """The answer `_execution_answer` gives, rebuilt from the report the queue stored."""
    calls = []
    for call in report.calls:
        found = call.get("outcome")
        outcome: Mapping[str, Any] = found if isinstance(found, Mapping) else {}
        entry: dict[str, Any] = {
            "seq": call.get("seq"),
            "tool": call.get("tool"),
            "status": outcome.get("status"),
        }
        if outcome.get("message"):
            entry["message"] = outcome["message"]
        if outcome.get("result") is not None:
            entry["result"] = outcome["result"]
        calls.append(entry)
    answer = {**_state_answer(state), "state": "executed", "ended": report.ended, "calls": calls}
    summary = f"the real run of {state.proposal_id} revision {state.revision} {report.ended or 'ended'}"
    summary += f"; sent {len(calls)}{f' of {planned}' if planned is not None else ''} calls"
    answer["summary"] = summary + (f": {report.note}" if report.note else "")
    return answer
