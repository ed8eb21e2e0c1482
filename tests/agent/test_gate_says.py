"""`Gate.run` says what it waits for: the line that opens the plan once submitted, then the decision."""

from __future__ import annotations

import asyncio
import logging

import pytest

from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.test_gate import gated_run


@pytest.mark.parametrize(("decision", "outcome"), [("approve", "approved by"), ("reject", "not approved")])
def test_the_run_logs_the_line_that_opens_the_plan_then_the_decision(
    queue: Queue, sample_api: RunningSampleApi, caplog: pytest.LogCaptureFixture, decision: str, outcome: str
) -> None:
    with caplog.at_level(logging.INFO, logger="reviewer.agent.gate"):
        result, _ = asyncio.run(gated_run(queue, sample_api, decision))  # type: ignore[arg-type]
    said = [record.getMessage() for record in caplog.records if record.name == "reviewer.agent.gate"]
    proposal_id = result.proposal.proposal_id
    assert said[0] == f"waiting for a reviewer: reviewer review {proposal_id} ({proposal_id} revision 1)"
    assert said[1].startswith(f"{proposal_id} revision 1 {outcome}")
