"""A LangGraph approval gate (`pip install reviewer-gate[langgraph]`): plan, approval on `interrupt()`,
execute.

    graph = gated_graph(gate, my_task, title="Close t1 and t2", checkpointer=InMemorySaver())
    state = await graph.ainvoke({}, config)                 # dry run, submit; pauses at the approval
    state = await graph.ainvoke(Command(resume="go"), config)  # asks the queue; runs once if approved

The approval node never trusts the value a graph is resumed with: anyone who can resume a thread could
write "approved" there. It asks the queue each time it runs, pauses again while the plan is pending, and
ends the graph with the reviewer's reason when it is rejected. Only the queue's approval, claimed by the
execute node, lets the approved calls run, once.

With `max_revisions=N` (more than 1), a request for changes goes back to the plan node: a task that takes
a keyword argument `feedback` gets the reviewer's `Feedback` (put `str(feedback)` in front of your model
as a message), and the new plan is submitted as the next revision of the same proposal.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, TypedDict

from langgraph.graph import END, START, StateGraph
from langgraph.types import interrupt

from reviewer.agent.errors import NoApproval, RunStopped
from reviewer.agent.feedback import Feedback, with_feedback
from reviewer.agent.gate import Gate
from reviewer.agent.replan import Replan, next_revision
from reviewer.agent.tools import GatedTool, WriteTool


class GateState(TypedDict, total=False):
    """What the graph carries between the nodes: the queue's own words, never a local verdict."""

    proposal_id: str
    revision: int
    plan_sha256: str
    state: str
    reason: str
    decided_by: str
    summary: str


class GatedNodes:
    """The three nodes; add them to a graph of your own, or let `gated_graph` wire them."""

    def __init__(
        self,
        gate: Gate,
        task: Callable[[], Awaitable[Any]],
        *,
        title: str,
        tools: Iterable[WriteTool | GatedTool] = (),
        max_revisions: int = 1,
    ) -> None:
        self.replan = Replan(max_revisions)
        self.gate = gate
        self.task = task
        self.title = title
        self.tools = tuple(tools)

    async def plan(self, state: GateState) -> GateState:
        """Dry-run the task and submit the plan; answers at once (the approval node waits). After a
        request for changes, the task gets the reviewer's words and the plan is the next revision. With
        the gate's audit source, the dry run's window is read for writes the gate did not make, and the
        plan carries them (`dry_run.writes_around`), as `Gate.run` does."""
        feedback = self.feedback(state)
        recording = await self.gate.dry_run(with_feedback(self.task, feedback))
        proposal = self.gate.propose(
            recording,
            title=self.title,
            proposal_id=state["proposal_id"] if feedback else None,
            revision=next_revision(feedback),
        )
        submission = await self.gate.submit(proposal)
        return {
            "proposal_id": submission.proposal_id,
            "revision": submission.revision,
            "plan_sha256": submission.plan_sha256,
            "state": submission.state,
        }

    async def approval(self, state: GateState) -> GateState:
        """Pause until the queue has decided; the resume value is only a nudge to ask the queue again."""
        # Each resume re-runs this node; every interrupt already answered returns its resume value, and
        # the queue is asked again after each one, so the first pending answer pauses the graph anew.
        while True:
            decision = await self.gate.status(state["proposal_id"])
            if decision.state != "pending":
                break
            interrupt(
                {"proposal_id": decision.proposal_id, "state": "pending", "ask": "resume to check again"}
            )
        # always both keys, so an earlier revision's reason never stays in the state beside this one
        return {
            "state": decision.state,
            "revision": decision.revision,
            "reason": decision.reason or "",
            "decided_by": decision.decided_by or "",
        }

    async def execute(self, state: GateState) -> GateState:
        """Claim the approval and replay the approved calls once; the summary says how it ended."""
        try:
            approval = await self.gate.approval(state["proposal_id"])
            execution = await self.gate.execute(approval, tools=self.tools)
        except NoApproval as refused:
            return {"state": "not run", "reason": str(refused)}
        except RunStopped as stopped:
            return {"state": "executed", "summary": stopped.execution.summary()}
        return {"state": "executed", "summary": execution.summary()}

    @staticmethod
    def feedback(state: GateState) -> Feedback | None:
        """The reviewer's request for changes the graph came back to the plan node with, if any."""
        if state.get("state") != "changes_requested":
            return None
        return Feedback(state.get("reason", ""), state.get("decided_by") or "a reviewer", state["revision"])

    def after_approval(self, state: GateState) -> str:
        """Approved: execute; changes requested and a revision left: plan again; otherwise the end."""
        if state.get("state") == "approved":
            return "execute"
        if state.get("state") == "changes_requested" and self.replan.allows_after(state["revision"]):
            return "plan"
        return str(END)  # a str either way: without the langgraph extra, END's type is unknown


def gated_graph(
    gate: Gate,
    task: Callable[[], Awaitable[Any]],
    *,
    title: str,
    tools: Iterable[WriteTool | GatedTool] = (),
    checkpointer: Any = None,
    max_revisions: int = 1,
) -> Any:
    """plan -> approval -> execute (or the end, when the plan is not approved; or plan again, when a
    reviewer asked for changes and `max_revisions` allows another revision), compiled."""
    nodes = GatedNodes(gate, task, title=title, tools=tools, max_revisions=max_revisions)
    builder = StateGraph(GateState)
    builder.add_node("plan", nodes.plan)
    builder.add_node("approval", nodes.approval)
    builder.add_node("execute", nodes.execute)
    builder.add_edge(START, "plan")
    builder.add_edge("plan", "approval")
    builder.add_conditional_edges("approval", nodes.after_approval, ["execute", "plan", END])
    builder.add_edge("execute", END)
    return builder.compile(checkpointer=checkpointer)
