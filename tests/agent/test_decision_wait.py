"""An executor's wait for a decision is a long poll: against a real queue it asks once and runs on
the approval; against a queue that answers at once it asks again every `poll_interval`."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any

import httpx
import msgspec
import pytest

from reviewer.agent import Patience, ProposalRejected, QueueAgent, RunStopped
from reviewer.plan.proposal import plan_sha256
from reviewer.queue.client import QueueClient
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.helpers import dry_proposal, received

AN_HOUR = 3600.0
"""A poll interval no test lives through: only a long poll answered by the approval ends the wait."""


def real_writes(sample_api: RunningSampleApi) -> list[dict[str, Any]]:
    """The writes the sample API received for real (a dry run's carry its flag in the query)."""
    return [request for request in received(sample_api) if not request["query"]]


class Recorded(httpx.AsyncBaseTransport):
    """Loopback HTTP that notes each request it sends, and says when the first decision ask left."""

    def __init__(self) -> None:
        self.inner = httpx.AsyncHTTPTransport()
        self.sent: list[httpx.Request] = []
        self.asking = asyncio.Event()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.sent.append(request)
        if request.url.path.endswith("/decision"):
            self.asking.set()
        return await self.inner.handle_async_request(request)

    async def aclose(self) -> None:
        await self.inner.aclose()


def test_the_run_starts_on_the_approval_after_one_ask(queue: Queue, sample_api: RunningSampleApi) -> None:
    proposal = msgspec.structs.replace(
        asyncio.run(dry_proposal(sample_api, "server")), proposal_id="long-poll-run-0001"
    )
    transport = Recorded()

    async def scenario() -> tuple[list[str], list[str]]:
        async with (
            QueueClient(queue.url, queue.agent_token, transport=transport) as client,
            QueueClient(queue.url, queue.reviewer_token) as reviewer,
            httpx.AsyncClient(base_url=sample_api.base_url) as api,
        ):
            agent = QueueAgent(client, poll_interval=AN_HOUR)
            await agent.submit(proposal)
            waiting = asyncio.ensure_future(agent.wait_for_decision(proposal.proposal_id, 1, timeout=AN_HOUR))
            await transport.asking.wait()
            writes_before_approval = len(real_writes(sample_api))
            await reviewer.decide(proposal.proposal_id, 1, plan_sha256(proposal), "approve", "go")
            approval = await asyncio.wait_for(waiting, 60)
            with pytest.raises(RunStopped, match="#4 delete_ticket 409"):  # the reference task's end
                await agent.execute(approval, client=api, audit=tools.AUDIT)
            record = await client.get_proposal(proposal.proposal_id)
        asks = [str(request.url) for request in transport.sent if request.url.path.endswith("/decision")]
        assert writes_before_approval == 0
        return asks, [event.event for event in record.history]

    asks, history = asyncio.run(scenario())
    assert len(asks) == 1 and "wait=30" in asks[0], asks
    assert history == ["submitted", "approved", "claimed", "executed"]
    assert [write["method"] for write in real_writes(sample_api)] == ["POST", "PATCH", "PATCH", "DELETE"]


def test_a_queue_that_does_not_wait_is_asked_again_every_poll_interval() -> None:
    """An older queue ignores `wait` and sends no ETag: the executor paces its asks itself."""
    pending = {
        "proposal_id": "old-queue-0001",
        "revision": 1,
        "plan_sha256": "0" * 64,
        "state": "pending",
        "expires_at": datetime(2099, 1, 1, tzinfo=UTC).isoformat(),
    }
    answers = [pending, pending, {**pending, "state": "rejected", "decided_by": "alice", "reason": "no"}]
    asked: list[httpx.Request] = []

    def old_queue(request: httpx.Request) -> httpx.Response:
        asked.append(request)
        return httpx.Response(200, content=json.dumps(answers[min(len(asked), 3) - 1]))

    now = [0.0]
    pauses: list[float] = []

    async def sleep(seconds: float) -> None:
        pauses.append(seconds)
        now[0] += seconds

    async def scenario() -> None:
        transport = httpx.MockTransport(old_queue)
        async with QueueClient("http://queue.test", "agent-token", transport=transport) as client:
            agent = QueueAgent(
                client, poll_interval=2.0, patience=Patience(clock=lambda: now[0], sleep=sleep)
            )
            with pytest.raises(ProposalRejected, match="alice"):
                await agent.wait_for_decision("old-queue-0001", 1, timeout=60)

    asyncio.run(scenario())
    assert len(asked) == 3
    assert all(request.url.params["wait"] == "30.000" for request in asked)
    assert "if-none-match" not in asked[0].headers
    assert pauses == [2.0, 2.0]
