"""Small helpers shared by the agent tests: run the reference task in one mode, read the API's log."""

from __future__ import annotations

from typing import Any

import httpx

from reviewer.agent import Approval, Execution, execute_approved
from reviewer.proposal import Proposal
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi


async def dry_proposal(sample_api: RunningSampleApi, backend: str, **options: Any) -> Proposal:
    """The reference task dry-run through `backend`, as the proposal an agent would submit."""
    async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
        _, proposal = await tools.dry_run_reference(
            api, backend, f"reference-{backend}", sample_api.base_url, **options
        )
    return proposal


async def real_execution(sample_api: RunningSampleApi, approval: Approval, task: Any = None) -> Execution:
    async with httpx.AsyncClient(base_url=sample_api.base_url) as api:
        return await execute_approved(task or tools.reference_task, approval, client=api, audit=tools.AUDIT)


def received(sample_api: RunningSampleApi) -> list[dict[str, Any]]:
    """Every write request the sample API received so far, as it received them."""
    with sample_api.store.lock:
        return [dict(entry) for entry in sample_api.store.request_log]
