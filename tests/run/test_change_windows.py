"""The executors keep the queue's change windows: with `reviewer serve` in the year-end freeze (its wall
clock set there by libfaketime), a `Gate` and `reviewer run` each wait for their approved plan, and
each ends refused, naming the window and when the plan may run next: `Gate.run`'s result holds
`OutsideChangeWindow` (which `raise_for_stop` raises), `reviewer run` exits 1 with the same words, and
the API gets no write."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

import pytest

from reviewer.agent import Gate, GateResult, OutsideChangeWindow
from reviewer.sample_api import tools
from tests.policies import WORKING_HOURS_AND_YEAR_END_FREEZE
from tests.queue_harness import Service
from tests.run.harness import Queue, SampleApi, reviewer_decides, start_run
from tests.service.store.test_database_faults import faked_clock, needs_faketime

AGENTS = str(Path(__file__).with_name("agents.py"))


async def gate_runs(queue: Queue, token: str, api_url: str) -> GateResult:
    """The Gate's plan, approved by alice once it is submitted; the Gate's result."""
    async with Gate(
        api=api_url, queue=queue.url, token=token, poll_interval=0.1, decision_timeout=20
    ) as gate:

        async def close_t1() -> None:
            await tools.update_ticket(id="t1", status="closed")

        async def alice_approves() -> None:
            asking = "/v1/proposals/gate-in-freeze/decision"
            while (await asyncio.to_thread(queue.reviewer.get, asking)).status_code != 200:
                await asyncio.sleep(0.1)  # until the Gate has submitted its plan
            await asyncio.to_thread(reviewer_decides, queue, "gate-in-freeze")

        result, _ = await asyncio.gather(
            gate.run(close_t1, title="Close t1 in the freeze", proposal_id="gate-in-freeze"), alice_approves()
        )
        return result


@needs_faketime
def test_in_the_freeze_the_gate_and_reviewer_run_are_refused_naming_the_window(
    sample_api: SampleApi, tmp_path: Path
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        WORKING_HOURS_AND_YEAR_END_FREEZE.replace(
            "approvals = 1\n\n[[", f'approvals = 1\nbase_urls = ["{sample_api.url}/*"]\n\n[[', 1
        )
    )
    service = Service(
        db=tmp_path / "queue.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--policy", str(policy)),
        env={**faked_clock(tmp_path / "clock", "2026-12-29 09:00:00"), "TZ": "UTC"},
    )
    service.start()
    try:
        tokens = service.tokens({"gate-agent": "agent", "run-agent": "agent", "alice": "reviewer"})
        with service.client(tokens["alice"]) as alice:
            queue = Queue(service, tokens["run-agent"], alice)
            run = start_run(
                queue,
                sample_api,
                "--title",
                "tickets in the freeze",
                command=[sys.executable, AGENTS, "tickets"],
            )
            proposal_id, _revision = run.wait_for_plan()
            reviewer_decides(queue, proposal_id)
            status, stderr = run.finish(timeout=60)
            result = asyncio.run(gate_runs(queue, tokens["gate-agent"], sample_api.url))
    finally:
        service.stop()

    assert status == 1, stderr
    assert "inside the deny window 'year-end freeze'; runs from 2027-01-04 08:00 UTC" in stderr
    assert isinstance(result.refusal, OutsideChangeWindow)
    assert result.refusal.window == "year-end freeze"
    with pytest.raises(OutsideChangeWindow, match="runs from 2027-01-04 08:00 UTC"):
        result.raise_for_stop()
    assert sample_api.real_requests() == []
