"""`Gate(audit="access-log:...")`: the gate reads nginx's access log (the format of
docs/audit-logs.md), nginx being Debian's package started here on loopback in front of the sample
API. A write around the gate during the dry run is an alarm on the plan the reviewer sees; a second
client's write during the real run is named after it, every approved call being matched by the
request id it carried.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import httpx
import pytest

from reviewer.agent import Gate, GateResult
from reviewer.audit.matching import unplanned_rows
from reviewer.plan.proposal import Proposal
from reviewer.reading.analysis import Analysis
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.helpers import reviewer_decides
from tests.audit.gated import executions
from tests.audit.nginx import Proxy, nginx_in_front_of


@pytest.fixture
def proxy(sample_api: RunningSampleApi, tmp_path: Path) -> Iterator[Proxy]:
    with nginx_in_front_of(sample_api.base_url, tmp_path / "nginx") as running:
        yield running


async def gated_run(
    queue: Queue, proxy: Proxy, api: httpx.AsyncClient, decision: Literal["approve", "reject"], task: Any
) -> tuple[GateResult, Proposal]:
    proposal_id = f"gate-audit-{uuid.uuid4().hex[:8]}"
    async with Gate(
        api=api,
        queue=queue.url,
        token=queue.agent_token,
        backend="server",
        dry_run_query=tools.DRY_RUN_QUERY,
        audit=f"access-log:{proxy.access_log}",
        poll_interval=0.05,
        decision_timeout=20,
    ) as gate:
        return await asyncio.gather(
            gate.run(task, title=tools.REFERENCE_PLAN_TITLE, proposal_id=proposal_id),
            reviewer_decides(queue.url, queue.reviewer_token, proposal_id, decision, "checked"),
        )


def test_a_write_around_the_gate_during_the_dry_run_is_an_alarm_on_the_plan(
    queue: Queue, proxy: Proxy
) -> None:
    """The task, besides its gated calls, writes twice with a client of its own (as a child process
    would): the plan the reviewer decides carries `writes_around == 2` and the analysis's alarm."""

    async def task_that_writes_around() -> None:
        await tools.reference_task()
        async with httpx.AsyncClient(base_url=proxy.url, headers={"User-Agent": "child/1"}) as child:
            (await child.patch("/v1/tickets/t2", json={"status": "closed"})).raise_for_status()
            await child.delete("/v1/tickets/t9")  # 404, still a write the API was asked for

    async def scenario() -> tuple[GateResult, Proposal]:
        async with httpx.AsyncClient(base_url=proxy.url) as api:
            return await gated_run(queue, proxy, api, "reject", task_that_writes_around)

    result, seen = asyncio.run(scenario())
    assert seen.dry_run.writes_around == 2
    assert result.dry_run_audit is not None
    assert [(row.method, row.path) for row in unplanned_rows(result.dry_run_audit.unplanned)] == [
        ("PATCH", "/v1/tickets/t2"),
        ("DELETE", "/v1/tickets/t9"),
    ]
    analysis = Analysis(seen)
    assert analysis.alarm_names[0] == "writes_around", analysis.alarm_names
    assert analysis.alarms[0].startswith("2 writes in the API's audit log during the dry run")
    assert result.audit is None  # rejected: nothing ran, nothing to verify


def test_a_second_clients_write_during_the_real_run_is_named(queue: Queue, proxy: Proxy) -> None:
    """A quiet dry run carries `writes_around == 0` and no alarm; during the real run another client
    writes: every approved call is matched by its request id, and the write nobody approved is listed."""
    pending = [True]

    async def second_client(response: httpx.Response) -> None:
        request = response.request
        if pending and request.method != "GET" and "dryRun" not in request.url.params:
            pending.clear()
            async with httpx.AsyncClient(base_url=proxy.url, headers={"User-Agent": "other/1"}) as other:
                (await other.post("/v1/tickets", json={"title": "made around the gate"})).raise_for_status()

    async def scenario() -> tuple[GateResult, Proposal]:
        async with httpx.AsyncClient(base_url=proxy.url, event_hooks={"response": [second_client]}) as api:
            return await gated_run(queue, proxy, api, "approve", tools.reference_task)

    result, seen = asyncio.run(scenario())
    assert seen.dry_run.writes_around == 0
    assert "writes_around" not in Analysis(seen).alarm_names
    assert result.execution is not None and result.audit is not None
    assert result.audit.summary == (
        "audit: 4 of 4 calls matched; 1 writes in the audit log no approved call made"
    )
    assert {call.matched_by for call in result.audit.calls} == {"request id"}
    ((unplanned),) = unplanned_rows(result.audit.unplanned)
    assert (unplanned.method, unplanned.path, unplanned.status) == ("POST", "/v1/tickets", 201)
    assert not result.audit.verified
    # The report the queue stored carries the same verification, for the app's `v` to show.
    (stored,) = asyncio.run(executions(queue, seen.proposal_id))
    assert stored.audit is not None
    assert stored.audit["source"] == f"access-log:{proxy.access_log}"
    assert [call["verdict"] for call in stored.audit["calls"]] == ["matched"] * 4
    assert stored.audit["unplanned_count"] == 1 and stored.audit["complete"]
    (written,) = stored.audit["unplanned"]
    assert (written["method"], written["path"], written.get("status")) == ("POST", "/v1/tickets", 201)
    assert written.get("time") is not None and "access.log:" in (written.get("where") or "")
