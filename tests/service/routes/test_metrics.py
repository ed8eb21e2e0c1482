"""`GET /metrics` after a scripted day on two replicas sharing one database (SQLite, PostgreSQL), read
with `prometheus_client`'s own parser: its figures are what the queue holds, the same from either replica."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from reviewer.policy.file import parse_policy
from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from reviewer.service.store import Notifying, QueueStore
from reviewer.service.store.opener import open_store
from tests.queue_harness import body, claim, claimed_report, decide, proposal
from tests.service.postgres import Cluster

POLICY = """
[default]
approvals = 1

[environments.staging]
base_urls = ["https://api.staging.example/*"]
approvals = 1
"""
TARGET = "https://hooks.example #0123abcd"
"""A notification target as the outbox names it: origin and URL digest."""
START = 1_800_000_000.0
LEASE = 300.0
ROLES = {"agent": "agent", "alice": "reviewer", "bob": "reviewer", "prometheus": "metrics"}


@dataclass
class Replicas:
    """Two services on one database, each with its own store, under one injectable clock."""

    db: Path | str
    now: list[float] = field(default_factory=lambda: [START])
    tokens: dict[str, str] = field(default_factory=dict)
    clients: list[dict[str, TestClient]] = field(default_factory=list)
    stores: list[QueueStore] = field(default_factory=list)

    def start(self) -> None:
        for _ in range(2):
            store = open_store(
                self.db,
                clock=lambda: self.now[0],
                pending_ttl=3600,
                approval_ttl=600,
                claim_lease=LEASE,
                policy=parse_policy(POLICY),
                notifying=Notifying(targets=(TARGET,)),
                create=True,
            )
            self.stores.append(store)
            app = create_app(None, store=store)
            self.clients.append(
                {
                    name: TestClient(app, headers={"Authorization": f"Bearer {token}"})
                    for name, token in self.tokens.items()
                }
            )

    def scrape(self, replica: int) -> dict[str, Any]:
        answer = self.clients[replica]["prometheus"].get("/metrics")
        assert answer.status_code == 200, answer.text
        assert answer.headers["content-type"].startswith("text/plain; version=")
        return {family.name: family for family in text_string_to_metric_families(answer.text)}


@pytest.fixture(params=["sqlite", "postgresql"])
def replicas(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Replicas]:
    """The replicas on an SQLite file, or on a fresh PostgreSQL database."""
    if request.param == "sqlite":
        running = Replicas(tmp_path / "queue.sqlite3")
    else:
        cluster: Cluster = request.getfixturevalue("postgres_cluster")
        running = Replicas(cluster.fresh_database())
    store = open_store(running.db, clock=time_zero, pending_ttl=1, approval_ttl=1, create=True)
    running.tokens = {name: mint_token() for name in ROLES}
    for name, role in ROLES.items():
        store.create_token(name, role, hash_token(running.tokens[name]))  # type: ignore[arg-type]
    store.close()
    running.start()
    yield running
    for store in running.stores:
        store.close()


def time_zero() -> float:
    return START


def staged(proposal_id: str, staging: bool) -> bytes:
    document = proposal(proposal_id)
    if staging:
        document["target"]["base_url"] = "https://api.staging.example/v1"
    else:
        del document["target"]["environment"]  # a plan no environment claims: `[default]`
    return body(document)


def samples(family: Any) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    return {(sample.name, tuple(sorted(sample.labels.items()))): sample.value for sample in family.samples}


def test_the_figures_are_what_the_queue_holds_after_a_day_from_either_replica(replicas: Replicas) -> None:
    first, second = replicas.clients
    digests = {}
    for offset, (proposal_id, staging) in enumerate(
        [("run-ok", True), ("refused", False), ("run-lost", True), ("waits-a", True), ("waits-b", False)]
    ):
        replicas.now[0] = START + offset * 10
        answer = first["agent"].post("/v1/proposals", content=staged(proposal_id, staging))
        assert answer.status_code == 201, answer.text
        digests[proposal_id] = answer.json()["plan_sha256"]
    replicas.now[0] = START + 100
    assert decide(second["alice"], "run-ok", 1, digests["run-ok"]).status_code == 201  # 100 s
    report = claimed_report(first["agent"], "run-ok", 1, digests["run-ok"], ended="completed")
    assert first["agent"].post("/v1/proposals/run-ok/executions", json=report).status_code == 201
    refused = {"revision": 1, "plan_sha256": digests["run-ok"], "kind": "ledger", "message": "AlreadyRun"}
    headers = {"Idempotency-Key": "refusal-1"}
    for _ in range(2):  # a retry under its key is counted once
        answer = second["agent"].post("/v1/proposals/run-ok/refusals", json=refused, headers=headers)
        assert answer.status_code == 201, answer.text
    replicas.now[0] = START + 1000
    assert decide(second["bob"], "refused", 1, digests["refused"], "reject", reason="no").status_code == 201
    replicas.now[0] = START + 2000
    assert decide(first["alice"], "run-lost", 1, digests["run-lost"]).status_code == 201  # 1980 s
    assert claim(second["agent"], "run-lost", 1, digests["run-lost"]).status_code == 201
    replicas.now[0] += LEASE  # the lost run's lease ends without a report: unknown
    store = replicas.stores[0]
    store.sweep_events()
    deliveries = store.claim_deliveries(TARGET, 100, lease=60)
    store.finish_delivery(deliveries[0].id, "503 from the receiver", retry_at=None)  # failed for good
    store.finish_delivery(deliveries[1].id, "timed out", retry_at=replicas.now[0] + 60)  # retried
    store.finish_delivery(deliveries[2].id, None, retry_at=None)  # delivered
    outbox = store.list_deliveries(1000)

    scraped = [replicas.scrape(0), replicas.scrape(1)]
    shared = [name for name in scraped[0] if not name.startswith("reviewer_http_requests")]
    assert [samples(scraped[0][name]) for name in shared] == [samples(scraped[1][name]) for name in shared]
    figures = scraped[0]
    assert samples(figures["reviewer_proposals_pending"]) == {
        ("reviewer_proposals_pending", (("environment", "default"),)): 1,
        ("reviewer_proposals_pending", (("environment", "staging"),)): 1,
    }
    pending = first["alice"].get("/v1/proposals", params={"state": "pending"}).json()["proposals"]
    assert sum(sample.value for sample in figures["reviewer_proposals_pending"].samples) == len(pending)
    oldest = samples(figures["reviewer_proposal_oldest_pending_seconds"])
    assert oldest[("reviewer_proposal_oldest_pending_seconds", (("environment", "staging"),))] == (
        replicas.now[0] - (START + 30)
    )
    latency = samples(figures["reviewer_decision_latency_seconds"])
    assert latency[("reviewer_decision_latency_seconds_count", ())] == 3
    assert latency[("reviewer_decision_latency_seconds_sum", ())] == 100 + 990 + 1980
    assert latency[("reviewer_decision_latency_seconds_bucket", (("le", "300.0"),))] == 1
    assert latency[("reviewer_decision_latency_seconds_bucket", (("le", "1800.0"),))] == 2
    assert latency[("reviewer_decision_latency_seconds_bucket", (("le", "3600.0"),))] == 3
    assert samples(figures["reviewer_decisions"]) == {
        ("reviewer_decisions_total", (("decision", "approve"),)): 2,
        ("reviewer_decisions_total", (("decision", "reject"),)): 1,
        ("reviewer_decisions_total", (("decision", "request_changes"),)): 0,
    }
    runs = {labels[0][1]: value for (_, labels), value in samples(figures["reviewer_runs"]).items()}
    assert runs == {
        "completed": 1,
        "unknown": 1,
        "running": 0,
        "stopped": 0,
        "failed": 0,
        "cancelled": 0,
        "reported": 0,
    }
    assert samples(figures["reviewer_executor_refusals"]) == {
        ("reviewer_executor_refusals_total", (("kind", kind),)): int(kind == "ledger")
        for kind in ("trail", "signatures", "ledger", "other")
    }
    still_pending = [d for d in outbox if d.state == "pending"]
    assert samples(figures["reviewer_outbox_backlog"]) == {
        ("reviewer_outbox_backlog", (("target", TARGET),)): len(still_pending)
    }
    assert (
        samples(figures["reviewer_outbox_deliveries"])[
            ("reviewer_outbox_deliveries", (("state", "failed"), ("target", TARGET)))
        ]
        == 1
    )
    assert (
        samples(figures["reviewer_outbox_delivery_attempts"])
        == {
            ("reviewer_outbox_delivery_attempts_total", (("target", TARGET),)): sum(
                d.attempts for d in outbox
            )
        }
        == {("reviewer_outbox_delivery_attempts_total", (("target", TARGET),)): 3}
    )

    requests = [samples(scrape["reviewer_http_requests"]) for scrape in scraped]
    decided = (
        "reviewer_http_requests_total",
        (("method", "POST"), ("route", "/v1/proposals/{proposal_id}/decisions"), ("status", "201")),
    )
    assert (requests[0][decided], requests[1][decided]) == (1, 2)  # each replica counts its own
    submitted = (
        "reviewer_http_requests_total",
        (("method", "POST"), ("route", "/v1/proposals"), ("status", "201")),
    )
    assert (requests[0][submitted], requests[1].get(submitted, 0)) == (5, 0)


def test_only_a_metrics_token_reads_the_metrics(replicas: Replicas) -> None:
    clients = replicas.clients[0]
    assert clients["alice"].get("/metrics").status_code == 403
    assert clients["agent"].get("/metrics").status_code == 403
    anonymous = TestClient(clients["alice"].app)
    assert anonymous.get("/metrics").status_code == 401
    assert clients["prometheus"].get("/v1/proposals").status_code == 403
    assert clients["prometheus"].get("/v1/proposals/run-ok").status_code == 404  # owns nothing, sees nothing
    unmatched = clients["prometheus"].get("/v1/" + replicas.tokens["alice"])
    assert unmatched.status_code == 404
    text = clients["prometheus"].get("/metrics").text
    assert 'route="unmatched"' in text and replicas.tokens["alice"] not in text
