"""A gated run of the reference task through a real queue, and `reviewer verify` run on it as a reviewer."""

from __future__ import annotations

import asyncio
import os
import subprocess
from typing import Any

import httpx
import msgspec
import pytest

from reviewer.agent import QueueAgent, RunStopped
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import StoredExecution
from reviewer.sample_api import tools
from tests.agent.fixtures import Queue
from tests.forked_commands import run_reviewer
from tests.queue_harness import reviewer_command


def gated_run(
    queue: Queue,
    api_url: str,
    proposal_id: str,
    during_the_run: Any = None,
    **execute: Any,
) -> None:
    """Dry run through `api_url`, submit, approve, replay through it (`execute` passed on to
    `QueueAgent.execute`); `during_the_run(response)` is awaited with the run's first write's answer
    (between its claim and its report)."""

    pending = [during_the_run] if during_the_run is not None else []

    async def first_answer(response: httpx.Response) -> None:
        if pending and response.request.method != "GET":
            await pending.pop()(response)

    async def scenario() -> None:
        async with httpx.AsyncClient(base_url=api_url) as api:
            _, proposal = await tools.dry_run_reference(api, "server", "nginx", api_url)
        proposal = msgspec.structs.replace(proposal, proposal_id=proposal_id)
        async with (
            QueueClient(queue.url, queue.agent_token) as client,
            QueueClient(queue.url, queue.reviewer_token) as reviewer,
            httpx.AsyncClient(base_url=api_url, event_hooks={"response": [first_answer]}) as api,
        ):
            agent = QueueAgent(client, poll_interval=0.05)
            answer = await agent.submit(proposal)
            await reviewer.decide(proposal_id, 1, answer.plan_sha256, "approve", "the 409 is expected")
            approval = await agent.wait_for_decision(proposal_id, 1, timeout=10)
            with pytest.raises(RunStopped, match="#4 delete_ticket 409"):
                await agent.execute(approval, client=api, **execute)

    asyncio.run(scenario())


async def executions(queue: Queue, proposal_id: str) -> list[StoredExecution]:
    async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
        return await reviewer.get_executions(proposal_id)


def verify(queue: Queue, proposal_id: str, source: str) -> subprocess.CompletedProcess[str]:
    environment = {**os.environ, "REVIEWER_TOKEN": queue.reviewer_token}
    return run_reviewer(
        reviewer_command("verify", proposal_id, "--audit", source, "--queue", queue.url),
        capture_output=True,
        text=True,
        env=environment,
        timeout=60,
    )
