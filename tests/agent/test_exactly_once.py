"""Exactly the approved plan, exactly once, counted where it matters: the writes the real sample API received.

Every test runs the real sample ticket API on loopback; the queue is the real `reviewer serve` process,
or, where the test must move the queue's clock, the same service in-process with an injected clock.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer.agent import (
    Approval,
    HttpRequest,
    NotApproved,
    OffTarget,
    PlanStop,
    QueueAgent,
    RunEnded,
    RunStopped,
    dry_run,
    execute_approved,
    local_approval,
    real_run,
    write_tool,
)
from reviewer.plan.proposal import Proposal, parse_proposal, plan_sha256
from reviewer.queue.client import QueueClient
from reviewer.reading.analysis import Analysis
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from tests.agent.fixtures import Queue
from tests.agent.helpers import received
from tests.builders import proposal_document
from tests.queue_harness import unique_id

ToolCall = Callable[[], Awaitable[Any]]
_ids = iter(range(1, 1_000_000))


def real_writes(sample_api: RunningSampleApi) -> list[tuple[str, str]]:
    """(method, path) of every write the API received without the dry-run parameter, in order."""
    return [(entry["method"], entry["path"]) for entry in received(sample_api) if not entry["query"]]


def close(ticket: str) -> ToolCall:
    return lambda: tools.update_ticket(id=ticket, status="closed")


def create(title: str = "Printer on fire") -> ToolCall:
    return lambda: tools.create_ticket(title=title)


async def plan_of(base_url: str, *calls: ToolCall, prefix: str = "once") -> Proposal:
    """The calls recorded (nothing sent) as a proposal for `base_url`: what a reviewer approves."""
    async with dry_run("record") as recording:
        for call in calls:
            await call()
    return recording.to_proposal(
        proposal_id=f"{prefix}-{next(_ids)}",
        title="test plan",
        agent=tools.AGENT,
        target=tools.target(base_url),
    )


def run_locally(sample_api: RunningSampleApi, approval: Approval, task: Any = None) -> Any:
    async def run() -> Any:
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
            return await execute_approved(task, approval, client=api)

    return asyncio.run(run())


def test_five_parallel_calls_under_a_one_call_plan_make_one_write(sample_api: RunningSampleApi) -> None:
    """A model's parallel tool calls: five identical creates at once, one approved. One is sent; the
    other four are refused before sending, whatever order they reach the executor in."""
    approval = local_approval(asyncio.run(plan_of(sample_api.base_url, create())))

    async def five_at_once() -> None:
        await asyncio.gather(*(create()() for _ in range(5)), return_exceptions=True)

    execution = run_locally(sample_api, approval, five_at_once)
    assert real_writes(sample_api) == [("POST", "/v1/tickets")]
    assert [call.seq for call in execution.executed] == [1]
    assert execution.stop is not None and execution.ended == "stopped"


def test_parallel_calls_run_in_plan_order_or_not_at_all(sample_api: RunningSampleApi) -> None:
    """Approved [close t1, close t2]: gathered in that order, each is sent once; gathered the other
    way round, the first to arrive is not the plan's first call, so the run stops and sends nothing."""
    approval = local_approval(asyncio.run(plan_of(sample_api.base_url, close("t1"), close("t2"))))

    async def gathered(*calls: ToolCall) -> None:
        await asyncio.gather(*(call() for call in calls), return_exceptions=True)

    in_order = run_locally(sample_api, approval, lambda: gathered(close("t1"), close("t2")))
    assert real_writes(sample_api) == [("PATCH", "/v1/tickets/t1"), ("PATCH", "/v1/tickets/t2")]
    assert in_order.ended == "completed" and in_order.ok

    sample_api.store.reset()
    reversed_order = run_locally(sample_api, approval, lambda: gathered(close("t2"), close("t1")))
    assert real_writes(sample_api) == []
    assert reversed_order.stop is not None and reversed_order.stop.position == 1


def test_parallel_calls_in_a_dry_run_get_distinct_increasing_seqs() -> None:
    async def record() -> Proposal:
        async with dry_run("record") as recording:
            await asyncio.gather(close("t1")(), close("t2")(), close("t3")())
        return recording.to_proposal(
            proposal_id="parallel-dry", title="t", agent=tools.AGENT, target=tools.target("http://x")
        )

    proposal = asyncio.run(record())
    assert [call.seq for call in proposal.calls] == [1, 2, 3]
    assert [call.args["id"] for call in proposal.calls] == ["t1", "t2", "t3"]


def test_a_task_spawned_inside_a_run_cannot_write_after_the_run_ended(sample_api: RunningSampleApi) -> None:
    approval = local_approval(asyncio.run(plan_of(sample_api.base_url, close("t1"), close("t2"))))
    outcome: list[BaseException] = []

    async def scenario() -> None:
        release = asyncio.Event()

        async def straggler() -> None:
            await release.wait()
            try:
                await close("t2")()
            except RunEnded as refused:
                outcome.append(refused)

        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
            async with real_run(approval, client=api) as execution:
                await close("t1")()
                spawned = asyncio.create_task(straggler())  # inherits the run's context
            release.set()
            await spawned
            assert execution.ended == "stopped"

    asyncio.run(scenario())
    assert [type(error) for error in outcome] == [RunEnded]
    assert real_writes(sample_api) == [("PATCH", "/v1/tickets/t1")]


@pytest.mark.parametrize(
    "path",
    [
        "http://evil.example/v1/tickets/t1",
        "//evil.example/v1/tickets/t1",
        "/v1/../../admin/t1",
        "/v1/tickets/%2e%2e/%2E%2E/admin",
        "/v1/tickets/..%2f..%2fadmin",
    ],
)
def test_a_request_that_leaves_the_approved_base_url_is_refused_before_sending(
    sample_api: RunningSampleApi, path: str
) -> None:
    """The check is on the URL as httpx will send it, after merging with the client's base URL."""
    escaping_call = {
        "tool": "update_ticket",
        "effect": "update",
        "args": {"id": "t1"},
        "request": {"method": "PATCH", "path": path, "body": {"status": "closed"}},
    }
    target = {"api": "sample", "base_url": f"{sample_api.base_url}/v1"}
    document = proposal_document(
        [escaping_call], proposal_id=f"escape-{next(_ids)}", via="record", target=target
    )
    approval = local_approval(parse_proposal(json.dumps(document).encode(), "test"))
    sent: list[httpx.Request] = []

    async def replay() -> Any:
        async def note(request: httpx.Request) -> None:
            sent.append(request)

        hooks = {"request": [note]}
        async with httpx.AsyncClient(base_url=f"{sample_api.base_url}/v1", event_hooks=hooks) as api:
            return await execute_approved(None, approval, client=api)

    execution = asyncio.run(replay())
    assert isinstance(execution.stop, OffTarget), execution.stop
    assert sent == [] and real_writes(sample_api) == []


def test_a_leading_zero_names_the_same_call_for_the_screen_and_the_executor(
    sample_api: RunningSampleApi,
) -> None:
    """`<id from call 01>`: the analysis shows call 1's provenance, and the replay sends call 1's id."""
    base = asyncio.run(plan_of(sample_api.base_url, create(), close("t1")))
    document = json.loads(json.dumps(msgspec_builtins(base)))
    document["calls"][1]["args"]["mergedInto"] = "<id from call 01>"
    document["calls"][1]["request"]["body"]["mergedInto"] = "<id from call 01>"
    proposal = parse_proposal(json.dumps(document).encode(), "test")
    row = Analysis(proposal).row(1)
    assert row.depends_on == (1,)
    assert "#1 create_ticket" in row.args_summary
    execution = run_locally(sample_api, local_approval(proposal))
    assert execution.ok
    merged = [entry["body"] for entry in received(sample_api) if entry["method"] == "PATCH"]
    assert merged == [{"status": "closed", "mergedInto": "tk-4"}]


@write_tool(effect="other", produces=("tickets",))
def reset_tickets() -> HttpRequest:
    """The sample API's reset: it answers the list of ticket ids, `{"tickets": ["t1", ...]}`."""
    return HttpRequest("POST", "/v1/reset")


def msgspec_builtins(proposal: Proposal) -> Any:
    import msgspec

    return msgspec.to_builtins(proposal)


# --- with the real queue ---------------------------------------------------------------------


async def approved(queue: Queue, proposal: Proposal) -> Approval:
    async with (
        QueueClient(queue.url, queue.agent_token) as agent_client,
        QueueClient(queue.url, queue.reviewer_token) as reviewer,
    ):
        agent = QueueAgent(agent_client, poll_interval=0.05)
        answer = await agent.submit(proposal)
        await reviewer.decide(proposal.proposal_id, 1, answer.plan_sha256, "approve", "ok")
        return await agent.wait_for_decision(proposal.proposal_id, 1, timeout=5)


def test_two_runners_holding_one_approval_write_the_plan_once(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """Two runners start together with the same approval: one claims it and writes; the other is
    refused by the queue before it sends anything, and the queue names the run that holds it."""
    proposal = asyncio.run(plan_of(sample_api.base_url, close("t1"), close("t2"), prefix="two-runners"))
    approval = asyncio.run(approved(queue, proposal))

    async def both() -> list[Any]:
        refused = asyncio.Event()

        async def after_the_refusal(request: httpx.Request) -> None:
            # The runner holding the claim writes only once the other was refused: on a slow machine it
            # could otherwise finish first, and the other would meet a used approval, not a held one.
            await asyncio.wait_for(refused.wait(), 30)

        async def runner() -> Any:
            async with (
                QueueClient(queue.url, queue.agent_token) as client,
                httpx.AsyncClient(
                    base_url=sample_api.base_url, event_hooks={"request": [after_the_refusal]}
                ) as api,
            ):
                try:
                    return await QueueAgent(client).execute(approval, client=api)
                except NotApproved:
                    refused.set()
                    raise

        return await asyncio.gather(runner(), runner(), return_exceptions=True)

    results = asyncio.run(both())
    refused = [result for result in results if isinstance(result, NotApproved)]
    assert len(refused) == 1, results
    assert "already holds" in str(refused[0])
    assert real_writes(sample_api) == [("PATCH", "/v1/tickets/t1"), ("PATCH", "/v1/tickets/t2")]


def test_a_task_that_raises_after_its_first_write_is_reported_and_never_runs_again(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    proposal = asyncio.run(plan_of(sample_api.base_url, close("t1"), close("t2"), prefix="raises"))
    approval = asyncio.run(approved(queue, proposal))

    async def model_times_out() -> None:
        await close("t1")()
        raise TimeoutError("the model did not answer")

    async def run(task: Any) -> Any:
        async with (
            QueueClient(queue.url, queue.agent_token) as client,
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
        ):
            return await QueueAgent(client).execute(approval, client=api, task=task)

    with pytest.raises(RunStopped, match="failed") as failed:
        asyncio.run(run(model_times_out))
    assert isinstance(failed.value.__cause__, TimeoutError)
    assert [call.seq for call in failed.value.execution.executed] == [1]

    async def stored() -> Any:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            return await reviewer.get_executions(proposal.proposal_id), await reviewer.decision_state(
                proposal.proposal_id
            )

    executions, state = asyncio.run(stored())
    assert [(report.ended, len(report.calls)) for report in executions] == [("failed", 1)]
    assert "TimeoutError" in (executions[0].note or "")
    assert state.state == "executed"
    with pytest.raises(NotApproved, match="already used"):
        asyncio.run(run(None))
    assert real_writes(sample_api) == [("PATCH", "/v1/tickets/t1")]


def test_a_cancelled_run_is_reported_as_cancelled(queue: Queue, sample_api: RunningSampleApi) -> None:
    proposal = asyncio.run(plan_of(sample_api.base_url, close("t1"), close("t2"), prefix="cancelled"))
    approval = asyncio.run(approved(queue, proposal))

    async def scenario() -> Any:
        first_sent = asyncio.Event()

        async def slow_task() -> None:
            await close("t1")()
            first_sent.set()
            await asyncio.Event().wait()  # a framework waiting on a model that never answers

        async with (
            QueueClient(queue.url, queue.agent_token) as client,
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
        ):
            running = asyncio.create_task(QueueAgent(client).execute(approval, client=api, task=slow_task))
            await first_sent.wait()
            running.cancel()
            with pytest.raises(asyncio.CancelledError):
                await running
            return await client.get_executions(proposal.proposal_id)

    [report] = asyncio.run(scenario())
    assert (report.ended, [call["seq"] for call in report.calls]) == ("cancelled", [1])


def test_a_run_that_outlives_its_approval_is_still_reported(
    tmp_path: Path, sample_api: RunningSampleApi
) -> None:
    """The queue's clock passes the approval's expiry and the claim's lease while the run is going:
    the reviewer sees it claimed, then the report is stored and the proposal is executed."""
    now = [1_800_000_000.0]
    service = create_app(tmp_path / "q.sqlite3", clock=lambda: now[0], approval_ttl=60, claim_lease=120)
    tokens = {name: mint_token() for name in ("alice", "agent")}
    service.state.store.create_token("alice", "reviewer", hash_token(tokens["alice"]))
    service.state.store.create_token("agent", "agent", hash_token(tokens["agent"]))
    proposal = asyncio.run(plan_of(sample_api.base_url, close("t1"), close("t2"), prefix="slow"))
    seen_mid_run: list[str] = []

    async def scenario() -> Any:
        def queue_client(name: str) -> QueueClient:
            transport = httpx.ASGITransport(app=service)
            return QueueClient("http://127.0.0.1:8470", tokens[name], transport=transport)

        async with (
            queue_client("agent") as agent_client,
            queue_client("alice") as alice,
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
        ):
            agent = QueueAgent(agent_client, poll_interval=0)
            answer = await agent.submit(proposal)
            await alice.decide(proposal.proposal_id, 1, answer.plan_sha256, "approve")
            approval = await agent.wait_for_decision(proposal.proposal_id, 1, timeout=5)

            async def slow_task() -> None:
                await close("t1")()
                now[0] += 600  # past the approval's hour and the claim's lease
                state = await alice.decision_state(proposal.proposal_id)
                seen_mid_run.append(f"{state.state} unknown={state.outcome_unknown}")
                await close("t2")()

            execution = await agent.execute(approval, client=api, task=slow_task)
            return execution, await alice.decision_state(proposal.proposal_id)

    execution, state = asyncio.run(scenario())
    assert seen_mid_run == ["claimed unknown=True"]
    assert execution.ok and state.state == "executed"
    assert real_writes(sample_api) == [("PATCH", "/v1/tickets/t1"), ("PATCH", "/v1/tickets/t2")]


# --- the property -----------------------------------------------------------------------------

TICKETS = ("t1", "t2", "t3")
CALLS: dict[str, ToolCall] = {
    **{f"close {ticket}": close(ticket) for ticket in TICKETS},
    **{
        f"reopen {ticket}": (lambda ticket=ticket: tools.update_ticket(id=ticket, status="open"))
        for ticket in TICKETS
    },
    "create": create(),
}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    plan=st.lists(st.sampled_from(sorted(CALLS)), min_size=1, max_size=4),
    attempts=st.lists(st.sampled_from(sorted(CALLS)), min_size=1, max_size=8),
    concurrent=st.integers(min_value=1, max_value=4),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_property_real_writes_are_a_prefix_of_the_plan_each_at_most_once(
    sample_api: RunningSampleApi, plan: list[str], attempts: list[str], concurrent: int, seed: int
) -> None:
    """Any plan, any calls the model makes, in batches of parallel calls that yield to each other at
    random: what the API receives is the plan's first k calls, in order, each once."""
    sample_api.store.reset()
    approval = local_approval(asyncio.run(plan_of(sample_api.base_url, *(CALLS[name] for name in plan))))
    expected = [_write_of(call) for call in approval.proposal.calls]
    shuffle = random.Random(seed)

    async def attempt(name: str) -> None:
        for _ in range(shuffle.randrange(3)):
            await asyncio.sleep(0)
        with contextlib.suppress(PlanStop):
            await CALLS[name]()

    async def model() -> None:
        for start in range(0, len(attempts), concurrent):
            await asyncio.gather(*(attempt(name) for name in attempts[start : start + concurrent]))

    run_locally(sample_api, approval, model)
    writes = real_writes(sample_api)
    assert writes == expected[: len(writes)]


def _write_of(call: Any) -> tuple[str, str]:
    return (call.request.method, call.request.path)


def test_the_approval_digest_is_what_the_queue_holds() -> None:
    """Guard for the helpers above: a recorded plan's digest is stable across a round trip."""
    proposal = asyncio.run(plan_of("http://127.0.0.1:1", close("t1")))
    assert plan_sha256(parse_proposal(json.dumps(msgspec_builtins(proposal)).encode(), "t")) == plan_sha256(
        proposal
    )


def test_a_placeholder_into_an_array_result_is_resolved_by_the_replay(sample_api: RunningSampleApi) -> None:
    """`<tickets.0 from call 1>`: the first item of the list a real write answered, sent by the HTTP
    executor as the next call's path."""
    proposal = asyncio.run(
        plan_of(
            sample_api.base_url,
            lambda: reset_tickets(),
            lambda: tools.update_ticket(id="<tickets.0 from call 1>", status="closed"),
        )
    )
    execution = run_locally(sample_api, local_approval(proposal))
    assert execution.ok, execution.summary()
    assert [call.sent.path for call in execution.executed if call.sent] == ["/v1/reset", "/v1/tickets/t1"]
    assert real_writes(sample_api) == [("PATCH", "/v1/tickets/t1")]  # the reset empties the API's log


@pytest.mark.parametrize(
    "calls",
    [
        [
            {"tool": "close", "effect": "update", "args": {"id": "<id from call 2>"}},
            {"tool": "open", "effect": "create", "args": {"title": "x"}},
        ],
        [
            {"seq": 1, "tool": "open", "effect": "create", "args": {"title": "x"}},
            {"seq": 3, "tool": "close", "effect": "update", "args": {"id": "<id from call 2>"}},
        ],
    ],
    ids=["a-later-call", "an-earlier-seq-the-plan-lacks"],
)
def test_the_queue_refuses_a_placeholder_that_names_no_earlier_call(
    queue: Queue, calls: list[dict[str, Any]]
) -> None:
    """A plan whose call depends on call 2 could only stop half-run once approved, whether call 2
    comes later or the plan has none (seqs 1 and 3): refused (422) with the placeholder named, before
    any reviewer sees it."""
    document = proposal_document(calls, proposal_id=unique_id("missing-ref"))
    response = httpx.post(
        f"{queue.url}/v1/proposals",
        json=document,
        headers={"Authorization": f"Bearer {queue.agent_token}"},
    )
    assert response.status_code == 422, response.text
    assert "<id from call 2> names no earlier call" in response.json()["message"]
