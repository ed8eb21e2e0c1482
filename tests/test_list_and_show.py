"""`reviewer list` and `reviewer show` against a real queue on a loopback port: what waits, and a
digest `reviewer approve` accepts."""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.queue_harness import Actors, Service, make_actors, reviewer_command, start_service, unique_id

SAMPLES = Path(__file__).resolve().parent.parent / "sample_proposals"


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors]]:
    service = start_service(tmp_path_factory.mktemp("queue"))
    actors = make_actors(service)
    yield service, actors
    actors.close()
    service.stop()


def run(queue: tuple[Service, Actors], *args: str, columns: int = 50) -> subprocess.CompletedProcess[str]:
    """A command as alice, in a terminal `columns` wide, with no config file and no SSH agent."""
    service, actors = queue
    env = {
        key: value
        for key, value in os.environ.items()
        if key not in ("SSH_AUTH_SOCK", "REVIEWER_SIGNING_KEY", "XDG_CONFIG_HOME")
    }
    env.update(
        REVIEWER_QUEUE=service.url,
        REVIEWER_TOKEN=actors.tokens["alice"],
        XDG_CONFIG_HOME=str(Path(service.db).parent / "no-config"),
        COLUMNS=str(columns),
    )
    return subprocess.run(reviewer_command(*args), capture_output=True, text=True, env=env, timeout=60)


def submit_sample(actors: Actors, name: str, proposal_id: str) -> dict[str, str]:
    """A bundled sample under a fresh id (the queue keeps every id it saw)."""
    document = json.loads((SAMPLES / name).read_text())
    document["proposal_id"] = proposal_id
    response = actors.agent.post("/v1/proposals", content=json.dumps(document).encode())
    assert response.status_code == 201, response.text
    answer: dict[str, str] = response.json()
    return answer


def test_show_prints_the_digest_and_the_approve_line_the_queue_accepts(queue: tuple[Service, Actors]) -> None:
    """The printed line, run as printed, approves the revision: the digest is the queue's whole one."""
    proposal_id = unique_id("k8s-show")
    answer = submit_sample(queue[1], "k8s-shop-scale-down.server.json", proposal_id)
    shown = run(queue, "show", proposal_id)
    assert shown.returncode == 0, shown.stderr
    lines = shown.stdout.splitlines()
    assert answer["plan_sha256"] in lines
    assert "runs on production · https://k8s-prod-eu1" in " ".join(line.strip() for line in lines)
    assert any("3 deletes: persistent_volume_claim" in line for line in lines)
    assert all(len(line) <= 50 for line in lines if answer["plan_sha256"] not in line), shown.stdout
    start = next(index for index, line in enumerate(lines) if line.startswith("reviewer approve"))
    command = " ".join(line.rstrip("\\").strip() for line in lines[start : start + 3]).split()
    assert command[:2] == ["reviewer", "approve"] and command[-1] == answer["plan_sha256"]
    approved = run(queue, *command[1:])
    assert approved.returncode == 0, approved.stderr
    assert "approved by alice" in approved.stdout
    after = run(queue, "show", proposal_id, "--json")
    assert json.loads(after.stdout)["state"] == "approved"
    assert json.loads(after.stdout)["approve_command"] == command


def test_list_names_what_waits_newest_first_with_its_alarms(
    queue: tuple[Service, Actors],
) -> None:
    older, newer = unique_id("older"), unique_id("newer")
    submit_sample(queue[1], "deskline-merge.server.json", older)
    submit_sample(queue[1], "k8s-shop-scale-down.server.json", newer)
    listed = run(queue, "list")
    assert listed.returncode == 0, listed.stderr
    text = listed.stdout
    assert text.index(newer) < text.index(older)
    assert all(len(line) <= 50 for line in text.splitlines()), text
    block = text[text.index(newer) : text.index(older)]
    assert "production" in block and "! 1 real refusal" in block and "3 deletes" in block
    scripted = json.loads(run(queue, "list", "--json").stdout)
    ids = [entry["proposal_id"] for entry in scripted]
    assert ids.index(newer) < ids.index(older)
    entry = scripted[ids.index(newer)]
    assert entry["environment"] == "production" and entry["deletes"] == 3
    assert re.fullmatch("[0-9a-f]{64}", entry["plan_sha256"]) and entry["digest_matches"] is True


def test_show_of_an_unknown_proposal_says_so(queue: tuple[Service, Actors]) -> None:
    result = run(queue, "show", unique_id("missing"))
    assert result.returncode == 1 and "reviewer show:" in result.stderr and "Traceback" not in result.stderr
