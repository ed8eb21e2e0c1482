"""`reviewer run --audit access-log:FILE`: nginx (Debian's package, on loopback) in front of the sample
API writes DESIGN 16's access log. A child that writes around the gate during the dry run raises the
alarm on its plan before anyone approves it; a write around the gate during the real run is named in
the summary line after it, the approved calls matched by their request ids."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.audit.nginx import Proxy, nginx_in_front_of
from tests.run.conftest import API_TOKEN, Queue, SampleApi, proposal, reviewer_decides, start_run

AGENTS = str(Path(__file__).with_name("agents.py"))


@pytest.fixture
def proxied(sample_api: SampleApi, tmp_path: Path) -> Iterator[tuple[SampleApi, Proxy]]:
    """The sample API behind nginx, as `reviewer run --api` reaches it."""
    with nginx_in_front_of(sample_api.url, tmp_path / "nginx") as proxy:
        yield SampleApi(proxy.url, sample_api.process), proxy


def run_around(
    queue: Queue, proxied: tuple[SampleApi, Proxy], tmp_path: Path, when: str, *options: str
) -> tuple[str, str, str]:
    """`reviewer run --audit access-log:...` of the `around` agent, approved; its plan's id, the
    plan's `dry_run` as the queue holds it, and everything `reviewer run` said."""
    api, proxy = proxied
    command = [sys.executable, AGENTS, "around", str(tmp_path / "runs"), when, proxy.url, API_TOKEN]
    # Unsandboxed: the child reaches nginx itself, as a process around the gate does.
    run = start_run(
        queue, api, "--no-sandbox", "--audit", f"access-log:{proxy.access_log}", *options, command=command
    )
    proposal_id, revision = run.wait_for_plan()
    dry_run = proposal(queue, proposal_id, revision)["dry_run"]
    reviewer_decides(queue, proposal_id)
    status, stderr = run.finish()
    assert status == 0, stderr
    return proposal_id, str(dry_run.get("writes_around")), stderr


def test_a_child_writing_around_the_gate_in_the_dry_run_raises_the_alarm_on_its_plan(
    queue: Queue, proxied: tuple[SampleApi, Proxy], tmp_path: Path
) -> None:
    _, writes_around, stderr = run_around(queue, proxied, tmp_path, "dry")
    assert writes_around == "1"
    assert "dry run: 1 writes during the dry run the gate did not make; the plan carries the alarm" in stderr
    assert "unplanned during the dry run: PATCH /v1/tickets/t2 200 at " in stderr


def test_a_write_around_the_gate_in_the_real_run_is_named_after_it(
    queue: Queue, proxied: tuple[SampleApi, Proxy], tmp_path: Path
) -> None:
    """`--rerun`: the child runs again for real and writes around the gate once; both approved calls
    match by the request id sent in `--request-id-header`, the third write is unplanned."""
    _, writes_around, stderr = run_around(
        queue, proxied, tmp_path, "real", "--rerun", "--request-id-header", "X-Request-Id"
    )
    assert writes_around == "0"
    lines = [line.removeprefix("reviewer run: ") for line in stderr.splitlines()]
    assert lines[-1] == "audit: 2 of 2 calls matched; 1 writes in the audit log no approved call made"
    assert any(line.startswith("unplanned: PATCH /v1/tickets/t2 200 at ") for line in lines), stderr
