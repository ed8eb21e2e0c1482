"""Two `reviewer serve` processes on one PostgreSQL database act as one queue: one winner per race,
nothing acknowledged lost, idempotency and claims the same whichever replica answers.

Each test starts two real replicas on a fresh database of the session's cluster and talks to each
over HTTP, as a load balancer would spread a team's requests.
"""

from __future__ import annotations

import subprocess
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.queue_harness import (
    Service,
    body,
    claim,
    decide,
    proposal,
    reviewer_command,
    start_together,
    submit,
    unique_id,
)
from tests.service.postgres import Cluster

RACES = 30


@dataclass
class Replicas:
    first: Service
    second: Service
    tokens: dict[str, str]

    def client(self, replica: Service, name: str) -> httpx.Client:
        return replica.client(self.tokens[name])


@pytest.fixture
def replicas(postgres_cluster: Cluster, tmp_path: Path) -> Iterator[Replicas]:
    url = postgres_cluster.fresh_database()
    first = Service(db=url, log_path=tmp_path / "first.log")
    second = Service(db=url, log_path=tmp_path / "second.log")
    start_together(first, second)
    tokens = first.tokens({"alice": "reviewer", "bob": "reviewer", "agent": "agent"})
    yield Replicas(first, second, tokens)
    for replica in (first, second):
        if replica.process is not None:
            replica.stop()


def race(
    start: threading.Barrier, reviewer: httpx.Client, proposal_id: str, digest: str, verdict: str
) -> httpx.Response:
    start.wait()
    return decide(reviewer, proposal_id, 1, digest, verdict)


@pytest.mark.slow
def test_two_reviewers_on_two_replicas_race_and_exactly_one_wins_each_time(replicas: Replicas) -> None:
    with (
        replicas.client(replicas.first, "agent") as agent,
        replicas.client(replicas.first, "alice") as alice,
        replicas.client(replicas.second, "bob") as bob,
        ThreadPoolExecutor(2) as pool,
    ):
        for trial in range(RACES):
            proposal_id = unique_id("replica-race")
            digest = submit(agent, proposal_id)["plan_sha256"]
            start = threading.Barrier(2)
            verdicts = ("approve", "reject") if trial % 2 else ("approve", "approve")

            responses = list(
                pool.map(
                    race, (start, start), (alice, bob), (proposal_id, proposal_id), (digest, digest), verdicts
                )
            )
            assert sorted(response.status_code for response in responses) == [201, 409], [
                r.text for r in responses
            ]
            winner = next(response.json() for response in responses if response.status_code == 201)
            loser = next(response.json() for response in responses if response.status_code == 409)
            assert loser["decided_by"] == winner["decided_by"]
            for reader in (alice, bob):
                history = reader.get(f"/v1/proposals/{proposal_id}").json()["history"]
                assert [event["event"] for event in history][1:] in (["approved"], ["rejected"])


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_a_replica_killed_during_a_burst_loses_nothing_it_acknowledged(replicas: Replicas) -> None:
    acknowledged: list[tuple[str, str]] = []
    lock = threading.Lock()
    stop = threading.Event()

    def burst(writer: int) -> None:
        with replicas.client(replicas.first, "agent") as agent:
            number = 0
            while not stop.is_set():
                number += 1
                proposal_id = f"burst-{writer}-{number}-{time.monotonic_ns()}"
                try:
                    sent = agent.post("/v1/proposals", content=body(proposal(proposal_id)))
                except httpx.TransportError:
                    return
                if sent.status_code != 201:
                    return
                with lock:
                    acknowledged.append((proposal_id, sent.json()["plan_sha256"]))

    writers = [threading.Thread(target=burst, args=(index,)) for index in range(4)]
    for thread in writers:
        thread.start()
    deadline = time.monotonic() + 60
    while len(acknowledged) < 40 and time.monotonic() < deadline:
        time.sleep(0.01)
    replicas.first.kill()
    stop.set()
    for thread in writers:
        thread.join(30)
    assert len(acknowledged) >= 40, f"only {len(acknowledged)} writes were acknowledged within 60 s"
    with replicas.client(replicas.second, "alice") as survivor:
        for proposal_id, digest in acknowledged:
            record = survivor.get(f"/v1/proposals/{proposal_id}")
            assert record.status_code == 200, proposal_id
            assert record.json()["revisions"][0]["plan_sha256"] == digest
    with replicas.client(replicas.second, "agent") as agent:
        assert submit(agent, unique_id("after-kill"))["state"] == "pending", (
            "the other replica still takes writes"
        )


def test_idempotency_keys_and_claims_hold_across_replicas(replicas: Replicas) -> None:
    with (
        replicas.client(replicas.first, "agent") as agent_first,
        replicas.client(replicas.second, "agent") as agent_second,
        replicas.client(replicas.first, "alice") as alice_first,
        replicas.client(replicas.second, "alice") as alice_second,
    ):
        proposal_id = unique_id("idem")
        digest = submit(agent_first, proposal_id)["plan_sha256"]
        again = agent_second.post("/v1/proposals", content=body(proposal(proposal_id)))
        assert (again.status_code, again.json()["plan_sha256"]) == (200, digest)
        first = decide(alice_first, proposal_id, 1, digest, key="same-key")
        assert first.status_code == 201
        retried = decide(alice_second, proposal_id, 1, digest, key="same-key")
        assert (retried.status_code, retried.json()) == (201, first.json())
        assert retried.headers["idempotent-replayed"] == "true"
        other_body = decide(alice_second, proposal_id, 1, digest, "reject", key="same-key")
        assert other_body.status_code == 422
        claimed = claim(agent_first, proposal_id, 1, digest, key="claim-1")
        assert claimed.status_code == 201
        assert claim(agent_second, proposal_id, 1, digest, key="claim-1").json() == claimed.json()
        second_claim = claim(agent_second, proposal_id, 1, digest, key="claim-2")
        assert (second_claim.status_code, second_claim.json()["claimed_by"]) == (409, "agent")
        report = {
            "revision": 1,
            "plan_sha256": digest,
            "claim_id": claimed.json()["claim_id"],
            "calls": [{"seq": 1, "status": 200}],
        }
        path = f"/v1/proposals/{proposal_id}/executions"
        stored = agent_first.post(path, json=report, headers={"Idempotency-Key": "run-1"})
        assert stored.status_code == 201
        replayed = agent_second.post(path, json=report, headers={"Idempotency-Key": "run-1"})
        assert (replayed.status_code, replayed.json()) == (201, stored.json())
        history = alice_second.get(f"/v1/proposals/{proposal_id}").json()["history"]
        assert [event["event"] for event in history] == ["submitted", "approved", "claimed", "executed"]


def test_a_revoked_token_is_refused_at_its_very_next_idle_poll_on_every_replica(replicas: Replicas) -> None:
    """An unchanged poll is a 304 on either replica, and neither remembers a token's verdict: the
    first poll after `reviewer token revoke` returns is refused, on both."""
    token = replicas.first.token("poller", "reviewer")
    with replicas.first.client(token) as on_first, replicas.second.client(token) as on_second:
        unchanged = {"If-None-Match": on_first.get("/v1/proposals").headers["etag"]}
        for client in (on_first, on_second, on_first, on_second):
            assert client.get("/v1/proposals", headers=unchanged).status_code == 304
        revoke = reviewer_command("token", "revoke", "poller", "--db", str(replicas.first.db))
        subprocess.run(revoke, check=True, capture_output=True)
        for client in (on_second, on_first):
            refused = client.get("/v1/proposals", headers=unchanged)
            assert (refused.status_code, refused.json()["error"]) == (401, "unauthorized")
