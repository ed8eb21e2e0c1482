"""QueueClient against the real service, and its retry of a lost decision with the same key."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest

from reviewer.plan.proposal import parse_proposal, plan_sha256
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import ExecutionReport
from reviewer.queue.refusals import (
    AlreadyDecided,
    ClaimRefused,
    ExecutionRefused,
    Forbidden,
    InvalidRequest,
    NotFound,
    QueueUnreachable,
    StaleRevision,
    Unauthorized,
)
from tests.queue_harness import Actors, AnswerLostOnce, Service, body, free_port, proposal, submit, unique_id


def run(coroutine: Any) -> Any:
    return asyncio.run(coroutine)


def test_the_whole_flow_through_the_client(service: Service, actors: Actors) -> None:
    async def flow() -> None:
        agent = QueueClient(service.url, actors.tokens["agent"])
        alice = QueueClient(service.url, actors.tokens["alice"])
        bob = QueueClient(service.url, actors.tokens["bob"])
        other = QueueClient(service.url, actors.tokens["other"])
        async with agent, alice, bob, other:
            assert (await alice.whoami()).role == "reviewer"
            proposal_id = unique_id("client")
            plan = parse_proposal(body(proposal(proposal_id)))
            submitted = await agent.submit(plan)
            assert submitted.plan_sha256 == plan_sha256(plan)
            assert (await agent.submit(body(proposal(proposal_id)))).state == "pending"

            listing = await alice.list_proposals()
            assert listing.page is not None and listing.etag
            assert proposal_id in {summary.proposal_id for summary in listing.page.proposals}
            again = await alice.list_proposals(etag=listing.etag)
            assert again.not_modified and again.etag == listing.etag

            fetched = await alice.get_revision(proposal_id, 1)
            assert plan_sha256(fetched) == submitted.plan_sha256
            record = await agent.get_proposal(proposal_id)
            assert record.latest.state == "pending" and record.proposed_by == "agent"

            with pytest.raises(Forbidden):
                await agent.decide(proposal_id, 1, submitted.plan_sha256, "approve")
            with pytest.raises(StaleRevision) as stale:
                await alice.decide(proposal_id, 1, "0" * 64, "approve")
            assert stale.value.latest_plan_sha256 == submitted.plan_sha256
            approved = await alice.decide(proposal_id, 1, submitted.plan_sha256, "approve", "ok")
            assert approved.state == "approved" and approved.decided_by == "alice"
            with pytest.raises(AlreadyDecided) as late:
                await bob.decide(proposal_id, 1, submitted.plan_sha256, "reject", "no")
            assert (late.value.state, late.value.decided_by) == ("approved", "alice")
            assert "alice" in str(late.value)

            assert (await agent.decision_state(proposal_id)).state == "approved"
            assert await alice.get_executions(proposal_id) == []
            claim = await agent.claim(proposal_id, 1, submitted.plan_sha256)
            assert (claim.claimed_by, claim.revision) == ("agent", 1)
            with pytest.raises(ClaimRefused) as taken:
                await agent.claim(proposal_id, 1, submitted.plan_sha256)
            assert (taken.value.state, taken.value.claimed_by) == ("claimed", "agent")
            report = ExecutionReport(
                revision=1,
                plan_sha256=submitted.plan_sha256,
                claim_id=claim.claim_id,
                ended="completed",
                calls=[{"seq": 1, "args": {"id": "t1", "tags": [None]}}],
                audit_log=[{"method": "PATCH", "path": "/tickets/t1"}],
                note="all calls ran",
            )
            executed = await agent.report_execution(proposal_id, report)
            assert executed.state == "executed"
            [stored] = await alice.get_executions(proposal_id)
            assert stored.model_dump(exclude={"executed_by", "at"}) == report.model_dump()
            assert stored.claim_id == claim.claim_id
            assert (stored.executed_by, stored.at) == ("agent", executed.executed_at)
            assert await agent.get_executions(proposal_id) == [stored]
            with pytest.raises(NotFound):
                await other.get_executions(proposal_id)
            with pytest.raises(ExecutionRefused) as twice:
                await agent.report_execution(proposal_id, report)
            assert twice.value.state == "executed"

            with pytest.raises(NotFound):
                await alice.get_proposal("no-such-proposal")
            with pytest.raises(InvalidRequest):
                await agent.submit(b'{"format": 1}')

    run(flow())


def test_a_bad_token_and_an_absent_queue_are_typed_errors(service: Service) -> None:
    async def attempts() -> None:
        async with QueueClient(service.url, "rvw_wrong") as client:
            with pytest.raises(Unauthorized, match="reviewer token create"):
                await client.whoami()
        async with QueueClient(
            f"http://127.0.0.1:{free_port()}", "rvw_x", retries=1, retry_delay=0
        ) as client:
            with pytest.raises(QueueUnreachable, match="reviewer serve"):
                await client.whoami()

    run(attempts())


def test_a_decision_whose_answer_was_lost_is_retried_with_the_same_key() -> None:
    seen: list[tuple[str, bytes]] = []
    answer = {
        "proposal_id": "p",
        "revision": 1,
        "plan_sha256": "a" * 64,
        "state": "approved",
        "decided_by": "alice",
    }

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append((request.headers["idempotency-key"], request.content))
        if len(seen) < 3:
            raise httpx.ReadError("connection reset", request=request)
        return httpx.Response(201, json=answer)

    async def decide() -> None:
        async with QueueClient(
            "http://queue.test", "rvw_secret", transport=httpx.MockTransport(handler), retry_delay=0
        ) as client:
            state = await client.decide("p", 1, "a" * 64, "approve")
            assert state.state == "approved"

    run(decide())
    assert len(seen) == 3
    assert len({key for key, _ in seen}) == 1, "every attempt carries the same Idempotency-Key"
    assert len({content for _, content in seen}) == 1
    assert json.loads(seen[0][1])["decision"] == "approve"


def test_an_execution_report_whose_answer_was_lost_is_retried_and_stored_once(
    service: Service, actors: Actors
) -> None:
    proposal_id = unique_id("lost-answer")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    lossy = AnswerLostOnce()

    async def report_through_a_lossy_connection() -> None:
        agent = QueueClient(service.url, actors.tokens["agent"], transport=lossy, retry_delay=0)
        alice = QueueClient(service.url, actors.tokens["alice"])
        async with agent, alice:
            await alice.decide(proposal_id, 1, digest, "approve")
            async with QueueClient(service.url, actors.tokens["agent"]) as runner:
                claim = await runner.claim(proposal_id, 1, digest)
            report = ExecutionReport(
                revision=1, plan_sha256=digest, claim_id=claim.claim_id, calls=[{"seq": 1}]
            )
            state = await agent.report_execution(proposal_id, report)
            assert state.state == "executed"
            assert [stored.calls for stored in await alice.get_executions(proposal_id)] == [[{"seq": 1}]]
            record = await alice.get_proposal(proposal_id)
            assert [event.event for event in record.history].count("executed") == 1

    run(report_through_a_lossy_connection())
    assert len(lossy.sent) == 2, "the first answer was lost, the retry got the stored one"
    keys = {request.headers["idempotency-key"] for request in lossy.sent}
    assert len(keys) == 1, "both attempts carry the same Idempotency-Key"
    assert lossy.sent[0].content == lossy.sent[1].content


def test_the_token_is_only_in_the_authorization_header() -> None:
    token = "rvw_CANARY-client-0123456789"
    requests: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        requests.append(request)
        return httpx.Response(404, json={"error": "not_found", "message": "no proposal 'x'"})

    async def ask() -> str:
        client = QueueClient("http://queue.test", token, transport=httpx.MockTransport(handler))
        async with client:
            with pytest.raises(NotFound) as error:
                await client.get_proposal("x")
            return f"{client!r} {error.value} {error.value!r}"

    shown = run(ask())
    assert token not in shown
    assert requests[0].headers["authorization"] == f"Bearer {token}"
    assert token not in str(requests[0].url)


def test_an_idle_connection_is_dropped_by_the_client_before_the_service_closes_it() -> None:
    """A request sent down a connection the service is closing at that moment is reset: the client's
    pool lets go of an idle connection sooner than the service's keep-alive ends it."""
    from reviewer.queue.shell_client import KEEPALIVE_EXPIRY
    from reviewer.service.server import Listening

    keep_alive = Listening("127.0.0.1", 8000).uvicorn_config(app=None).timeout_keep_alive
    assert keep_alive > KEEPALIVE_EXPIRY
    client = QueueClient("http://127.0.0.1:8000", "rvw_token")
    assert client._http._transport._pool._keepalive_expiry == KEEPALIVE_EXPIRY  # type: ignore[attr-defined]
