"""Expiry said out loud, in real seconds: `reviewer serve --pending-ttl 2` with a webhook receiver,
and nobody deciding. A `Gate` and `reviewer run`, each waiting on its own plan, end saying the plan
expired; the receiver gets `proposal.expired` once for each, when it expires."""

from __future__ import annotations

import asyncio
import sys
from datetime import datetime
from pathlib import Path

from reviewer.agent import Gate, GateResult, ProposalExpired
from reviewer.sample_api import tools
from tests.queue_harness import start_service
from tests.run.harness import Queue, SampleApi, start_run
from tests.service.notifications.receiver import Receiver, notify_options

AGENTS = str(Path(__file__).with_name("agents.py"))
PENDING_TTL = 2.0
LATE_AT_MOST = 1.0
"""Seconds `proposal.expired` may follow the expiry: the sweep waits for the next deadline, not for
its 5 s interval."""


async def gate_waits(queue_url: str, token: str) -> GateResult:
    async with Gate(queue=queue_url, token=token, poll_interval=0.1, decision_timeout=20) as gate:

        async def close_t1() -> None:
            await tools.update_ticket(id="t1", status="closed")

        return await gate.run(close_t1, title="Close t1, nobody decides", proposal_id="gate-forgotten")


def test_a_plan_nobody_decides_expires_the_agents_say_so_and_the_receiver_hears_once(
    sample_api: SampleApi, tmp_path: Path
) -> None:
    receiver = Receiver().start()
    service = start_service(tmp_path, "--pending-ttl", str(PENDING_TTL), *notify_options(receiver, tmp_path))
    try:
        tokens = service.tokens({"gate-agent": "agent", "run-agent": "agent", "alice": "reviewer"})
        queue = Queue(service, tokens["run-agent"], service.client(tokens["alice"]))
        run = start_run(
            queue, sample_api, "--title", "nobody decides", command=[sys.executable, AGENTS, "tickets"]
        )
        result = asyncio.run(gate_waits(service.url, tokens["gate-agent"]))
        status, stderr = run.finish(timeout=30)
        arrived = receiver.wait_for(4)
        queue.reviewer.close()
    finally:
        service.stop()
        receiver.stop()

    assert isinstance(result.refusal, ProposalExpired)
    assert "gate-forgotten revision 1 expired: no reviewer decided it before the queue's pending time" in str(
        result.refusal
    )
    assert status == 1
    assert "expired: no reviewer decided it before the queue's pending time ran out. Nothing ran" in stderr
    assert [(line["method"], line["path"]) for line in sample_api.real_requests()] == []

    expired = [arrival.document for arrival in arrived if arrival.event == "proposal.expired"]
    assert sorted(event["proposal_id"] == "gate-forgotten" for event in expired) == [False, True]
    assert all(event["was"] == "pending" for event in expired)
    for event in expired:
        lag = datetime.fromisoformat(event["at"]) - datetime.fromisoformat(event["expired_at"])
        assert 0 <= lag.total_seconds() <= LATE_AT_MOST, event
    events = [arrival.event for arrival in receiver.accepted()]
    assert events.count("proposal.expired") == 2, "each plan's expiry once, though the sweep ran again"
    assert events.count("proposal.waiting") == 2
