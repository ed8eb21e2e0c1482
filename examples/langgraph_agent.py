"""A LangGraph agent gated by the queue, against the sample ticket API.

Run `reviewer sample-api` and `reviewer serve`, mint an agent token, then:

    REVIEWER_AGENT_TOKEN=... python examples/langgraph_agent.py

The graph dry-runs the task, submits the plan and pauses on `interrupt()`. Approve it in `reviewer`, then
press enter here: the graph resumes, asks the queue (never the resume value) and runs the approved calls
once. The "model" is a scripted task: no API key needed. Ask for changes instead (key `c`) with "keep t3
open": the graph goes back to the task with your words, and its new plan comes to you as revision 2.
"""

from __future__ import annotations

import asyncio
import os
from typing import Any

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command

from reviewer.adapters.langgraph import gated_graph
from reviewer.agent import Feedback, Gate
from reviewer.sample_api.tools import AUDIT, DRY_RUN_QUERY, create_ticket, update_ticket


async def task(feedback: Feedback | None = None) -> None:
    """What the model decided to do: open a ticket, merge t1 into it and close t3. A model would get
    `str(feedback)` as a message; this script only reads whether the reviewer asked to keep t3 open."""
    ticket = await create_ticket(title="Printer on fire")
    await update_ticket(id="t1", status="closed", mergedInto=ticket["id"])
    if feedback is None or "keep t3 open" not in feedback.reason:
        await update_ticket(id="t3", status="closed")


def build(gate: Gate) -> Any:
    return gated_graph(
        gate,
        task,
        title="Merge t1 into a new ticket, close t3",
        checkpointer=InMemorySaver(),
        max_revisions=3,
    )


async def start(graph: Any, thread: str) -> dict[str, Any]:
    """Dry run and submit; returns at the approval's interrupt."""
    return dict(await graph.ainvoke({}, {"configurable": {"thread_id": thread}}))


async def resume(graph: Any, thread: str, said: Any = "check again") -> dict[str, Any]:
    """Resume at the approval; whatever `said` is, the node asks the queue."""
    return dict(await graph.ainvoke(Command(resume=said), {"configurable": {"thread_id": thread}}))


async def main(api_url: str, queue_url: str) -> None:
    # The sample API documents its dry-run parameter; an API without one keeps the default, "record".
    server_dry_run = {"backend": "server", "dry_run_query": DRY_RUN_QUERY}
    async with Gate(
        api=api_url, queue=queue_url, audit=AUDIT, agent="deskline-langgraph", **server_dry_run
    ) as gate:
        graph = build(gate)
        state = await start(graph, "demo")
        print(f"submitted {state['proposal_id']}: approve it in `reviewer`, then press enter")
        while state.get("__interrupt__"):
            await asyncio.to_thread(input)
            state = await resume(graph, "demo")
        print(state.get("summary") or f"{state['state']}: {state.get('reason', '')}")


if __name__ == "__main__":
    asyncio.run(
        main(
            os.environ.get("SAMPLE_API", "http://127.0.0.1:8480"),
            os.environ.get("REVIEWER_QUEUE", "http://127.0.0.1:8470"),
        )
    )
