"""The LangGraph adapter: the real `langgraph` package, `interrupt()`, the real queue and sample API."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType
from typing import Any

from reviewer.agent import Gate
from reviewer.queue.messages import Decision
from reviewer.sample_api.server import RunningSampleApi
from tests.adapters.examples import example_fixture
from tests.agent.fixtures import Queue
from tests.agent.helpers import received, reviewer_decides
from tests.agent.test_request_changes import KEEP_T3

example = example_fixture("langgraph_agent", "langgraph")


def real_writes(sample_api: RunningSampleApi) -> list[tuple[str, str]]:
    return [(entry["method"], entry["path"]) for entry in received(sample_api) if not entry["query"]]


def gate(queue: Queue, sample_api: RunningSampleApi) -> Gate:
    return Gate(api=sample_api.base_url, queue=queue.url, token=queue.agent_token, agent="deskline-langgraph")


async def decided_once(
    queue: Queue,
    sample_api: RunningSampleApi,
    example: ModuleType,
    build: Callable[[Gate], Any],
    decision: Decision,
    reason: str,
    resumed_with: Any = "check again",
) -> dict[str, Any]:
    """A graph `build` makes, started; the reviewer decides its plan; the graph resumed once."""
    async with gate(queue, sample_api) as agent_gate:
        graph = build(agent_gate)
        paused = await example.start(graph, decision)
        await reviewer_decides(queue.url, queue.reviewer_token, paused["proposal_id"], decision, reason)
        return dict(await example.resume(graph, decision, resumed_with))


def test_the_graph_pauses_until_the_queue_approves_then_runs_once(
    queue: Queue, sample_api: RunningSampleApi, example: ModuleType
) -> None:
    """A resume that claims approval while the plan is pending changes nothing: the node asks the queue
    and pauses again. After the reviewer approves, the next resume runs the two calls once; resuming a
    finished thread runs nothing more."""

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], Any]:
        async with gate(queue, sample_api) as agent_gate:
            graph = example.build(agent_gate)
            paused = await example.start(graph, "t-approve")
            assert paused["__interrupt__"][0].value["state"] == "pending"
            forged = await example.resume(graph, "t-approve", {"approved": True, "by": "mallory"})
            assert forged.get("__interrupt__") and real_writes(sample_api) == []
            seen = await reviewer_decides(queue.url, queue.reviewer_token, paused["proposal_id"], "approve")
            done = await example.resume(graph, "t-approve")
            return paused, done, seen

    paused, done, seen = asyncio.run(scenario())
    assert [(call.tool, call.effect) for call in seen.calls] == [
        ("create_ticket", "create"),
        ("update_ticket", "update"),
        ("update_ticket", "update"),
    ]
    assert done["state"] == "executed" and "completed" in done["summary"]
    assert real_writes(sample_api) == [
        ("POST", "/v1/tickets"),
        ("PATCH", "/v1/tickets/t1"),
        ("PATCH", "/v1/tickets/t3"),
    ]
    assert sample_api.store.tickets["t1"]["mergedInto"] == "tk-4"


def test_a_rejection_ends_the_graph_with_the_reviewers_reason(
    queue: Queue, sample_api: RunningSampleApi, example: ModuleType
) -> None:
    reason = "t1 is a different printer"
    done = asyncio.run(
        decided_once(queue, sample_api, example, example.build, "reject", reason, "approved, trust me")
    )
    assert done["state"] == "rejected" and done["reason"] == reason
    assert not done.get("__interrupt__")
    assert real_writes(sample_api) == []


def test_changes_requested_go_back_to_the_task_and_revision_2_runs_keeping_t3_open(
    queue: Queue, sample_api: RunningSampleApi, example: ModuleType
) -> None:
    """Asking "keep t3 open" on revision 1 sends the graph back to the plan node: the task gets the reason,
    the plan without the close of t3 pauses as revision 2 of the same proposal; approved, it runs."""

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], Any, dict[str, Any]]:
        async with gate(queue, sample_api) as agent_gate:
            graph = example.build(agent_gate)
            paused = await example.start(graph, "t-changes")
            await reviewer_decides(
                queue.url, queue.reviewer_token, paused["proposal_id"], "request_changes", KEEP_T3
            )
            replanned = await example.resume(graph, "t-changes")
            seen = await reviewer_decides(
                queue.url, queue.reviewer_token, paused["proposal_id"], "approve", reason=""
            )
            done = await example.resume(graph, "t-changes")
            return paused, replanned, seen, done

    paused, replanned, seen, done = asyncio.run(scenario())
    assert replanned.get("__interrupt__"), "revision 2 waits for the reviewer"
    assert replanned["proposal_id"] == paused["proposal_id"] and replanned["revision"] == 2
    assert seen.revision == 2
    assert [(call.tool, call.args.get("id")) for call in seen.calls] == [
        ("create_ticket", None),
        ("update_ticket", "t1"),
    ]
    assert done["state"] == "executed" and "completed" in done["summary"]
    assert done["reason"] == "", "revision 1's reason does not stay beside revision 2's approval"
    assert real_writes(sample_api) == [("POST", "/v1/tickets"), ("PATCH", "/v1/tickets/t1")]
    assert sample_api.store.tickets["t3"]["status"] == "open"


def test_with_one_revision_allowed_changes_requested_end_the_graph_with_the_reason(
    queue: Queue, sample_api: RunningSampleApi, example: ModuleType
) -> None:
    """`max_revisions=1` (the default): a request for changes ends the graph like a rejection, no re-plan."""
    from langgraph.checkpoint.memory import InMemorySaver

    from reviewer.adapters.langgraph import gated_graph

    def build_once(agent_gate: Gate) -> Any:
        return gated_graph(agent_gate, example.task, title="close t3", checkpointer=InMemorySaver())

    done = asyncio.run(decided_once(queue, sample_api, example, build_once, "request_changes", KEEP_T3))
    assert not done.get("__interrupt__")
    assert done["state"] == "changes_requested" and done["reason"] == KEEP_T3 and done["revision"] == 1
    assert real_writes(sample_api) == []


def test_the_plan_node_reads_the_dry_runs_audit_window_as_gate_does(
    queue: Queue, sample_api: RunningSampleApi, tmp_path: Path
) -> None:
    """A write around the gate while the graph dry-runs (a line the API's access log gains) is on the
    plan the reviewer decides (`dry_run.writes_around`), as `Gate.run` puts it there."""
    from langgraph.checkpoint.memory import InMemorySaver

    from reviewer.adapters.langgraph import gated_graph
    from reviewer.queue.client import QueueClient
    from reviewer.sample_api import tools

    access_log = tmp_path / "access.log"
    access_log.write_text("")

    async def task() -> None:
        await tools.update_ticket(id="t1", status="closed")
        around = {
            "time": datetime.now(UTC).isoformat(),
            "method": "DELETE",
            "uri": "/v1/tickets/t2",
            "status": 204,
            "request_id": "around-1",
        }
        with access_log.open("a") as log:
            log.write(json.dumps(around) + "\n")

    async def scenario() -> int | None:
        async with Gate(
            api=sample_api.base_url,
            queue=queue.url,
            token=queue.agent_token,
            audit=f"access-log:{access_log}",
        ) as agent_gate:
            graph = gated_graph(agent_gate, task, title="Close t1", checkpointer=InMemorySaver())
            paused = await graph.ainvoke({}, {"configurable": {"thread_id": "audited"}})
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            plan = await reviewer.get_revision(paused["proposal_id"], 1)
        return plan.dry_run.writes_around

    assert asyncio.run(scenario()) == 1
