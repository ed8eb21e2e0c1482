"""An agent that runs one approved plan and says how it went: `python -m tests.service.windows_agent
QUEUE_URL API_URL PROPOSAL_ID` with its token in REVIEWER_TOKEN. The change-window tests start it under
Debian's `faketime`, so its wall clock says whatever the test wants; exit 0 when the plan ran whole, 3
when the change windows kept it (the refusal on stdout), 1 otherwise."""

from __future__ import annotations

import asyncio
import os
import sys

import httpx

from reviewer.agent import NoApproval, OutsideChangeWindow, QueueAgent, RunStopped
from reviewer.queue.client import QueueClient


async def main(queue_url: str, api_url: str, proposal_id: str) -> int:
    async with (
        QueueClient(queue_url, os.environ["REVIEWER_TOKEN"]) as client,
        httpx.AsyncClient(base_url=api_url) as api,
    ):
        agent = QueueAgent(client, poll_interval=0.05)
        try:
            approval = await agent.wait_for_decision(proposal_id, 1, timeout=10)
            execution = await agent.execute(approval, client=api)
        except OutsideChangeWindow as kept:
            print(f"kept by {kept.window}: {kept}")
            return 3
        except (NoApproval, RunStopped) as failed:
            print(f"{type(failed).__name__}: {failed}")
            return 1
    print(f"ran {len(execution.executed)} calls")
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(*sys.argv[1:4])))
