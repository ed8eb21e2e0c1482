"""`Gate`, the one object for a gated run, against the real queue (`reviewer serve`) and the sample API."""

from __future__ import annotations

import asyncio
import inspect
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal

import httpx
import pytest

from reviewer.agent import (
    AuditUnavailable,
    CallAnswer,
    Gate,
    GateResult,
    MissingAgentToken,
    ProposalRejected,
    WritesKept,
    sdk_tool,
)
from reviewer.queue.client import QueueClient
from reviewer.queue.refusals import NotFound
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.helpers import received, reviewer_decides


def real_writes(sample_api: RunningSampleApi) -> list[tuple[str, str]]:
    return [(entry["method"], entry["path"]) for entry in received(sample_api) if not entry["query"]]


SERVER_DRY_RUN: dict[str, Any] = {"backend": "server", "dry_run_query": tools.DRY_RUN_QUERY}
"""The sample API documents its dry-run parameter, so its writes can be dry-run by the server."""


async def gated_run(
    queue: Queue,
    sample_api: RunningSampleApi,
    decision: Literal["approve", "reject", "request_changes"],
    reason: str = "looks right",
    task: Any = tools.reference_task,
    reviewer: Callable[[str], Awaitable[Any]] | None = None,
    max_revisions: int = 1,
    **options: Any,
) -> tuple[GateResult, Any]:
    """The agent runs the task through a gate while a reviewer decides it; the result and the proposal
    as the reviewer saw it (or what `reviewer`, given the proposal id, returns instead)."""
    proposal_id = f"gate-{uuid.uuid4().hex[:8]}"
    async with Gate(
        api=sample_api.base_url,
        queue=queue.url,
        token=queue.agent_token,
        audit=tools.AUDIT,
        agent="deskline-agent",
        poll_interval=0.05,
        decision_timeout=20,
        **(options or SERVER_DRY_RUN),
    ) as gate:
        result, seen = await asyncio.gather(
            gate.run(
                task, title=tools.REFERENCE_PLAN_TITLE, proposal_id=proposal_id, max_revisions=max_revisions
            ),
            reviewer(proposal_id)
            if reviewer
            else reviewer_decides(queue.url, queue.reviewer_token, proposal_id, decision, reason),
        )
    return result, seen


def test_an_approved_run_makes_exactly_the_approved_calls_once(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """The reviewer sees the four calls with their effects; after approval the API receives the
    plan's writes once, in order (the delete of the still-open t3 is refused, as in the real run of the
    reference scenario), and the run is reported and verified."""
    result, seen = asyncio.run(gated_run(queue, sample_api, "approve"))

    assert [(call.tool, call.effect) for call in seen.calls] == [
        ("create_ticket", "create"),
        ("update_ticket", "update"),
        ("update_ticket", "update"),
        ("delete_ticket", "delete"),
    ]
    assert seen.dry_run.via == "server" and seen.dry_run.writes_kept == 0
    assert real_writes(sample_api) == [
        ("POST", "/v1/tickets"),
        ("PATCH", "/v1/tickets/t1"),
        ("PATCH", "/v1/tickets/t2"),
        ("DELETE", "/v1/tickets/t3"),
    ]
    assert sample_api.store.tickets["t1"]["mergedInto"] == "tk-4"
    assert result.execution is not None and result.execution.ended == "completed"
    assert [call.answer.http_status for call in result.execution.executed] == [201, 200, 200, 409]
    assert result.stopped is not None and not result.ok
    with pytest.raises(type(result.stopped)):
        result.raise_for_stop()
    assert result.verification is not None
    assert result.verification.count("same once placeholders resolve") == 2

    async def state() -> str:
        async with QueueClient(queue.url, queue.agent_token) as agent:
            return (await agent.decision_state(result.proposal.proposal_id)).state

    assert asyncio.run(state()) == "executed"


def test_the_default_dry_run_records_and_sends_nothing_before_approval(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """No dry-run parameter is assumed: a gate told nothing records the writes, and the API receives
    them only once, after approval."""
    result, seen = asyncio.run(gated_run(queue, sample_api, "approve", backend="record"))
    assert seen.dry_run.via == "record" and seen.dry_run.write_requests == 0
    assert {call.outcome.status for call in seen.calls if call.outcome} == {"recorded"}
    assert len(real_writes(sample_api)) == 4 == len(sample_api.store.request_log)


def test_a_plan_that_succeeds_whole_is_ok(queue: Queue, sample_api: RunningSampleApi) -> None:
    async def close_two() -> None:
        await tools.update_ticket(id="t1", status="closed")
        await tools.update_ticket("t2", status="closed")  # positional, as a framework may call it

    result, _ = asyncio.run(gated_run(queue, sample_api, "approve", task=close_two))
    result.raise_for_stop()
    assert result.ok
    assert real_writes(sample_api) == [("PATCH", "/v1/tickets/t1"), ("PATCH", "/v1/tickets/t2")]


def test_a_rejection_returns_the_reviewers_reason_and_writes_nothing(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    result, _ = asyncio.run(gated_run(queue, sample_api, "reject", reason="t3 is still needed"))
    assert result.rejection_reason == "t3 is still needed"
    assert result.execution is None
    with pytest.raises(ProposalRejected, match="t3 is still needed"):
        result.raise_for_stop()
    assert real_writes(sample_api) == []


def test_a_dry_run_that_kept_writes_is_not_submitted(queue: Queue, sample_api: RunningSampleApi) -> None:
    """The API drops dryRun: the "dry" run wrote. The gate refuses to submit, so no reviewer is asked to
    approve writes that already happened; told to, it submits and the proposal carries the alarm."""
    sample_api.store.ignore_dry_run = True
    proposal_id = f"kept-{uuid.uuid4().hex[:8]}"

    async def attempt(allow: bool) -> str:
        async with Gate(
            api=sample_api.base_url,
            queue=queue.url,
            token=queue.agent_token,
            audit=tools.AUDIT,
            allow_kept_writes=allow,
            **SERVER_DRY_RUN,
        ) as gate:
            recording = await gate.dry_run(tools.reference_task)
            proposal = gate.propose(recording, title="kept", proposal_id=proposal_id)
            return (await gate.submit(proposal)).state

    with pytest.raises(WritesKept, match="kept 3 write"):
        asyncio.run(attempt(allow=False))

    async def in_queue() -> bool:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            try:
                await reviewer.get_proposal(proposal_id)
            except NotFound:
                return False
            return True

    assert not asyncio.run(in_queue())
    assert asyncio.run(attempt(allow=True)) == "pending"


def test_a_gate_without_a_token_says_where_to_get_one(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("REVIEWER_AGENT_TOKEN", raising=False)
    with pytest.raises(MissingAgentToken, match="REVIEWER_AGENT_TOKEN"):
        Gate(api="http://127.0.0.1:1")


def test_a_write_tool_has_the_signature_it_declares() -> None:
    """What frameworks read: the declared parameters, their annotations, the docstring, a coroutine."""
    signature = inspect.signature(tools.update_ticket)
    assert list(signature.parameters) == ["id", "status", "mergedInto", "title"]
    assert signature.parameters["status"].annotation == Literal["open", "closed"] | None
    assert signature.parameters["title"].default is None
    assert signature.return_annotation is CallAnswer
    assert inspect.iscoroutinefunction(tools.update_ticket)
    assert tools.update_ticket.__name__ == "update_ticket"
    assert tools.update_ticket.__doc__ == inspect.getdoc(tools.update_ticket.spec.build)


def test_the_model_is_told_what_each_dry_run_answer_proves(sample_api: RunningSampleApi) -> None:
    """The 422s that depend on the create are chain noise; the 409 of the open t3 is real."""

    async def answers() -> list[CallAnswer]:
        async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
            gate = Gate(api=api, queue=QueueClient("http://127.0.0.1:1", "unused"), **SERVER_DRY_RUN)
            seen: list[CallAnswer] = []

            async def task() -> None:
                ticket = await tools.create_ticket(title="Printer on fire")
                seen.append(ticket)
                seen.append(await tools.update_ticket(id="t1", status="closed", mergedInto=ticket["id"]))
                seen.append(await tools.delete_ticket(id="t3"))

            await gate.dry_run(task)
            return seen

    created, merged, deleted = asyncio.run(answers())
    assert created["id"] == "<id from call 1>"
    assert created.note is not None and "accepted" in created.note
    assert merged.status == "refused" and merged.note is not None
    assert "chain noise" in merged.note and "call 1" in merged.note
    assert deleted.note is not None and "will be refused too" in deleted.note
    assert "chain noise" in str(merged) and '"status": "refused"' in str(merged)


class Refunds:
    """A vendor SDK stand-in: what a payment SDK's client looks like to a tool (no HTTP the gate sees)."""

    def __init__(self) -> None:
        self.made: list[dict[str, Any]] = []

    def create(self, charge: str, amount: int) -> dict[str, Any]:
        refund = {"id": f"re_{len(self.made) + 1}", "charge": charge, "amount": amount}
        self.made.append(refund)
        return refund


def test_a_vendor_sdk_tool_is_recorded_and_runs_once_after_approval(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    """A refund through an SDK, then a ticket update naming the refund's id: the refund is recorded (no
    dry-run callable), the SDK is called only by the approved run, once, and its id reaches the API."""
    sdk = Refunds()

    @sdk_tool(effect="create", produces=("id",))
    def refund(charge: str, amount: int) -> dict[str, Any]:
        """Refund part of a charge."""
        return sdk.create(charge=charge, amount=amount)

    async def task() -> None:
        made = await refund(charge="ch_1", amount=500)
        await tools.update_ticket(id="t1", title=f"refunded as {made['id']}")

    result, seen = asyncio.run(gated_run(queue, sample_api, "approve", task=task))
    assert [(call.tool, call.outcome.status if call.outcome else None) for call in seen.calls] == [
        ("refund", "recorded"),
        ("update_ticket", "ok"),
    ]
    assert seen.calls[0].request is None
    assert sdk.made == [{"id": "re_1", "charge": "ch_1", "amount": 500}]
    assert sample_api.store.tickets["t1"]["title"] == "refunded as re_1"
    result.raise_for_stop()


def test_a_vendor_sdk_dry_run_callable_answers_the_dry_run() -> None:
    """The SDK's own check answers (its exception is the refusal); the real write is never called."""
    written: list[int] = []

    def validate(charge: str, amount: int) -> dict[str, Any]:
        if amount <= 0:
            raise ValueError("amount must be positive")
        return {"id": "re_preview", "amount": amount}

    @sdk_tool(effect="create", produces=("id",), dry_run=validate)
    def refund(charge: str, amount: int) -> dict[str, Any]:
        written.append(amount)
        return {"id": "re_real"}

    async def run() -> list[CallAnswer]:
        gate = Gate(api=None, queue=QueueClient("http://127.0.0.1:1", "unused"), backend="fake")
        seen: list[CallAnswer] = []

        async def task() -> None:
            seen.append(await refund(charge="ch_1", amount=500))
            seen.append(await refund(charge="ch_1", amount=-1))

        await gate.dry_run(task)
        return seen

    accepted, refused = asyncio.run(run())
    assert accepted.status == "ok" and accepted["id"] == "<id from call 1>"
    assert refused.status == "refused" and refused.message == "ValueError: amount must be positive"
    assert written == []


def test_an_audit_log_that_cannot_be_read_stops_the_dry_run_before_the_task(
    sample_api: RunningSampleApi,
) -> None:
    """Asked for, the log is never skipped silently: whichever the dry run, it is read at the start."""
    started: list[str] = []

    async def task() -> None:
        started.append("task")

    async def attempt(backend: dict[str, Any]) -> None:
        async with Gate(
            api=sample_api.base_url,
            queue="http://127.0.0.1:1",
            token="unused",
            audit="api:/v1/audti",
            **backend,
        ) as gate:
            await gate.dry_run(task)

    for backend in ({}, SERVER_DRY_RUN):
        with pytest.raises(AuditUnavailable, match="api:/v1/audti cannot be read"):
            asyncio.run(attempt(backend))
    assert started == [] and sample_api.store.request_log == []
