"""Two releases meet: the previous release's queue (built from this repository's history,
`tests.service.previous_release`) and today's agents, today's queue and the previous release's
agents, and an upgrade from the one to the other with an agent waiting through it.

Today's agent carries the dry run's request ids, which the previous queue refuses (`$.dry_run:
Object contains unknown field 'request_ids'`); it leaves them out (that queue answers no `GET /v1`,
so its refusal names the field) and the plan, its digest and its approval are the same. Today's
queue says what it reads, and takes the previous release's plans and decisions as they were.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from reviewer.agent.queue import QueueAgent
from reviewer.plan.format_fields import proposal_fields
from reviewer.plan.proposal import parse_proposal, plan_sha256
from reviewer.queue.client import QueueClient
from tests.queue_harness import Service, body, decide, proposal, unique_id
from tests.service.previous_release import previous_release_python


@dataclass
class PreviousQueue:
    service: Service
    tokens: dict[str, str]


def previous_tokens(python: tuple[str, ...], database: Path, roles: dict[str, str]) -> dict[str, str]:
    """Minted by the previous release's own `reviewer token create` (today's would migrate its database)."""
    return {
        name: subprocess.run(
            [
                *python,
                "-m",
                "reviewer",
                "token",
                "create",
                "--db",
                str(database),
                "--name",
                name,
                "--role",
                role,
            ],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        for name, role in roles.items()
    }


@pytest.fixture(scope="module")
def previous(tmp_path_factory: pytest.TempPathFactory) -> Iterator[PreviousQueue]:
    folder = tmp_path_factory.mktemp("previous-queue")
    python = previous_release_python()
    service = Service(db=folder / "queue.sqlite3", log_path=folder / "service.log", python=python)
    service.start()
    tokens = previous_tokens(python, service.db, {"alice": "reviewer", "agent": "agent"})  # type: ignore[arg-type]
    yield PreviousQueue(service, tokens)
    if service.process is not None:
        service.stop()


def todays_plan(proposal_id: str) -> dict[str, object]:
    """A plan as today's gate writes it: the dry run's account holds its request ids."""
    document = proposal(proposal_id)
    document["dry_run"] = {**document["dry_run"], "request_ids": ["req-1", "req-2"]}  # type: ignore[dict-item]
    return document


def test_the_previous_queue_refuses_todays_field_and_todays_agent_leaves_it_out(
    previous: PreviousQueue,
) -> None:
    proposal_id = unique_id("rolled-back")
    document = todays_plan(proposal_id)
    with previous.service.client(previous.tokens["agent"]) as raw:
        refused = raw.post("/v1/proposals", content=body(document))
        assert refused.status_code == 422
        assert "$.dry_run: Object contains unknown field `request_ids`" in refused.json()["message"]
        assert raw.get("/v1").status_code == 404  # it does not say what it reads

    async def scenario() -> None:
        plan = parse_proposal(body(document))
        async with QueueClient(previous.service.url, previous.tokens["agent"]) as client:
            answer = await QueueAgent(client, poll_interval=0.05).submit(plan)
            assert answer.plan_sha256 == plan_sha256(plan)  # the same plan, the same digest
            with previous.service.client(previous.tokens["alice"]) as alice:
                assert decide(alice, proposal_id, 1, answer.plan_sha256).status_code == 201
            approval = await QueueAgent(client, poll_interval=0.05).wait_for_decision(
                proposal_id, 1, plan_digest=answer.plan_sha256, timeout=10
            )
            assert approval.plan_sha256 == answer.plan_sha256
            stored = await client.get_revision(proposal_id, 1)
            assert stored.dry_run.request_ids is None and stored.dry_run.write_requests == 2

    asyncio.run(scenario())


def test_todays_queue_says_what_it_reads_and_the_agent_sends_it_whole(tmp_path: Path) -> None:
    from tests.queue_harness import start_service

    service = start_service(tmp_path)
    try:
        agent = service.token("agent", "agent")
        version = httpx.get(f"{service.url}/v1").json()
        assert version["proposal_format"] == "reviewer.proposal/v1" and version["schema_version"] >= 10
        assert "dry_run.request_ids" in version["proposal_fields"]
        assert version["proposal_fields"] == list(proposal_fields())

        async def scenario() -> None:
            async with QueueClient(service.url, agent) as client:
                await client.submit(parse_proposal(body(todays_plan("kept-ids"))))
                stored = await client.get_revision("kept-ids", 1)
                assert stored.dry_run.request_ids == ["req-1", "req-2"]

        asyncio.run(scenario())
    finally:
        service.stop()


PREVIOUS_AGENT = """
import asyncio, json, sys
from reviewer.agent.queue import QueueAgent
from reviewer.plan.proposal import parse_proposal
from reviewer.queue.client import QueueClient

async def main():
    url, token, path = sys.argv[1:4]
    plan = parse_proposal(open(path, "rb").read())
    async with QueueClient(url, token) as client:
        agent = QueueAgent(client, poll_interval=0.05)
        answer = await agent.submit(plan)
        print(json.dumps({"submitted": answer.plan_sha256}), flush=True)
        digest = answer.plan_sha256
        approval = await agent.wait_for_decision(plan.proposal_id, 1, plan_digest=digest, timeout=30)
        print(json.dumps({"approved": approval.plan_sha256}), flush=True)

asyncio.run(main())
"""


def test_the_previous_releases_agent_submits_to_todays_queue_and_reads_its_decision(tmp_path: Path) -> None:
    from tests.queue_harness import start_service

    service = start_service(tmp_path)
    try:
        tokens = service.tokens({"agent": "agent", "alice": "reviewer"})
        plan = tmp_path / "plan.json"
        plan.write_bytes(body(proposal("from-before")))
        agent = subprocess.Popen(
            [*previous_release_python(), "-c", PREVIOUS_AGENT, service.url, tokens["agent"], str(plan)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert agent.stdout is not None
        submitted = json.loads(agent.stdout.readline() or "{}")
        assert "submitted" in submitted, agent.stderr.read() if agent.stderr else ""
        with service.client(tokens["alice"]) as alice:
            assert decide(alice, "from-before", 1, submitted["submitted"]).status_code == 201
        out, err = agent.communicate(timeout=30)
        assert agent.returncode == 0, err
        assert json.loads(out) == {"approved": submitted["submitted"]}
    finally:
        service.stop()


def test_an_agent_waits_through_the_upgrade_from_the_previous_queue_to_todays(tmp_path: Path) -> None:
    """The queue stopped for an upgrade: the previous release's process is stopped, today's starts on
    its database (migrating it) on the same port, and an agent that submitted before waits through the
    gap and gets its approval from today's queue."""
    python = previous_release_python()
    service = Service(db=tmp_path / "queue.sqlite3", log_path=tmp_path / "service.log", python=python)
    service.start()
    tokens = previous_tokens(python, tmp_path / "queue.sqlite3", {"alice": "reviewer", "agent": "agent"})
    plan = parse_proposal(body(todays_plan("in-flight")))

    async def scenario() -> None:
        async with QueueClient(service.url, tokens["agent"]) as client:
            agent = QueueAgent(client, poll_interval=0.05)  # waits through an outage by default
            answer = await agent.submit(plan)
            waiting = asyncio.create_task(
                agent.wait_for_decision("in-flight", 1, plan_digest=answer.plan_sha256, timeout=60)
            )
            await asyncio.sleep(0.2)  # the agent polls the previous queue
            await asyncio.to_thread(service.stop)
            upgraded = Service(db=service.db, log_path=service.log_path, port=service.port)
            await asyncio.to_thread(upgraded.start)
            try:
                assert "migrating" in upgraded.log_since_launch()
                with upgraded.client(tokens["alice"]) as alice:
                    assert decide(alice, "in-flight", 1, answer.plan_sha256).status_code == 201
                approval = await waiting
                assert approval.plan_sha256 == answer.plan_sha256
            finally:
                upgraded.stop()

    asyncio.run(scenario())


def test_a_queue_that_reads_fewer_fields_gets_the_plan_without_them() -> None:
    """In-process: a queue that says it reads no request ids gets none, in one request, and the
    digest the agent holds is the one it answers."""
    seen: list[dict[str, object]] = []
    fields = [field for field in proposal_fields() if field != "dry_run.request_ids"]

    def queue(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1":
            version = {"release": "0.0.9", "schema_version": 9, "proposal_format": "reviewer.proposal/v1"}
            return httpx.Response(200, json={**version, "proposal_fields": fields, "said_later": True})
        seen.append(json.loads(request.content))
        plan = parse_proposal(request.content)
        answer = {"proposal_id": plan.proposal_id, "revision": 1, "plan_sha256": plan_sha256(plan)}
        return httpx.Response(201, json={**answer, "state": "pending"})

    document = todays_plan("fewer")
    plan = parse_proposal(body(document))

    async def scenario() -> None:
        async with QueueClient("http://queue", "agent-token", transport=httpx.MockTransport(queue)) as client:
            answer = await client.submit(plan)
            assert answer.plan_sha256 == plan_sha256(plan)

    asyncio.run(scenario())
    assert len(seen) == 1 and "request_ids" not in seen[0]["dry_run"]  # type: ignore[operator]
    assert seen[0]["calls"] == document["calls"]  # the plan itself as it was


def test_the_previous_release_is_in_a_clean_clone(tmp_path: Path) -> None:
    """CI builds it from the repository's own history: a plain `git clone` holds the commit."""
    from tests.service.previous_release import PREVIOUS_RELEASE, ROOT

    clone = tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(ROOT), str(clone)], check=True)
    found = subprocess.run(["git", "-C", str(clone), "cat-file", "-e", f"{PREVIOUS_RELEASE}^{{commit}}"])
    assert found.returncode == 0
    assert sys.executable  # the clone's history, not this checkout's files, is what was checked
