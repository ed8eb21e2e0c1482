"""The request id each real write carries: under the header the runner names, one per call, in the report."""

from __future__ import annotations

import asyncio
import secrets
from datetime import UTC, datetime, timedelta

import httpx

from reviewer.agent import execute_approved, local_approval
from reviewer.audit.matching import SentCall, Window, match_audit, unplanned_rows
from reviewer.audit.registry import audit_source
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


def test_a_call_whose_id_no_entry_carries_is_missing_never_another_clients_write(
    sample_api: RunningSampleApi,
) -> None:
    """The sample API's log keeps request ids. Two other clients create tickets on the run's path in its
    window, one sending no id, one an id of its own; the run's create went out with an id no entry
    carries. It is missing, and both writes are unplanned: same method, path and time never stand in
    for the id."""
    for headers in ({}, {"X-Request-Id": secrets.token_hex(16)}):
        created = httpx.post(f"{sample_api.base_url}/v1/tickets", json={"title": "not ours"}, headers=headers)
        assert created.status_code == 201
    now = datetime.now(UTC)
    ours = SentCall(1, "create_ticket", "POST", "/v1/tickets", (), 201, (secrets.token_hex(16),), now)
    source = audit_source(f"sample:{sample_api.base_url}/v1/audit")
    result = match_audit(
        [ours], source.rows(), Window(now - timedelta(minutes=1), now), (), source.keeps_request_ids
    )
    assert [(one.verdict, one.row) for one in result.calls] == [("missing", None)]
    assert [row.path for row in unplanned_rows(result.unplanned)] == ["/v1/tickets", "/v1/tickets"]
    assert not result.verified
