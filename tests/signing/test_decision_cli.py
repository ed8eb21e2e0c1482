"""`reviewer approve` / `reviewer reject` against a real queue on a loopback port."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.forked_commands import run_reviewer
from tests.queue_harness import (
    Actors,
    Service,
    reviewer_command,
    served_with_actors,
    submit,
    unique_id,
)
from tests.signing.ssh import make_key


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors]]:
    yield from served_with_actors(tmp_path_factory.mktemp("queue"))


def run(
    queue: tuple[Service, Actors], *args: str, token: str = "alice", **environ: str
) -> subprocess.CompletedProcess[str]:
    service, actors = queue
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("SSH_AUTH_SOCK", "REVIEWER_SIGNING_KEY", "XDG_CONFIG_HOME")
    }
    env.update(
        REVIEWER_QUEUE=service.url,
        REVIEWER_TOKEN=actors.tokens[token],
        XDG_CONFIG_HOME=str(Path(service.db).parent / "no-config"),
        **environ,
    )
    return run_reviewer(reviewer_command(*args), capture_output=True, text=True, env=env, timeout=60)


def state_of(queue: tuple[Service, Actors], proposal_id: str) -> dict[str, object]:
    response = queue[1].alice.get(f"/v1/proposals/{proposal_id}/decision")
    assert response.status_code == 200
    answer: dict[str, object] = response.json()
    return answer


def test_approve_unsigned_names_the_digest_and_says_who_approved(queue: tuple[Service, Actors]) -> None:
    proposal_id = unique_id("cli")
    answer = submit(queue[1].agent, proposal_id)
    result = run(queue, "approve", proposal_id, "--revision", "1", "--digest", answer["plan_sha256"])
    assert result.returncode == 0, result.stderr
    assert f"{proposal_id} revision 1" in result.stdout and "approved by alice (unsigned)" in result.stdout
    assert state_of(queue, proposal_id)["state"] == "approved"
    assert queue[1].tokens["alice"] not in result.stdout + result.stderr


def test_reject_takes_the_digest_from_the_queue(queue: tuple[Service, Actors]) -> None:
    proposal_id = unique_id("cli")
    submit(queue[1].agent, proposal_id)
    result = run(queue, "reject", proposal_id, "--revision", "1", "--reason", "not\x1b[31m today")
    assert result.returncode == 0, result.stderr
    assert "rejected by alice (unsigned): not\\x1b[31m today" in result.stdout
    state = state_of(queue, proposal_id)
    assert state["state"] == "rejected" and state["reason"] == "not\x1b[31m today"


def test_approving_an_old_revision_says_which_one_waits(queue: tuple[Service, Actors]) -> None:
    proposal_id = unique_id("cli")
    first = submit(queue[1].agent, proposal_id)
    second = submit(queue[1].agent, proposal_id, 2, calls=3)
    result = run(queue, "approve", proposal_id, "--revision", "1", "--digest", first["plan_sha256"])
    assert result.returncode == 1
    assert result.stderr.strip() == (
        f"reviewer approve: revision 1 is not the latest: revision 2 (sha256 {second['plan_sha256']}) "
        "is waiting; review it first"
    )
    assert state_of(queue, proposal_id)["state"] == "pending"


def test_a_bad_digest_is_refused_before_anything_is_sent(queue: tuple[Service, Actors]) -> None:
    proposal_id = unique_id("cli")
    submit(queue[1].agent, proposal_id)
    result = run(queue, "approve", proposal_id, "--revision", "1", "--digest", "abc123")
    assert result.returncode == 2 and "64 hex digits" in result.stderr
    assert state_of(queue, proposal_id)["state"] == "pending"


def test_no_agent_is_one_line_and_no_decision_is_sent(queue: tuple[Service, Actors], tmp_path: Path) -> None:
    alice = make_key(tmp_path, "alice")
    proposal_id = unique_id("cli")
    answer = submit(queue[1].agent, proposal_id)
    result = run(
        queue,
        "approve",
        proposal_id,
        "--revision",
        "1",
        "--digest",
        answer["plan_sha256"],
        REVIEWER_SIGNING_KEY=str(alice.public_file),
    )
    assert result.returncode == 1
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("reviewer approve: no ssh-agent: SSH_AUTH_SOCK is not set")
    assert lines[0].endswith("nothing was sent")
    assert state_of(queue, proposal_id)["state"] == "pending"


def test_a_key_file_others_can_read_is_one_line_and_no_decision_is_sent(
    queue: tuple[Service, Actors], tmp_path: Path
) -> None:
    alice = make_key(tmp_path, "alice")
    alice.private.chmod(0o640)
    proposal_id = unique_id("cli")
    answer = submit(queue[1].agent, proposal_id)
    result = run(
        queue,
        "approve",
        proposal_id,
        "--revision",
        "1",
        "--digest",
        answer["plan_sha256"],
        "--key",
        str(alice.private),
    )
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [
        f"reviewer approve: the key file {alice.private} is readable by others (mode 0640): "
        f"run `chmod 600 {alice.private}`; nothing was sent"
    ]
    assert state_of(queue, proposal_id)["state"] == "pending"


def test_request_changes_says_what_to_change_and_the_next_revision_waits(
    queue: tuple[Service, Actors],
) -> None:
    proposal_id = unique_id("cli")
    submit(queue[1].agent, proposal_id)
    blank = run(queue, "request-changes", proposal_id, "--revision", "1", "--reason", " ")
    assert blank.returncode == 2
    assert blank.stderr.strip() == (
        "reviewer request-changes: --reason must say why (or what to change); nothing was sent"
    )
    assert state_of(queue, proposal_id)["state"] == "pending"
    result = run(queue, "request-changes", proposal_id, "--revision", "1", "--reason", "keep t3 open")
    assert result.returncode == 0, result.stderr
    assert "revision 1" in result.stdout
    assert "changes requested by alice (unsigned): keep t3 open" in result.stdout
    state = state_of(queue, proposal_id)
    assert (state["state"], state["decided_by"], state["reason"]) == (
        "changes_requested",
        "alice",
        "keep t3 open",
    )
    submit(queue[1].agent, proposal_id, 2, calls=1)
    assert state_of(queue, proposal_id)["state"] == "pending"
