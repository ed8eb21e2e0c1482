"""Small helpers shared by the agent tests: run the reference task in one mode, read the API's log."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from reviewer.agent import Approval, Execution, execute_approved
from reviewer.api import Decision
from reviewer.client import NotFound, QueueClient
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


async def reviewer_decides(
    queue_url: str,
    reviewer_token: str,
    proposal_id: str,
    decision: Decision = "approve",
    reason: str = "looks right",
    *,
    attempts: int = 400,
) -> Proposal:
    """A reviewer who decides `proposal_id` as soon as the agent has submitted it; returns what they
    decided on, as the queue stores it. Polls (a bounded number of times) because the agent submits
    from another task or process."""
    async with QueueClient(queue_url, reviewer_token) as reviewer:
        for _ in range(attempts):
            try:
                record = await reviewer.get_proposal(proposal_id)
            except NotFound:
                await asyncio.sleep(0.025)
                continue
            latest = record.latest
            await reviewer.decide(proposal_id, latest.revision, latest.plan_sha256, decision, reason)
            return await reviewer.get_revision(proposal_id, latest.revision)
    raise AssertionError(f"{proposal_id} never reached the queue")
