"""The trail as an auditor and an executor check it, against real queues: one `reviewer serve` on
SQLite, and two replicas on one PostgreSQL database.

One story per backend, as an operator would live it: three proposals decided (approved, rejected,
approved) export and verify against their checkpoint; a later checkpoint extends it; a database
restored from the older copy fails against the newest checkpoint, and an executor that saw the
newest refuses it (went backwards, then forked once the restored queue grew again); a database
writer who renames a reviewer in every text column and restarts the queue yields an export that
fails against the checkpoint taken before, naming the entry.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import sqlite3
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from reviewer.__main__ import main
from reviewer.agent.queue import QueueAgent
from reviewer.queue.client import QueueClient
from reviewer.trail.memory import TrailRefused, check_trail
from tests.queue_harness import Service, decide, start_together, submit, unique_id
from tests.service.postgres import Cluster


@dataclass
class Queue:
    """The replicas of one queue (one on SQLite), and how its database is copied, restored and edited."""

    replicas: list[Service]
    tokens: dict[str, str]
    backup: Callable[[Path], None]
    restore: Callable[[Path], None]
    rename: Callable[[str, str], None]

    def restart(self, change: Callable[[], None]) -> None:
        for replica in self.replicas:
            replica.stop()
        change()
        start_together(*self.replicas)

    def replica(self, number: int) -> Service:
        return self.replicas[number % len(self.replicas)]


@pytest.fixture(scope="module")
def trail_key(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("trail-key")
    key = folder / "trail_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "queue", "-f", str(key)], check=True)
    return key


def sqlite_queue(tmp: Path, key: Path) -> Queue:
    database = tmp / "queue.sqlite3"
    signing = ("--trail-key", str(key), "--signed-memory", str(tmp / "signed.json"))
    service = Service(db=database, log_path=tmp / "service.log", serve_args=signing)
    service.start()
    tokens = service.tokens({"alice": "reviewer", "agent": "agent", "audit": "auditor", "metrics": "metrics"})

    def backup(copy: Path) -> None:
        source, target = sqlite3.connect(database), sqlite3.connect(copy)
        source.backup(target)
        source.close()
        target.close()

    def restore(copy: Path) -> None:
        for suffix in ("-wal", "-shm"):
            Path(f"{database}{suffix}").unlink(missing_ok=True)
        shutil.copyfile(copy, database)

    def rename(old: str, new: str) -> None:
        with sqlite3.connect(database) as db:
            for (trigger,) in db.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'").fetchall():
                db.execute(f'DROP TRIGGER "{trigger}"')
            tables = [row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
            for table in tables:
                for column in db.execute(f'PRAGMA table_info("{table}")').fetchall():
                    if column[2].upper() == "TEXT":
                        db.execute(
                            f'UPDATE "{table}" SET "{column[1]}" = replace("{column[1]}", ?, ?)', (old, new)
                        )

    return Queue([service], tokens, backup, restore, rename)


def postgres_queue(tmp: Path, key: Path, cluster: Cluster) -> Queue:
    url = cluster.fresh_database()
    signing = ("--trail-key", str(key), "--signed-memory", str(tmp / "signed.json"))  # shared, as on a volume
    replicas = [Service(db=url, log_path=tmp / f"replica{n}.log", serve_args=signing) for n in (1, 2)]
    start_together(*replicas)
    tokens = replicas[0].tokens(
        {"alice": "reviewer", "agent": "agent", "audit": "auditor", "metrics": "metrics"}
    )
    name = url.rsplit("/", 1)[1]

    def backup(copy: Path) -> None:
        subprocess.run([str(cluster.bindir / "pg_dump"), "-Fc", "-f", str(copy), url], check=True)

    def restore(copy: Path) -> None:
        with psycopg.connect(cluster.url(), autocommit=True) as admin:
            admin.execute(f'DROP DATABASE "{name}" WITH (FORCE)')
            admin.execute(f'CREATE DATABASE "{name}"')
        subprocess.run([str(cluster.bindir / "pg_restore"), "-d", url, str(copy)], check=True)

    def rename(old: str, new: str) -> None:
        with psycopg.connect(url, autocommit=True) as db:
            db.execute("SET session_replication_role = replica")  # what a writer with the password may do
            columns = db.execute(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = 'public' AND data_type = 'text'"
            ).fetchall()
            for table, column in columns:
                db.execute(f'UPDATE "{table}" SET "{column}" = replace("{column}", %s, %s)', (old, new))

    return Queue(replicas, tokens, backup, restore, rename)


@pytest.fixture(params=["sqlite", "postgres"])
def queue(request: pytest.FixtureRequest, tmp_path: Path, trail_key: Path) -> Queue:
    if request.param == "sqlite":
        made = sqlite_queue(tmp_path, trail_key)
    else:
        made = postgres_queue(tmp_path, trail_key, request.getfixturevalue("postgres_cluster"))
    yield made
    for replica in made.replicas:
        if replica.process is not None:
            replica.stop()


def decided(queue: Queue, *decisions: str) -> None:
    """A proposal for each decision, submitted on one replica and decided on the next."""
    for number, decision in enumerate(decisions):
        proposal_id = unique_id("trail")
        with queue.replica(number).client(queue.tokens["agent"]) as agent:
            digest = submit(agent, proposal_id)["plan_sha256"]
        with queue.replica(number + 1).client(queue.tokens["alice"]) as alice:
            answer = decide(
                alice, proposal_id, 1, digest, decision, reason="not today" if decision == "reject" else ""
            )
            assert answer.status_code == 201, answer.text


def cli(monkeypatch: pytest.MonkeyPatch, token: str, *args: str) -> int:
    monkeypatch.setenv("REVIEWER_TOKEN", token)
    return main(list(args))


def checkpoint(queue: Queue, monkeypatch, capsys, path: Path) -> str:
    capsys.readouterr()
    assert (
        cli(monkeypatch, queue.tokens["audit"], "trail", "checkpoint", "--queue", queue.replicas[-1].url) == 0
    )
    text = capsys.readouterr().out
    path.write_text(text)
    return text


def verify(
    queue: Queue, monkeypatch, capsys, tmp: Path, key: Path, against: Path, since: int = 0
) -> tuple[int, str]:
    export = tmp / unique_id("export")
    assert (
        cli(
            monkeypatch,
            queue.tokens["alice"],
            "trail",
            "export",
            "--queue",
            queue.replicas[0].url,
            "--since",
            str(since),
            "-o",
            str(export),
        )
        == 0
    )
    capsys.readouterr()
    code = main(["trail", "verify", str(export), "--key", f"{key}.pub", "--checkpoint", str(against)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def executor(queue: Queue, memory: Path) -> QueueClient:
    return QueueClient(queue.replicas[-1].url, queue.tokens["agent"], retries=0)


async def remember(queue: Queue, memory: Path) -> int:
    async with executor(queue, memory) as client:
        seen = await check_trail(client, memory)
    assert seen is not None
    return seen.size


async def refused_run(queue: Queue, memory: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[str, str]:
    """An executor (the agent library's) refuses to run a proposal the queue says is approved, and tells
    the queue why; the proposal's id and the refusal's words."""
    monkeypatch.setattr("reviewer.trail.memory.memory_dir", lambda: memory)
    proposal_id = unique_id("trail-run")
    with queue.replica(0).client(queue.tokens["agent"]) as agent:
        digest = submit(agent, proposal_id)["plan_sha256"]
    with queue.replica(1).client(queue.tokens["alice"]) as alice:
        assert decide(alice, proposal_id, 1, digest).status_code == 201
    async with executor(queue, memory) as client:
        agent_side = QueueAgent(client)
        approval = await agent_side.wait_for_decision(proposal_id, 1, timeout=30)
        with pytest.raises(TrailRefused) as refused:
            await agent_side.execute(approval, client=None, tools=[])
        state = await client.decision_state(proposal_id)
    assert state.state == "approved", "the refused executor claimed nothing"
    [reported] = state.refusals  # and the queue was told why
    assert (reported.kind, reported.refused_by) == ("trail", "agent")
    assert reported.message == f"TrailRefused: {refused.value}"
    return proposal_id, str(refused.value)


def test_the_trail_proves_its_history_and_shows_a_rollback_a_fork_and_an_edit(
    queue: Queue, trail_key: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    memory = tmp_path / "executor-state"
    decided(queue, "approve", "reject", "approve")
    first = tmp_path / "first.checkpoint"
    text = checkpoint(queue, monkeypatch, capsys, first)
    assert text.splitlines()[1] == "6"  # three submissions, three decisions
    code, said = verify(queue, monkeypatch, capsys, tmp_path, trail_key, first)
    assert code == 0, said
    assert asyncio.run(remember(queue, memory)) == 6
    proof = tmp_path / "entry-3.proof"
    prove = ("trail", "prove", "3", "--size", "6", "--queue", queue.replicas[0].url, "-o", str(proof))
    assert cli(monkeypatch, queue.tokens["audit"], *prove) == 0
    capsys.readouterr()
    assert main(["trail", "verify", str(proof), "--key", f"{trail_key}.pub", "--checkpoint", str(first)]) == 0
    assert "verified: entry 3 is in the checkpoint" in capsys.readouterr().out
    siem = tmp_path / "trail.ocsf.jsonl"
    ocsf = ("trail", "export", "--ocsf", "--queue", queue.replicas[0].url, "-o", str(siem))
    assert cli(monkeypatch, queue.tokens["audit"], *ocsf) == 0
    events = [json.loads(line) for line in siem.read_text().splitlines()]
    assert [(e["type_uid"], e["api"]["operation"], e["actor"]["user"]["name"]) for e in events[:2]] == [
        (600301, "submitted", "agent"),
        (600303, "approved", "alice"),
    ]
    assert len(events) == 6 and {e["class_uid"] for e in events} == {6003}
    older_copy = tmp_path / "older.copy"
    queue.backup(older_copy)

    decided(queue, "approve")
    newest = tmp_path / "newest.checkpoint"
    assert checkpoint(queue, monkeypatch, capsys, newest).splitlines()[1] == "8"
    assert asyncio.run(remember(queue, memory)) == 8, "the executor remembers the newest it saw"
    code, said = verify(queue, monkeypatch, capsys, tmp_path, trail_key, first, since=6)
    assert code == 0, said  # the two entries since the first checkpoint extend it

    # Restored behind the queue's back, its own memory of what it signed wiped too (one who can
    # replace the database may reach the host's files): the executors are the last line, and hold it.
    def restored_and_forgotten() -> None:
        queue.restore(older_copy)
        (tmp_path / "signed.json").unlink()

    queue.restart(restored_and_forgotten)
    code, said = verify(queue, monkeypatch, capsys, tmp_path, trail_key, newest)
    assert code == 1
    assert "went backwards" in said and "8 entries" in said
    with pytest.raises(TrailRefused, match="went backwards: 6 entries now, and 8"):
        asyncio.run(remember(queue, memory))
    # A new proposal and its approval grow the restored log back to 8 entries, other ones: a fork.
    refused_id, refusal = asyncio.run(refused_run(queue, memory, monkeypatch))
    assert "forked" in refusal
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "400")
    assert cli(monkeypatch, queue.tokens["alice"], "show", refused_id, "--queue", queue.replicas[0].url) == 0
    shown = capsys.readouterr().out
    assert "! refused by executor agent (trail), " in shown and f"TrailRefused: {refusal}" in shown
    with queue.replicas[-1].client(queue.tokens["metrics"]) as prometheus:
        metrics = prometheus.get("/metrics").text
    assert 'reviewer_executor_refusals_total{kind="trail"} 1.0' in metrics

    queue.restart(lambda: queue.rename("alice", "mallory"))
    code, said = verify(queue, monkeypatch, capsys, tmp_path, trail_key, first)
    assert code == 1
    assert "entry 1 (approved: proposal" in said and "changed after it was logged" in said

    for replica in queue.replicas:  # the same database served without the key: no checkpoint now
        replica.serve_args = ()
    queue.restart(lambda: None)
    with pytest.raises(TrailRefused, match="signs none now"):
        asyncio.run(remember(queue, memory))


@pytest.mark.parametrize("queue", ["sqlite"], indirect=True)
def test_who_may_read_the_trail(queue: Queue) -> None:
    """Any token reads the checkpoint (executors remember it); reviewers and auditors export; an
    agent does not; an auditor reads nothing else."""
    service = queue.replicas[0]
    with service.client(queue.tokens["agent"]) as agent, service.client(queue.tokens["audit"]) as audit:
        assert agent.get("/v1/trail/checkpoint").status_code == 200
        refused = agent.get("/v1/trail/export")
        assert refused.status_code == 403 and "reviewer or auditor" in refused.json()["message"]
        exported = audit.get("/v1/trail/export", params={"since": 0})
        assert exported.status_code == 200 and exported.headers["content-type"] == "application/x-ndjson"
        assert json.loads(exported.content.splitlines()[0])["size"] == 0
        assert audit.get("/v1/trail/export", params={"since": 1}).status_code == 404
        assert agent.get("/v1/trail/entries/0/proof").status_code == 403
        assert audit.get("/v1/trail/entries/0/proof").status_code == 404  # an empty log
        assert audit.get("/v1/proposals").status_code == 403, "an auditor reads the trail and nothing else"
