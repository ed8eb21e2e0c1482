"""`reviewer run --allowed-signers FILE [--signatures N] [--ledger PATH]`: the executor for every
language checks the approval's signatures itself, as the library does, and keeps a ledger.

A real queue under a policy (production plans need signed approvals, others do not, so the queue
itself approves unsigned ones there), reviewers whose keys are held only by a real ssh-agent (their
private files deleted), the sample API, and `reviewer run` driven as a user drives it. What is
refused is one line, and the API receives nothing."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.signing.passkeys import AllowedPasskeys
from reviewer.signing.sshsig import DecisionStatement, sign_statement, signer_for
from tests.forked_commands import run_reviewer
from tests.policies import signed_in_production
from tests.queue_harness import reviewer_command, start_service, unique_id
from tests.run.harness import WAITS, Queue, RunProcess, SampleApi, start_run
from tests.signing.authenticator import Authenticator
from tests.signing.ssh import Agent, SshKey, make_key, running_agent

POLICY = signed_in_production(1)
CLOSE_T1 = (
    "import os, urllib.request as u; u.urlopen(u.Request(os.environ['REVIEWER_API_URL'] + '/v1/tickets/t1', "
    "method='PATCH', data=b'{\"status\": \"closed\"}', headers={'content-type': 'application/json'}))"
)
"""COMMAND: one write, closing ticket t1."""


@dataclass
class Team:
    queue: Queue
    keys: dict[str, SshKey]
    agent: Agent
    clients: dict[str, httpx.Client]
    folder: Path

    def allowed_signers(self, *names: str) -> Path:
        """An allowed-signers file listing `names` with their keys, as a team keeps one."""
        path = self.folder / f"allowed-{'-'.join(names) or 'nobody'}"
        path.write_text("".join(f"{name} {self.keys[name].public_file.read_text()}" for name in names))
        return path

    def approve(self, who: str, proposal_id: str, sign: bool = True) -> None:
        """`who` approves the plan as it stands, signing with the key the ssh-agent holds."""
        state = self.clients[who].get(f"/v1/proposals/{proposal_id}/decision").json()
        request: dict[str, Any] = {
            "revision": state["revision"],
            "plan_sha256": state["plan_sha256"],
            "decision": "approve",
            "reason": "",
        }
        if sign:
            statement = DecisionStatement(
                proposal_id, state["revision"], state["plan_sha256"], "approve", who, "2026-11-30T09:00:00Z"
            )
            signer = signer_for(self.keys[who].public_file, self.agent.environ)
            request["statement"] = statement.to_bytes().decode()
            request["signature"] = sign_statement(statement, signer)
        response = self.clients[who].post(
            f"/v1/proposals/{proposal_id}/decisions",
            json=request,
            headers={"Idempotency-Key": unique_id("key")},
        )
        assert response.status_code == 201, response.text


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    folder = tmp_path_factory.mktemp("signers")
    (folder / "policy.toml").write_text(POLICY)
    service = start_service(folder, "--policy", str(folder / "policy.toml"))
    with running_agent(folder / "agent.sock") as agent:
        keys, clients = {}, {}
        for name in ("alice", "bob", "mallory"):
            keys[name] = make_key(folder, name)
            agent.add(keys[name])
            keys[name].private.unlink()  # held by the ssh-agent alone
            made = run_reviewer(
                reviewer_command(
                    "token",
                    "create",
                    "--db",
                    str(service.db),
                    "--name",
                    name,
                    "--role",
                    "reviewer",
                    "--ssh-key",
                    str(keys[name].public_file),
                ),
                capture_output=True,
                text=True,
                timeout=60,
            )
            assert made.returncode == 0, made.stderr
            clients[name] = service.client(made.stdout.strip())
        queue = Queue(service, service.token("run-agent", "agent"), clients["alice"])
        yield Team(queue, keys, agent, clients, folder)
        for client in clients.values():
            client.close()
    service.stop()


def start(team: Team, api: SampleApi, tmp_path: Path, *options: str) -> RunProcess:
    """`reviewer run` closing t1, its state folder (the default ledger's) in `tmp_path`."""
    return start_run(
        team.queue,
        api,
        "--no-sandbox",
        *options,
        command=[sys.executable, "-c", CLOSE_T1],
        environment={"XDG_STATE_HOME": str(tmp_path / "state")},
        cwd=tmp_path,
    )


def refused_line(stderr: str) -> str:
    """The one line after the plan's, which says why nothing ran; no traceback."""
    assert "Traceback" not in stderr, stderr
    lines = stderr.splitlines()
    waits = next(index for index, line in enumerate(lines) if WAITS.search(line))
    assert len(lines) == waits + 2, stderr
    return lines[-1]


def default_ledger(tmp_path: Path) -> Path:
    return tmp_path / "state" / "reviewer" / "ledger.jsonl"


def test_an_approval_signed_by_a_trusted_reviewer_runs_once_and_the_ledger_records_it(
    team: Team, sample_api: SampleApi, tmp_path: Path
) -> None:
    run = start(
        team,
        sample_api,
        tmp_path,
        "--environment",
        "production",
        "--allowed-signers",
        str(team.allowed_signers("alice", "bob")),
    )
    proposal_id, revision = run.wait_for_plan()
    assert sample_api.requests() == []
    team.approve("alice", proposal_id)
    status, stderr = run.finish()
    assert status == 0, stderr
    assert f"1 signature(s) of the people in {team.folder}/allowed-alice-bob" in stderr
    assert [(request["method"], request["path"]) for request in sample_api.requests()] == [
        ("PATCH", "/v1/tickets/t1")
    ]
    [entry] = [json.loads(line) for line in default_ledger(tmp_path).read_text().splitlines()]
    assert (entry["proposal_id"], entry["revision"]) == (proposal_id, revision)


@pytest.mark.parametrize(
    ("environment", "signers", "required", "said"),
    [
        ("staging", ("alice",), "1", "requires signed approvals: 0 of 1 signed approvals"),
        ("production", ("bob",), "1", "the key SHA256:"),
        ("production", ("alice", "bob"), "2", "requires signed approvals: 1 of 2 signed approvals (alice)"),
    ],
    ids=["no signature", "a key not in the file", "one of two"],
)
def test_an_approval_without_the_signatures_asked_for_is_refused_in_one_line_and_nothing_is_sent(
    team: Team,
    sample_api: SampleApi,
    tmp_path: Path,
    environment: str,
    signers: tuple[str, ...],
    required: str,
    said: str,
) -> None:
    """Staging plans are approved without a signature, which the queue accepts and this executor
    does not; alice's signature does not count for a file listing only bob; one signature is not two."""
    run = start(
        team,
        sample_api,
        tmp_path,
        "--environment",
        environment,
        "--allowed-signers",
        str(team.allowed_signers(*signers)),
        "--signatures",
        required,
    )
    proposal_id, _ = run.wait_for_plan()
    team.approve("alice", proposal_id, sign=environment == "production")
    status, stderr = run.finish()
    line = refused_line(stderr)
    assert status == 1 and line.startswith(f"reviewer run: not approved: proposal {proposal_id}"), line
    assert said in line, line
    assert sample_api.requests() == []
    state = team.clients["alice"].get(f"/v1/proposals/{proposal_id}/decision").json()
    assert state["state"] == "approved" and [refusal["kind"] for refusal in state["refusals"]] == [
        "signatures"
    ]
    assert not default_ledger(tmp_path).exists() or default_ledger(tmp_path).read_text() == ""


def test_an_approval_the_ledger_holds_is_refused_in_one_line_and_nothing_is_sent(
    team: Team, sample_api: SampleApi, tmp_path: Path
) -> None:
    """What a queue that offers an approval again meets: `--ledger` (a file of this host's) records
    that this exact approval ran here, so it does not run again, however the queue answers. The
    ledger line is written here, as an earlier run of this host would have, once the plan waits."""
    ledger = tmp_path / "approvals.jsonl"
    run = start(
        team,
        sample_api,
        tmp_path,
        "--environment",
        "production",
        "--allowed-signers",
        str(team.allowed_signers("alice")),
        "--ledger",
        str(ledger),
    )
    proposal_id, revision = run.wait_for_plan()
    state = team.clients["alice"].get(f"/v1/proposals/{proposal_id}/decision").json()
    from reviewer.agent import Ledger

    Ledger(ledger).claim(proposal_id, revision, state["plan_sha256"])
    team.approve("alice", proposal_id)
    status, stderr = run.finish()
    line = refused_line(stderr)
    assert status == 1 and line.startswith(f"reviewer run: not run: proposal {proposal_id}"), line
    assert f"this executor's ledger ({ledger}) records that it claimed exactly this signed approval" in line
    assert sample_api.requests() == []
    assert not default_ledger(tmp_path).exists(), "--ledger moved it"


def test_an_approval_from_a_queue_whose_trail_this_executor_cannot_check_is_refused_in_one_line(
    team: Team, sample_api: SampleApi, tmp_path: Path
) -> None:
    """The executor's memory of the queue's trail is damaged: the approval is refused before it is
    claimed, in one line that says what to do ("restore or remove it"), and nothing is sent."""
    from reviewer.trail.memory import memory_file

    remembered = memory_file(team.queue.url, tmp_path / "state" / "reviewer" / "trail")
    remembered.parent.mkdir(parents=True)
    remembered.write_text("{}")
    run = start(team, sample_api, tmp_path)
    proposal_id, _ = run.wait_for_plan()
    team.approve("alice", proposal_id)
    status, stderr = run.finish()
    line = refused_line(stderr)
    assert status == 1, stderr
    assert (
        line
        == f"reviewer run: not run: {remembered} is not a remembered trail checkpoint; restore or remove it"
    )
    assert sample_api.requests() == []


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--allowed-signers", "{tmp}/absent"), "--allowed-signers: cannot read the allowed-signers file"),
        (("--allowed-signers", "{bad}"), "--allowed-signers: {bad} line 1: "),
        (("--allowed-signers", "{good}", "--signatures", "0"), "--signatures must be 1 or more, not 0"),
        (("--allowed-signers", "{good}", "--signatures", "2"), "names 1 key(s), and --signatures 2 asks"),
        (("--signatures", "2"), "--signatures counts signatures of --allowed-signers FILE"),
        (("--allowed-signers", "{good}", "--ledger", "{tmp}/no/such/ledger"), "the folder {tmp}/no/such"),
        (
            ("--allowed-signers", "{good}", "--ledger", "{torn}"),
            "--ledger: the executor's ledger {torn} line 1",
        ),
        (("--allowed-passkeys", "{bad}"), "--allowed-passkeys: {bad}: not JSON"),
        (
            ("--allowed-signers", "{good}", "--allowed-passkeys", "{passkeys}", "--signatures", "3"),
            "--allowed-signers {good} and --allowed-passkeys {passkeys} name 1 key(s) and 1 reviewer(s) "
            "with passkeys, and --signatures 3 asks",
        ),
    ],
    ids=[
        "missing",
        "malformed",
        "zero",
        "more than the file",
        "no file",
        "no folder",
        "bad ledger",
        "passkeys malformed",
        "more than both files",
    ],
)
def test_bad_signer_options_are_one_line_before_command_starts(
    team: Team, sample_api: SampleApi, tmp_path: Path, options: tuple[str, ...], said: str
) -> None:
    names = {
        "tmp": str(tmp_path),
        "bad": str(write(tmp_path / "bad", "alice ssh-ed25519 not-base64!\n")),
        "good": str(team.allowed_signers("alice")),
        "torn": str(write(tmp_path / "torn.jsonl", "not json\n")),
        "passkeys": str(
            write(tmp_path / "passkeys.json", AllowedPasskeys((Authenticator().registered(),)).to_text())
        ),
    }
    run = start(team, sample_api, tmp_path, *(option.format(**names) for option in options))
    status, stderr = run.finish()
    assert status == 2 and stderr.count("\n") == 1, stderr
    assert stderr.startswith("reviewer run: ") and said.format(**names) in stderr, stderr
    assert sample_api.requests() == []
