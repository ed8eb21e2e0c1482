"""`reviewer run` waits through a queue that is stopped and started again on the same database: the
plan waits, the queue's process stops, `reviewer run` says once that the queue is away and keeps
asking, the queue comes back, a reviewer approves, and the plan runs once."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.queue_harness import start_service
from tests.run.harness import Queue, SampleApi, reviewer_decides, start_run

AGENTS = str(Path(__file__).with_name("agents.py"))


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    service = start_service(tmp_path_factory.mktemp("restart"))
    reviewer = service.client(service.token("alice", "reviewer"))
    try:
        yield Queue(service, service.token("run-agent", "agent"), reviewer)
    finally:
        reviewer.close()
        if service.process is not None:
            service.stop()


def test_reviewer_run_waits_while_the_queue_is_stopped_and_runs_its_plan_once_after_approval(
    restartable: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    queue = restartable
    run = start_run(
        queue,
        sample_api,
        writable=tmp_path,
        command=[sys.executable, AGENTS, "drift", str(tmp_path / "runs")],
    )
    proposal_id, _ = run.wait_for_plan()
    queue.service.stop()
    stderr = run.process.stderr
    assert stderr is not None
    for line in stderr:
        run.lines.append(line)
        if "is away" in line:
            break
    else:
        raise AssertionError("reviewer run ended while the queue was away:\n" + "".join(run.lines))
    queue.service.start()
    reviewer_decides(queue, proposal_id)
    status, output = run.finish()

    assert status == 0, output
    away = [line for line in output.splitlines() if "is away" in line]
    back = [line for line in output.splitlines() if " is back after " in line]
    assert len(away) == 1 and f"while waiting for a decision on {proposal_id}" in away[0], output
    assert len(back) == 1 and back[0].startswith(f"reviewer run: the queue at {queue.url} is back"), output
    assert [(request["method"], request["path"]) for request in sample_api.real_requests()] == [
        ("POST", "/v1/tickets"),
        ("PATCH", "/v1/tickets/t1"),
    ], "the approved plan ran once"
