"""A gated run verified call by call against nginx's access log (DESIGN 16's `log_format`), nginx being
Debian's package started here on loopback in front of the sample API.

The agent dry-runs through nginx (its requests carry `dryRun=All`), a reviewer approves, the run replays
the plan through nginx with a request id per write, and `reviewer verify` reads nginx's log.
"""

from __future__ import annotations

import asyncio
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import msgspec
import pytest

from reviewer.agent import QueueAgent, RunStopped
from reviewer.audit.registry import audit_source
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import StoredExecution
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.audit.nginx import Proxy, nginx_in_front_of
from tests.queue_harness import reviewer_command

SUMMARY_ALL_MATCHED = "audit: 4 of 4 calls matched; 0 writes in the audit log no approved call made"


@pytest.fixture
def proxy(sample_api: RunningSampleApi, tmp_path: Path) -> Iterator[Proxy]:
    with nginx_in_front_of(sample_api.base_url, tmp_path / "nginx") as running:
        yield running


def gated_run(queue: Queue, proxy: Proxy, proposal_id: str, during_the_run: Any = None) -> None:
    """Dry run through nginx, submit, approve, replay through nginx; `during_the_run` is awaited after
    the run's first write was answered (between its claim and its report)."""

    pending = [during_the_run] if during_the_run is not None else []

    async def first_answer(response: httpx.Response) -> None:
        if pending and response.request.method != "GET":
            await pending.pop()()

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=proxy.url) as api:
            _, proposal = await tools.dry_run_reference(api, "server", "nginx", proxy.url)
        proposal = msgspec.structs.replace(proposal, proposal_id=proposal_id)
        async with (
            QueueClient(queue.url, queue.agent_token) as client,
            QueueClient(queue.url, queue.reviewer_token) as reviewer,
            httpx.AsyncClient(base_url=proxy.url, event_hooks={"response": [first_answer]}) as api,
        ):
            agent = QueueAgent(client, poll_interval=0.05)
            answer = await agent.submit(proposal)
            await reviewer.decide(proposal_id, 1, answer.plan_sha256, "approve", "the 409 is expected")
            approval = await agent.wait_for_decision(proposal_id, 1, timeout=10)
            with pytest.raises(RunStopped, match="#4 delete_ticket 409"):
                await agent.execute(approval, client=api)

    asyncio.run(scenario())


async def executions(queue: Queue, proposal_id: str) -> list[StoredExecution]:
    async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
        return await reviewer.get_executions(proposal_id)


def verify(queue: Queue, proposal_id: str, source: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "REVIEWER_TOKEN": queue.reviewer_token}
    return subprocess.run(
        reviewer_command("verify", proposal_id, "--audit", source, "--queue", queue.url),
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )


def test_a_gated_run_is_verified_call_by_call_by_request_id(queue: Queue, proxy: Proxy) -> None:
    """Every call is found by the id the executor sent (nginx logs `$http_x_request_id`), the 409 too;
    the dry run's four requests are in the log (with `dryRun=All`) and are not counted as writes."""
    gated_run(queue, proxy, "nginx-verified-0001")
    result = verify(queue, "nginx-verified-0001", f"access-log:{proxy.access_log}")
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines[-1] == SUMMARY_ALL_MATCHED
    call_lines = [line for line in lines if line.startswith("call ")]
    assert len(call_lines) == 4
    assert all("matched at" in line and "by request id" in line for line in call_lines), call_lines
    (report,) = asyncio.run(executions(queue, "nginx-verified-0001"))
    assert [entry["seq"] for entry in report.request_ids or []] == [1, 2, 3, 4]
    for entry in report.request_ids or []:
        assert entry["header"] == "X-Request-Id"
        assert len(entry.get("api_request_id") or "") == 32, entry  # nginx's own $request_id, answered
    rows = [row for row in audit_source(f"access-log:{proxy.access_log}").rows()]
    assert sum(1 for row in rows if getattr(row, "is_dry_run", False)) == 4
    assert sum(1 for row in rows if getattr(row, "counts_as_write", False)) == 4


def test_a_second_clients_write_during_the_run_is_reported_as_unplanned(queue: Queue, proxy: Proxy) -> None:
    """Another client with the same API writes while the run holds its claim: every approved call still
    matches, the write nobody approved is listed with its user agent, and the exit is 1."""

    async def second_client() -> None:
        async with httpx.AsyncClient(base_url=proxy.url, headers={"User-Agent": "someone-else/1"}) as other:
            (await other.post("/v1/tickets", json={"title": "made around the gate"})).raise_for_status()

    gated_run(queue, proxy, "nginx-unplanned-0001", second_client)
    result = verify(queue, "nginx-unplanned-0001", f"access-log:{proxy.access_log}")
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    assert lines[-1] == "audit: 4 of 4 calls matched; 1 writes in the audit log no approved call made"
    (unplanned,) = [line for line in lines if line.startswith("unplanned: ")]
    assert unplanned.startswith("unplanned: POST /v1/tickets 201 at ")


def test_a_log_without_the_runs_window_cannot_vouch_for_it(
    queue: Queue, proxy: Proxy, tmp_path: Path
) -> None:
    """An empty (or rotated-away) log is not a clean bill: the calls are missing and the exit is 1."""
    gated_run(queue, proxy, "nginx-empty-0001")
    empty = tmp_path / "empty.log"
    empty.write_text("", encoding="utf-8")
    result = verify(queue, "nginx-empty-0001", f"access-log:{empty}")
    assert result.returncode == 1
    assert "it cannot vouch for the run" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "audit: 0 of 4 calls matched; 0 writes in the audit log no approved call made"
    )
    missing = verify(queue, "nginx-empty-0001", f"access-log:{tmp_path / 'no-such.log'}")
    assert missing.returncode == 1
    assert "could not be read" in missing.stdout
