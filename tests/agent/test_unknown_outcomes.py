"""A write that was sent and never answered is `unknown`, never `error`: in the run, its report, the queue.

Real loopback servers: one reads the request and drops the connection, one reads it and never answers
(the client's read timeout ends the wait), and a port where nothing listens (never sent: `error`).
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from reviewer.agent import Approval, QueueAgent, RunStopped, execute_approved, local_approval
from reviewer.plan.proposal import parse_proposal
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import ExecutionReport
from reviewer.queue.refusals import InvalidRequest
from tests.agent.fixtures import Queue
from tests.agent.loopback import LoopbackServer, loopback_servers
from tests.builders import proposal_document
from tests.service.ports import free_port


def drop_connection(server: LoopbackServer, handler: BaseHTTPRequestHandler) -> None:
    """The request was read whole; the answer never comes, the connection closes."""
    handler.close_connection = True


def never_answer(server: LoopbackServer, handler: BaseHTTPRequestHandler) -> None:
    server.released.wait()


@pytest.fixture
def api() -> Iterator[LoopbackServer]:
    with loopback_servers(1) as [running]:
        yield running


def _plan(base_url: str, proposal_id: str | None = None) -> Any:
    """Create a ticket, then close t1 into it: the second call depends on the first one's answer."""
    calls = [
        {
            "tool": "create_ticket",
            "effect": "create",
            "args": {"title": "Printer on fire"},
            "request": {"method": "POST", "path": "/v1/tickets", "body": {"title": "Printer on fire"}},
        },
        {
            "tool": "update_ticket",
            "effect": "update",
            "args": {"id": "t1", "mergedInto": "<id from call 1>"},
            "request": {
                "method": "PATCH",
                "path": "/v1/tickets/t1",
                "body": {"mergedInto": "<id from call 1>"},
            },
        },
    ]
    document = proposal_document(
        calls,
        proposal_id=proposal_id or f"unknown-{uuid.uuid4().hex[:8]}",
        via="record",
        target={"api": "sample", "base_url": base_url},
    )
    return parse_proposal(json.dumps(document).encode(), "test")


def _run(base_url: str, approval: Approval) -> Any:
    async def run() -> Any:
        timeout = httpx.Timeout(5.0, read=0.05)
        async with httpx.AsyncClient(base_url=base_url, timeout=timeout) as client:
            return await execute_approved(None, approval, client=client)

    return asyncio.run(run())


@pytest.mark.parametrize("answer", [drop_connection, never_answer], ids=["dropped", "timed out"])
def test_a_write_sent_and_never_answered_is_unknown(api: LoopbackServer, answer: Any) -> None:
    api.answer = answer
    execution = _run(api.url, local_approval(_plan(api.url)))
    assert len(api.seen) == 1  # it did reach the API
    [call] = execution.executed
    assert call.answer.status == "unknown", call.answer
    assert "may have been performed" in (call.answer.message or "")
    assert [unknown.seq for unknown in execution.outcome_unknown] == [1]
    assert execution.ended == "stopped" and execution.stop is not None and execution.stop.position == 2
    assert "Outcome unknown for #1 create_ticket" in execution.summary()


def test_a_write_that_could_not_connect_is_an_error_not_unknown() -> None:
    url = f"http://127.0.0.1:{free_port()}"  # a port nobody listens on
    execution = _run(url, local_approval(_plan(url)))
    [call] = execution.executed
    assert call.answer.status == "error" and "not sent" in (call.answer.message or "")
    assert execution.outcome_unknown == [] and "Outcome unknown" not in execution.summary()


async def _approved(queue: Queue, base_url: str) -> Approval:
    async with (
        QueueClient(queue.url, queue.agent_token) as agent_client,
        QueueClient(queue.url, queue.reviewer_token) as reviewer,
    ):
        agent = QueueAgent(agent_client)
        proposal = _plan(base_url)
        answer = await agent.submit(proposal)
        await reviewer.decide(proposal.proposal_id, 1, answer.plan_sha256, "approve", "ok")
        return await agent.wait_for_decision(proposal.proposal_id, 1, timeout=5)


def test_the_queue_stores_the_unknown_outcome_and_the_agent_says_so(
    queue: Queue, api: LoopbackServer
) -> None:
    api.answer = drop_connection

    async def run() -> tuple[BaseException, Any]:
        approval = await _approved(queue, api.url)
        async with (
            QueueClient(queue.url, queue.agent_token) as agent_client,
            httpx.AsyncClient(base_url=api.url) as client,
        ):
            with pytest.raises(RunStopped) as stopped:
                await QueueAgent(agent_client).execute(approval, client=client)
            return stopped.value, await agent_client.get_executions(approval.proposal_id)

    stopped, [stored] = asyncio.run(run())
    assert "Outcome unknown for #1 create_ticket" in str(stopped)
    assert "may have performed it" in str(stopped)
    assert stored.unknown_outcomes == [1]
    assert stored.calls[0]["outcome"]["status"] == "unknown"


def test_a_report_that_hides_an_unknown_outcome_is_refused(queue: Queue, api: LoopbackServer) -> None:
    async def run() -> Any:
        approval = await _approved(queue, api.url)
        async with QueueClient(queue.url, queue.agent_token) as agent_client:
            claim = await agent_client.claim(approval.proposal_id, 1, approval.plan_sha256)
            call = {
                "seq": 1,
                "tool": "create_ticket",
                "effect": "create",
                "outcome": {"status": "unknown", "message": "ReadTimeout"},
            }
            hiding = ExecutionReport(
                revision=1,
                plan_sha256=approval.plan_sha256,
                claim_id=claim.claim_id,
                ended="stopped",
                calls=[call],
            )
            with pytest.raises(InvalidRequest) as refused:
                await agent_client.report_execution(approval.proposal_id, hiding)
            honest = hiding.model_copy(update={"unknown_outcomes": [1]})
            await agent_client.report_execution(approval.proposal_id, honest)
            return refused.value, await agent_client.get_executions(approval.proposal_id)

    refused, [stored] = asyncio.run(run())
    assert "unknown_outcomes" in str(refused)
    assert stored.unknown_outcomes == [1]
