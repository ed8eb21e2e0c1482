"""The request id each real write carries: under the header the runner names, one per call, in the report."""

from __future__ import annotations

import asyncio

import httpx

from reviewer.agent import execute_approved, local_approval
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.helpers import dry_proposal


def test_each_write_carries_its_own_id_under_the_configured_header(sample_api: RunningSampleApi) -> None:
    """`Audit-ID` (Kubernetes' header) instead of the default: every write sent carries a distinct id,
    the one the run reports for it; no read carries one."""
    proposal = asyncio.run(dry_proposal(sample_api, "server"))
    seen: list[tuple[str, str | None]] = []

    async def record(request: httpx.Request) -> None:
        seen.append((request.method, request.headers.get("Audit-ID")))

    async def run():  # type: ignore[no-untyped-def]
        async with httpx.AsyncClient(base_url=sample_api.base_url, event_hooks={"request": [record]}) as api:
            return await execute_approved(
                None, local_approval(proposal), client=api, audit=tools.AUDIT, request_id_header="Audit-ID"
            )

    execution = asyncio.run(run())
    writes = [request_id for method, request_id in seen if method != "GET"]
    reported = execution.request_ids()
    assert [entry["request_id"] for entry in reported] == writes
    assert len(set(writes)) == 4 and all(writes)
    assert {entry["header"] for entry in reported} == {"Audit-ID"}
    assert all(request_id is None for method, request_id in seen if method == "GET")
    assert [entry["seq"] for entry in reported] == [call.seq for call in execution.executed]
