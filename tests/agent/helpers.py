"""Small helpers shared by the agent tests: run the reference task in one mode, read the API's log."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import httpx

from reviewer.agent import Approval, Execution, execute_approved
from reviewer.plan.proposal import Proposal
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import Decision, ProposalSummary
from reviewer.queue.refusals import NotFound
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


async def first_pending(
    reviewer: QueueClient, wanted: Callable[[ProposalSummary], bool], what: str, timeout: float = 30
) -> ProposalSummary:
    """The first pending proposal `wanted` picks, as soon as the queue lists it (polled every 50 ms,
    for at most `timeout` seconds)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        listing = await reviewer.list_proposals(state="pending")
        for item in listing.page.proposals if listing.page else []:
            if wanted(item):
                return item
        await asyncio.sleep(0.05)
    raise AssertionError(f"{what} was not pending in the queue within {timeout} s")


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


async def reviewer_decides_next(
    queue_url: str,
    reviewer_token: str,
    agent_name: str,
    decision: Decision = "approve",
    reason: str = "looks right",
    *,
    attempts: int = 800,
) -> Proposal:
    """A reviewer who decides the next proposal `agent_name` submits (one that was not pending when
    they started looking): for agents that name their own proposals."""
    async with QueueClient(queue_url, reviewer_token) as reviewer:

        async def pending() -> dict[str, ProposalSummary]:
            listing = await reviewer.list_proposals(state="pending", limit=100)
            assert listing.page is not None
            return {
                summary.proposal_id: summary
                for summary in listing.page.proposals
                if summary.agent_name == agent_name
            }

        already = set(await pending())
        for _ in range(attempts):
            fresh = [summary for key, summary in (await pending()).items() if key not in already]
            if fresh:
                await asyncio.sleep(0)
                return await reviewer_decides(
                    queue_url, reviewer_token, fresh[0].proposal_id, decision, reason, attempts=1
                )
            await asyncio.sleep(0.025)
    raise AssertionError(f"no new proposal from {agent_name} reached the queue")
