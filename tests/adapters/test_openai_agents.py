"""The OpenAI Agents SDK adapter: the real `agents` package, a scripted model, the real queue and API."""

from __future__ import annotations

import asyncio
import json
from types import ModuleType
from typing import Any

import pytest

from reviewer.agent import Feedback, Gate, NoActiveRun, PlanStop, ProposalRejected, local_approval
from reviewer.agent.execution import execute_approved
from reviewer.queue.client import QueueClient
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.adapters.examples import example_fixture
from tests.agent.fixtures import Queue
from tests.agent.helpers import first_pending, received, reviewer_decides_next
from tests.agent.test_request_changes import KEEP_T3, reviewer_asks_then_approves

example = example_fixture("openai_agents_agent", "agents")
AGENT_NAME = "deskline-openai-agents"


@pytest.fixture(scope="module")
def agents(example: ModuleType) -> ModuleType:
    """The SDK itself, imported with the example."""
    import agents

    return agents


def real_writes(sample_api: RunningSampleApi) -> list[tuple[str, str]]:
    return [(entry["method"], entry["path"]) for entry in received(sample_api) if not entry["query"]]


def test_function_tool_accepts_a_write_tool_unchanged(agents: ModuleType) -> None:
    """The SDK reads the declared parameters (no `**arguments`), their types and the docstring."""
    tool = agents.function_tool(tools.update_ticket)
    assert isinstance(tool, agents.FunctionTool)
    assert tool.name == "update_ticket"
    assert tool.description == "Change a ticket's status or title, or merge it into another ticket."
    schema = tool.params_json_schema
    assert set(schema["properties"]) == {"id", "status", "mergedInto", "title"}
    assert schema["properties"]["id"]["type"] == "string"
    assert "dryRun" not in json.dumps(schema)


def run_example(
    example: ModuleType, queue: Queue, sample_api: RunningSampleApi, decision: str, reason: str = "ok"
) -> Any:
    async def both() -> Any:
        return await asyncio.gather(
            example.main(sample_api.base_url, queue.url, poll_interval=0.05),
            reviewer_decides_next(queue.url, queue.reviewer_token, AGENT_NAME, decision, reason),  # type: ignore[arg-type]
            return_exceptions=True,
        )

    return asyncio.run(both())


def test_the_example_agent_runs_the_approved_plan_once(
    example: ModuleType, queue: Queue, sample_api: RunningSampleApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The scripted model's four calls (three of them parallel) reach the reviewer as a plan of a create,
    two updates chained on its id and the close of t3; after approval the API gets those writes, once."""
    monkeypatch.setenv("REVIEWER_AGENT_TOKEN", queue.agent_token)
    result, seen = run_example(example, queue, sample_api, "approve")
    assert not isinstance(result, BaseException), result
    assert [(call.tool, call.effect, call.args.get("mergedInto")) for call in seen.calls] == [
        ("create_ticket", "create", None),
        ("update_ticket", "update", "<id from call 1>"),
        ("update_ticket", "update", "<id from call 1>"),
        ("update_ticket", "update", None),
    ]
    assert [call.outcome.http_status for call in seen.calls if call.outcome][:3] == [201, 422, 422]
    assert real_writes(sample_api) == [
        ("POST", "/v1/tickets"),
        ("PATCH", "/v1/tickets/t1"),
        ("PATCH", "/v1/tickets/t2"),
        ("PATCH", "/v1/tickets/t3"),
    ]
    assert sample_api.store.tickets["t2"]["mergedInto"] == "tk-4"
    assert result.ok and result.verification.count("same once placeholders resolve") == 2


def test_a_rejection_reaches_the_agent_with_the_reviewers_reason(
    example: ModuleType, queue: Queue, sample_api: RunningSampleApi, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("REVIEWER_AGENT_TOKEN", queue.agent_token)
    result, _ = run_example(example, queue, sample_api, "reject", "merge into t5 instead")
    assert isinstance(result, ProposalRejected) and result.reason == "merge into t5 instead"
    assert real_writes(sample_api) == []


def test_changes_requested_reach_the_model_which_re_plans_revision_2_keeping_t3_open(
    agents: ModuleType,
    example: ModuleType,
    queue: Queue,
    sample_api: RunningSampleApi,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Revision 1 closes t3; the reviewer asks "keep t3 open" through the queue; the model gets the
    reason as a message after the task and plans without that call; revision 2 is approved and runs."""
    monkeypatch.setenv("REVIEWER_AGENT_TOKEN", queue.agent_token)
    model_inputs: list[Any] = []
    scripted = example.ScriptedModel.get_response

    async def recorded(model: Any, system_instructions: Any, input: Any, *args: Any, **kwargs: Any) -> Any:
        model_inputs.append(input)
        return await scripted(model, system_instructions, input, *args, **kwargs)

    monkeypatch.setattr(example.ScriptedModel, "get_response", recorded)

    async def reviewer() -> list[str]:
        async with QueueClient(queue.url, queue.reviewer_token) as client:
            first = await first_pending(client, lambda item: item.agent_name == AGENT_NAME, "revision 1")
        return await reviewer_asks_then_approves(queue, first.proposal_id)

    async def both() -> Any:
        return await asyncio.gather(
            example.main(sample_api.base_url, queue.url, poll_interval=0.05), reviewer()
        )

    result, decided = asyncio.run(both())
    assert decided == [
        "create_ticket,update_ticket,update_ticket,update_ticket",
        "create_ticket,update_ticket,update_ticket",
    ]
    plans = [user_messages(turn) for turn in model_inputs if not tool_answers(turn)]
    assert plans == [
        [example.TASK],
        [example.TASK, f"{Feedback(KEEP_T3, 'test-reviewer', 1)}. {example.REPLAN_ASK}"],
    ], "the first plan is asked with the task alone, the re-plan with the reviewer's reason after it"
    assert result.ok and result.submission.revision == 2
    assert result.feedback == (Feedback(KEEP_T3, "test-reviewer", 1),)
    assert real_writes(sample_api) == [
        ("POST", "/v1/tickets"),
        ("PATCH", "/v1/tickets/t1"),
        ("PATCH", "/v1/tickets/t2"),
    ]
    assert sample_api.store.tickets["t1"]["status"] == "closed"
    assert sample_api.store.tickets["t3"]["status"] == "open"


def user_messages(model_input: Any) -> list[str]:
    if isinstance(model_input, str):
        return [model_input]
    return [item["content"] for item in model_input if item.get("role") == "user"]


def tool_answers(model_input: Any) -> list[Any]:
    return [
        item for item in model_input if isinstance(item, dict) and item.get("type") == "function_call_output"
    ]


def test_the_model_reads_what_the_dry_run_proved(
    agents: ModuleType, example: ModuleType, sample_api: RunningSampleApi
) -> None:
    """The tool output the model gets in a dry run says that the 422 of a chained update is chain noise."""
    agent = example.build_agent()

    async def dry() -> Any:
        server_dry_run: dict[str, Any] = {"backend": "server", "dry_run_query": tools.DRY_RUN_QUERY}
        async with Gate(
            api=sample_api.base_url, queue="http://127.0.0.1:1", token="unused", **server_dry_run
        ) as gate:
            outputs: list[str] = []

            async def task() -> None:
                run = await agents.Runner.run(
                    agent, example.TASK, run_config=agents.RunConfig(tracing_disabled=True)
                )
                outputs.append(run.final_output)

            await gate.dry_run(task)
            return outputs[0]

    final = asyncio.run(dry())
    assert "chain noise" in final and "Nothing was written" in final
    assert real_writes(sample_api) == []


def test_a_stop_of_the_real_run_ends_the_agent_run_instead_of_reaching_the_model(
    agents: ModuleType, example: ModuleType, sample_api: RunningSampleApi
) -> None:
    """Re-sampled (task=), a model that calls a tool the plan does not hold is stopped before sending,
    and the stop ends `Runner.run`: the SDK's default would have handed it to the model as text."""

    async def plan() -> Any:
        async with Gate(api=sample_api.base_url, queue="http://127.0.0.1:1", token="unused") as gate:

            async def only_close_t1() -> None:
                await tools.update_ticket(id="t1", status="closed")

            recording = await gate.dry_run(only_close_t1)
            return gate.propose(recording, title="close t1")

    approval = local_approval(asyncio.run(plan()))
    agent = example.build_agent()

    async def resample() -> Any:
        import httpx

        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
            return await execute_approved(
                lambda: agents.Runner.run(
                    agent, example.TASK, run_config=agents.RunConfig(tracing_disabled=True)
                ),
                approval,
                client=api,
            )

    execution = asyncio.run(resample())
    assert execution.ended == "stopped" and execution.executed == []
    assert isinstance(execution.stop, PlanStop)
    assert "the plan's call 1 is update_ticket" in execution.stop.reason
    assert real_writes(sample_api) == []


def test_a_write_tool_outside_any_run_ends_the_agent_run(agents: ModuleType, example: ModuleType) -> None:
    """The SDK wraps what a tool raises in its UserError; the gate's own error is its cause."""
    agent = agents.Agent(
        name="loose", model=example.ScriptedModel(), tools=example.function_tools(tools.create_ticket)
    )
    with pytest.raises(agents.UserError) as raised:
        asyncio.run(agents.Runner.run(agent, "go", run_config=agents.RunConfig(tracing_disabled=True)))
    assert isinstance(raised.value.__cause__, NoActiveRun)
