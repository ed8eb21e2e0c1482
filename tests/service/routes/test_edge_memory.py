"""Memory spent on a request stays in proportion to its bytes, measured on the real
service process: its peak resident memory (VmHWM), reset before each request through clear_refs."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.queue_harness import Service, claimed_report, decide, proposal, start_service

MB = 1024 * 1024
PROPOSAL_FACTOR = 4
"""Accepting a proposal may cost at most four times its bytes above the memory it started from."""
REPORT_FACTOR = 6
"""Storing a report or reading it back: about five times its bytes (docs/decisions.md), so at most
six. Its calls are decoded one at a time for the limit checks and kept as canonical JSON bytes for
the Idempotency-Key's fingerprint. A bound of five failed once, at 5.01 times (78 MB for 15 MB), in a
whole suite of three workers: the peak varies from run to run by a few MB."""
REFUSED_BUDGET = 16 * MB
"""A request refused before its body is read costs no more than this, whatever its size."""


def resident(pid: int, field: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


class Peak:
    """The growth of a process's peak resident memory over a block, after resetting the peak."""

    def __init__(self, pid: int) -> None:
        self.pid = pid

    def __enter__(self) -> Peak:
        Path(f"/proc/{self.pid}/clear_refs").write_text("5")
        self.start = resident(self.pid, "VmRSS")
        return self

    def __exit__(self, *exc: object) -> None:
        self.growth = resident(self.pid, "VmHWM") - self.start


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, str, str]]:
    service = start_service(tmp_path_factory.mktemp("memory"))
    yield service, service.token("agent", "agent"), service.token("alice", "reviewer")
    service.stop()


def big_proposal(proposal_id: str, calls: int) -> bytes:
    value = proposal(proposal_id, calls=1)
    template = value["calls"][0]
    value["calls"] = [
        {**template, "seq": seq, "args": {"id": f"t{seq}", "status": "closed", "comment": "x" * 200}}
        for seq in range(1, calls + 1)
    ]
    return json.dumps(value).encode()


def report_calls(count: int) -> list[dict[str, object]]:
    return [
        {"seq": seq, "status": 200, "answer": {"id": f"t{seq}", "note": "y" * 200}} for seq in range(count)
    ]


@pytest.mark.slow
def test_a_64_mb_report_for_a_proposal_that_does_not_exist_costs_almost_nothing(
    queue: tuple[Service, str, str],
) -> None:
    service, agent, _ = queue
    assert service.process is not None
    body = json.dumps({"revision": 1, "plan_sha256": "0" * 64, "calls": report_calls(270_000)}).encode()
    assert len(body) > 60 * MB
    with Peak(service.process.pid) as peak:
        response = httpx.post(
            f"{service.url}/v1/proposals/nothing-here/executions",
            content=body,
            headers={"Authorization": f"Bearer {agent}", "Content-Type": "application/json"},
            timeout=120,
        )
    assert response.status_code == 404
    assert peak.growth < REFUSED_BUDGET, f"{peak.growth / MB:.0f} MB for a refused report"


@pytest.mark.slow
def test_a_big_proposal_and_a_big_report_cost_a_few_times_their_bytes(
    queue: tuple[Service, str, str],
) -> None:
    service, agent_token, alice_token = queue
    assert service.process is not None
    headers = {"Authorization": f"Bearer {agent_token}", "Content-Type": "application/json"}
    body = big_proposal("big-one", 110_000)
    assert len(body) > 32 * MB
    with Peak(service.process.pid) as accepting:
        submitted = httpx.post(f"{service.url}/v1/proposals", content=body, headers=headers, timeout=300)
    assert submitted.status_code == 201, submitted.text[:300]
    assert accepting.growth < PROPOSAL_FACTOR * len(body), (
        f"{accepting.growth / MB:.0f} MB to accept {len(body) / MB:.0f} MB"
    )

    with (
        httpx.Client(
            base_url=service.url, headers={"Authorization": f"Bearer {agent_token}"}, timeout=300
        ) as agent,
        httpx.Client(
            base_url=service.url, headers={"Authorization": f"Bearer {alice_token}"}, timeout=300
        ) as alice,
    ):
        digest = submitted.json()["plan_sha256"]
        assert decide(alice, "big-one", 1, digest).status_code == 201
        report = claimed_report(agent, "big-one", 1, digest, calls=report_calls(60_000))
        raw = json.dumps(report).encode()
        assert len(raw) > 14 * MB
        with Peak(service.process.pid) as reporting:
            stored = agent.post(
                "/v1/proposals/big-one/executions", content=raw, headers={"Idempotency-Key": "run-1"}
            )
        assert stored.status_code == 201, stored.text[:300]
        assert reporting.growth < REPORT_FACTOR * len(raw), (
            f"{reporting.growth / MB:.0f} MB to store {len(raw) / MB:.0f} MB"
        )
        with Peak(service.process.pid) as reading:
            history = alice.get("/v1/proposals/big-one/executions")
        assert history.status_code == 200
        assert len(history.json()["executions"][0]["calls"]) == 60_000
        assert reading.growth < REPORT_FACTOR * len(raw), (
            f"{reading.growth / MB:.0f} MB to read {len(raw) / MB:.0f} MB back"
        )
