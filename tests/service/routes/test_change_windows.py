"""Change windows at the queue, on an injected clock (in-process ASGI), with a real agent and a real API,
on SQLite and PostgreSQL.

The queue's clock decides: a claim in the year-end freeze is refused naming the window and when the plan
may run next, nothing reaches the API and the approval stays unused for Monday; two reviewers breaking
glass let it run once, both reasons in the trail; a run that outlasts its window stops before the next
write and says so in its report.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import httpx
import pytest

from reviewer.agent import OutsideChangeWindow, QueueAgent, RunStopped, WindowClosed
from reviewer.agent.waiting import Patience
from reviewer.policy.file import parse_policy
from reviewer.queue.client import QueueClient
from reviewer.queue.refusals import Conflict
from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from reviewer.service.store.opener import open_store
from tests.agent.loopback import LoopbackServer, created, loopback_servers
from tests.builders import proposal_document
from tests.policies import WORKING_HOURS_AND_YEAR_END_FREEZE
from tests.service.postgres import Cluster

BERLIN = ZoneInfo("Europe/Berlin")
DAY = 86400.0


def berlin(*fields: int) -> float:
    return datetime(*fields, tzinfo=BERLIN).timestamp()  # type: ignore[misc]


@dataclass
class Queue:
    app: Any
    tokens: dict[str, str]
    now: list[float]
    """The queue's clock and the agent's monotonic clock, moved together by the test."""

    def client(self, name: str) -> QueueClient:
        return QueueClient("http://queue", self.tokens[name], transport=httpx.ASGITransport(app=self.app))

    def agent(self, client: QueueClient) -> QueueAgent:
        return QueueAgent(client, poll_interval=0.01, patience=Patience(clock=lambda: self.now[0]))


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a fresh queue lives: an SQLite path or a new PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "queue.sqlite3")
    cluster: Cluster = request.getfixturevalue("postgres_cluster")
    return cluster.fresh_database()


@pytest.fixture
def queue(database: str) -> Iterator[Queue]:
    now = [berlin(2026, 12, 28, 10, 0)]  # a Monday inside the freeze
    store = open_store(
        database,
        clock=lambda: now[0],
        pending_ttl=60 * DAY,
        approval_ttl=60 * DAY,
        policy=parse_policy(WORKING_HOURS_AND_YEAR_END_FREEZE),
        create=True,
    )
    tokens = {name: mint_token() for name in ("alice", "bob", "agent")}
    for name in ("alice", "bob"):
        store.create_token(name, "reviewer", hash_token(tokens[name]))
    store.create_token("agent", "agent", hash_token(tokens["agent"]))
    yield Queue(create_app(None, store=store, clock=lambda: now[0]), tokens, now)
    store.close()


@pytest.fixture
def api() -> Iterator[LoopbackServer]:
    with loopback_servers(1) as (server,):
        yield server


def plan(proposal_id: str, base_url: str, calls: int = 1) -> bytes:
    document = proposal_document(
        [
            {
                "tool": "create_invoice",
                "effect": "create",
                "args": {"amount": seq},
                "request": {"method": "POST", "path": f"/invoices/{seq}", "body": {"amount": seq}},
                "outcome": {"status": "ok", "http_status": 201},
            }
            for seq in range(1, calls + 1)
        ],
        proposal_id=proposal_id,
        target={"api": "billing", "base_url": base_url, "environment": "production"},
        dry_run={"via": "record"},
    )
    return json.dumps(document).encode()


async def approve(queue: Queue, proposal_id: str, body: bytes, *glass: tuple[str, str]) -> str:
    """Submit as the agent; approve as alice, or break glass as each (reviewer, reason) given."""
    async with queue.client("agent") as agent:
        digest = (await agent.submit(body)).plan_sha256
    for reviewer, reason in glass or (("alice", ""),):
        async with queue.client(reviewer) as client:
            await client.decide(proposal_id, 1, digest, "approve", reason, break_glass=bool(glass))
    return digest


async def run(queue: Queue, proposal_id: str, base_url: str) -> Any:
    async with queue.client("agent") as client, httpx.AsyncClient(base_url=base_url) as http:
        agent = queue.agent(client)
        approval = await agent.wait_for_decision(proposal_id, 1, timeout=5)
        return await agent.execute(approval, client=http)


def writes(api: LoopbackServer) -> list[tuple[str, str]]:
    return [(method, path) for method, path, _headers, _body in api.seen]


def test_the_freeze_refuses_the_claim_naming_the_window_and_monday_runs_it_once(
    queue: Queue, api: LoopbackServer
) -> None:
    asyncio.run(approve(queue, "frozen", plan("frozen", api.url)))
    with pytest.raises(OutsideChangeWindow) as kept:
        asyncio.run(run(queue, "frozen", api.url))
    assert kept.value.window == "year-end freeze"
    assert kept.value.runs_from == datetime(2027, 1, 4, 9, 0, tzinfo=BERLIN)
    assert "inside the deny window 'year-end freeze'; runs from 2027-01-04 08:00 UTC" in str(kept.value)
    assert "0 of 2 break-glass approvals" in str(kept.value)
    assert writes(api) == []

    async def state() -> Any:
        async with queue.client("alice") as alice:
            return await alice.decision_state("frozen")

    unused = asyncio.run(state())
    assert unused.state == "approved"
    assert unused.window is not None and not unused.window.may_run
    assert unused.window.words().startswith("runs from 2027-01-04 08:00 UTC (inside the deny window")

    queue.now[0] = berlin(2027, 1, 4, 9, 30)
    execution = asyncio.run(run(queue, "frozen", api.url))
    assert execution.ok
    assert writes(api) == [("POST", "/invoices/1")]


def test_two_reviewers_breaking_glass_run_it_in_the_freeze_with_both_reasons_in_the_trail(
    queue: Queue, api: LoopbackServer
) -> None:
    glass = (("alice", "the payroll run failed"), ("bob", "confirmed with finance"))
    asyncio.run(approve(queue, "glass", plan("glass", api.url), glass[0]))
    with pytest.raises(OutsideChangeWindow, match="1 of 2 break-glass approvals"):
        asyncio.run(run(queue, "glass", api.url))  # one is not enough, and the approval stays unused

    async def second_glass() -> Any:
        async with queue.client("alice") as alice:
            digest = (await alice.decision_state("glass")).plan_sha256
        async with queue.client("bob") as bob:
            return await bob.decide("glass", 1, digest, "approve", glass[1][1], break_glass=True)

    answer = asyncio.run(second_glass())
    assert answer.window is not None and answer.window.may_run
    assert answer.window.break_glass == ["alice", "bob"]
    assert asyncio.run(run(queue, "glass", api.url)).ok
    assert writes(api) == [("POST", "/invoices/1")]

    async def trail() -> Any:
        async with queue.client("alice") as alice:
            return (await alice.get_proposal("glass")).history

    reasons = [(event.actor, event.reason) for event in asyncio.run(trail()) if event.event == "approved"]
    assert reasons == [
        ("alice", "break glass: the payroll run failed"),
        ("bob", "break glass: confirmed with finance"),
    ]


def test_a_reviewer_who_approved_may_break_glass_on_it_once(queue: Queue, api: LoopbackServer) -> None:
    """Alice approved before anyone saw the freeze: her break glass joins her approval (one person,
    one vote), a second from her is refused, and bob's makes two."""
    digest = asyncio.run(approve(queue, "afterwards", plan("afterwards", api.url)))

    async def glass(reviewer: str, reason: str) -> Any:
        async with queue.client(reviewer) as client:
            return await client.decide("afterwards", 1, digest, "approve", reason, break_glass=True)

    assert asyncio.run(glass("alice", "month-end invoices")).window.break_glass == ["alice"]
    with pytest.raises(Conflict, match="alice already approved this revision"):
        asyncio.run(glass("alice", "really"))
    answer = asyncio.run(glass("bob", "agreed"))
    assert (answer.state, answer.approvals, answer.window.may_run) == ("approved", ["alice"], True)
    assert asyncio.run(run(queue, "afterwards", api.url)).ok
    assert writes(api) == [("POST", "/invoices/1")]


def test_an_ordinary_approval_cannot_pass_for_breaking_glass(queue: Queue, api: LoopbackServer) -> None:
    """The queue itself refuses it, whatever client sent it: the trail's words stay break glass's own."""

    async def scenario() -> httpx.Response:
        async with queue.client("agent") as agent:
            digest = (await agent.submit(plan("posing", api.url))).plan_sha256
        async with httpx.AsyncClient(
            transport=httpx.ASGITransport(app=queue.app),
            base_url="http://queue",
            headers={"Authorization": f"Bearer {queue.tokens['alice']}", "Idempotency-Key": "posing-1"},
        ) as alice:
            decision = {
                "revision": 1,
                "plan_sha256": digest,
                "decision": "approve",
                "reason": "Break glass: me",
            }
            return await alice.post("/v1/proposals/posing/decisions", json=decision)

    refused = asyncio.run(scenario())
    assert refused.status_code == 422
    assert "begins a break-glass approval only" in refused.json()["message"]


def test_a_run_that_outlasts_its_window_stops_before_the_next_write(
    queue: Queue, api: LoopbackServer
) -> None:
    queue.now[0] = berlin(2027, 1, 5, 16, 58)  # a Tuesday, two minutes before working hours end

    def slow_first_write(server: LoopbackServer, handler: BaseHTTPRequestHandler) -> None:
        queue.now[0] += 180  # the first call takes three minutes: the window closes meanwhile
        created(server, handler)

    api.answer = slow_first_write
    asyncio.run(approve(queue, "late", plan("late", api.url, calls=2)))
    with pytest.raises(RunStopped) as stopped:
        asyncio.run(run(queue, "late", api.url))
    execution = stopped.value.execution
    assert isinstance(execution.stop, WindowClosed)
    assert "the change window 'working hours' closed during the run" in str(execution.stop)
    assert execution.ended == "stopped"
    assert writes(api) == [("POST", "/invoices/1")]

    async def reported() -> Any:
        async with queue.client("alice") as alice:
            return await alice.get_executions("late")

    (report,) = asyncio.run(reported())
    assert report.ended == "stopped" and len(report.calls) == 1
    assert "closed during the run" in (report.note or "")


def test_the_claim_says_until_when_in_the_queues_time(queue: Queue, api: LoopbackServer) -> None:
    queue.now[0] = berlin(2027, 1, 5, 10, 0)
    digest = asyncio.run(approve(queue, "told", plan("told", api.url)))

    async def claim() -> Any:
        async with queue.client("agent") as agent:
            return await agent.claim("told", 1, digest)

    window = asyncio.run(claim()).window
    assert window is not None and window.may_run
    assert window.runs_until == datetime(2027, 1, 5, 17, 0, tzinfo=BERLIN).astimezone(UTC)


def test_glass_broken_inside_the_window_lets_the_run_outlast_it(queue: Queue, api: LoopbackServer) -> None:
    queue.now[0] = berlin(2027, 1, 5, 16, 58)

    def slow_first_write(server: LoopbackServer, handler: BaseHTTPRequestHandler) -> None:
        queue.now[0] += 180
        created(server, handler)

    api.answer = slow_first_write
    glass = (("alice", "the migration must finish tonight"), ("bob", "on call agrees"))
    asyncio.run(approve(queue, "overtime", plan("overtime", api.url, calls=2), *glass))
    assert asyncio.run(run(queue, "overtime", api.url)).ok
    assert writes(api) == [("POST", "/invoices/1"), ("POST", "/invoices/2")]
