"""A plan built across many requests: calls recorded as they arrive, one submission, then one real run.

An MCP host or a graph runtime calls each tool in a request (a task) of its own, so no `async with
dry_run(...)` block can span the plan, and a host that waits minutes for a reviewer inside one call times
out. `PlanSession` holds the plan between requests instead: `call` records, `submit` sends it to the
queue and returns at once, `status` answers the state and, the first time it finds the plan approved,
claims it and runs it once. Whatever asks again gets the stored answer; nothing runs twice.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from reviewer.agent.errors import AgentError, NoApproval, RunStopped
from reviewer.agent.execution import Execution
from reviewer.agent.gate import Gate
from reviewer.agent.http_values import CallAnswer
from reviewer.agent.runs import Recording
from reviewer.agent.tools import WriteTool
from reviewer.queue.client import NotFound
from reviewer.queue.messages import DecisionState, SubmissionAnswer


class PlanInProgress(AgentError):
    """A write came after the plan was submitted and before its decision and run ended."""

    def __init__(self, proposal_id: str) -> None:
        self.proposal_id = proposal_id
        super().__init__(
            f"plan {proposal_id} is submitted and not ended yet; this call was not recorded. A new plan "
            f"starts after this one ends: ask reviewer_plan_status for {proposal_id} until it is "
            "executed, rejected or expired, then call the tool again."
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

    def __init__(self, gate: Gate, *, title: str | None = None) -> None:
        self.gate = gate
        self.default_title = title
        self._recording: Recording | None = None
        self._tools: dict[str, WriteTool] = {}
        self._submitted: SubmissionAnswer | None = None
        self._answers: dict[str, dict[str, Any]] = {}
        self._lock = asyncio.Lock()

    async def call(self, tool: WriteTool, arguments: Mapping[str, Any]) -> CallAnswer:
        """Record one call of `tool` in the plan being built (its arguments already checked)."""
        async with self._lock:
            if self._submitted is not None:
                raise PlanInProgress(self._submitted.proposal_id)
            if self._recording is None:
                self._recording = self.gate.recorder()
                await self._recording._start()
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
            await recording._finish()
            proposal = self.gate.propose(recording, title=title or self.default_title or "Agent plan")
            answer = await self.gate.submit(proposal)
            self._submitted = answer
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
            if not ours and state.state == "approved":
                return {
                    **_state_answer(state),
                    "note": "this gate holds no plan under this id (another gate submitted it, or this one "
                    "restarted), so it runs nothing; the approval stays unused until it expires",
                }
            if not ours or state.state in ("pending", "claimed", "executed"):
                return _state_answer(state)
            if state.state != "approved":
                self._submitted = None  # rejected or expired: the plan ended, a new one may start
                return _state_answer(state)
            answer = await self._run(proposal_id, state)
            self._answers[proposal_id] = answer
            self._submitted = None
            return answer

    async def _run(self, proposal_id: str, state: DecisionState) -> dict[str, Any]:
        try:
            approval = await self.gate.approval(proposal_id)
            execution = await self.gate.execute(approval, tools=self._tools.values())
        except RunStopped as stopped:
            execution = stopped.execution
        except NoApproval as refused:
            return {**_state_answer(state), "state": "not run", "reason": str(refused)}
        return _execution_answer(state, execution)


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
