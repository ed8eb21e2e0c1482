"""`reviewer db restore` reopens nothing: what was decided, run or revoked after the backup stays
decided, closed or revoked in the restored queue, served by a real `reviewer serve` on the file."""

from __future__ import annotations

import sqlite3
import subprocess
from pathlib import Path

from tests import forked_commands
from tests.queue_harness import (
    Service,
    claimed_report,
    decide,
    reviewer_command,
    submit,
)
from tests.service.ports import free_port
from tests.service.postgres import Cluster, postgres_bindir


def run_reviewer(*args: str) -> subprocess.CompletedProcess[str]:
    return forked_commands.run_reviewer(reviewer_command(*args), capture_output=True, text=True, check=False)


def test_a_restore_closes_what_moved_on_since_the_backup_and_keeps_revocations(tmp_path: Path) -> None:
    database = tmp_path / "queue.sqlite3"
    backup = tmp_path / "before.backup"
    service = Service(db=database, log_path=tmp_path / "service.log")
    service.start()
    tokens = service.tokens({"alice": "reviewer", "bob": "reviewer", "agent": "agent"})
    with service.client(tokens["alice"]) as alice, service.client(tokens["agent"]) as agent:
        ran = submit(agent, "ran-after-backup")["plan_sha256"]
        approved = submit(agent, "approved-after-backup")["plan_sha256"]
        submit(agent, "untouched")
        taken = run_reviewer("db", "backup", str(backup), "--db", str(database))
        assert taken.returncode == 0, taken.stderr
        assert decide(alice, "ran-after-backup", 1, ran).status_code == 201
        report = claimed_report(agent, "ran-after-backup", 1, ran, ended="completed")
        assert agent.post("/v1/proposals/ran-after-backup/executions", json=report).status_code == 201
        assert decide(alice, "approved-after-backup", 1, approved).status_code == 201
        submit(agent, "submitted-after-backup")
    assert run_reviewer("token", "revoke", "bob", "--db", str(database)).returncode == 0
    service.stop()

    restored = run_reviewer("db", "restore", str(backup), "--db", str(database))

    service.start()
    try:
        with service.client(tokens["alice"]) as alice, service.client(tokens["bob"]) as bob:
            states = {
                proposal_id: alice.get(f"/v1/proposals/{proposal_id}/decision").json()
                for proposal_id in ("ran-after-backup", "approved-after-backup", "untouched")
            }
            missing = alice.get("/v1/proposals/submitted-after-backup/decision")
            again = decide(alice, "ran-after-backup", 1, ran)
            bob_refused = bob.get("/v1/proposals")
            untouched = states["untouched"]["plan_sha256"]
            still_decidable = decide(alice, "untouched", 1, untouched)
    finally:
        service.stop()
    assert restored.returncode == 0, restored.stderr
    said = restored.stderr
    assert (
        "2 proposal(s) closed by the restore (decide them again): approved-after-backup, ran-after-backup"
        in said
    )
    assert "1 proposal(s) submitted after the backup are not in it: submitted-after-backup" in said
    assert "1 token(s) revoked, expired or rotated since stay so" in said
    for closed in ("ran-after-backup", "approved-after-backup"):
        assert states[closed]["state"] == "expired", states[closed]
        assert states[closed]["reason"].startswith("closed by a restore of the queue's database")
    assert states["untouched"]["state"] == "pending"
    assert again.status_code == 409, again.text
    assert missing.status_code == 404
    assert bob_refused.status_code == 401
    assert still_decidable.status_code == 201, still_decidable.text


def test_a_restore_over_a_damaged_file_closes_every_open_proposal(tmp_path: Path) -> None:
    """Nothing says what moved on after the backup: any open proposal may have, so each is closed."""
    database = tmp_path / "queue.sqlite3"
    backup = tmp_path / "before.backup"
    service = Service(db=database, log_path=tmp_path / "service.log")
    service.start()
    tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
    with service.client(tokens["agent"]) as agent:
        submit(agent, "open-at-backup")
    assert run_reviewer("db", "backup", str(backup), "--db", str(database)).returncode == 0
    service.stop()
    database.write_bytes(b"not a database" * 100)

    restored = run_reviewer("db", "restore", str(backup), "--db", str(database))

    service.start()
    try:
        with service.client(tokens["alice"]) as alice:
            state = alice.get("/v1/proposals/open-at-backup/decision").json()["state"]
    finally:
        service.stop()
    assert restored.returncode == 0, restored.stderr
    assert (
        "the file replaced could not be read: every proposal open in the backup is closed" in restored.stderr
    )
    assert "1 proposal(s) closed by the restore (decide them again): open-at-backup" in restored.stderr
    assert state == "expired"


def test_serve_refuses_a_file_with_a_broken_index_naming_the_restore(tmp_path: Path) -> None:
    """An index page overwritten: the queue would answer some pages and 500 on others; it refuses
    to start instead, in one line."""
    database = tmp_path / "queue.sqlite3"
    service = Service(db=database, log_path=tmp_path / "service.log")
    service.start()
    tokens = service.tokens({"agent": "agent"})
    with service.client(tokens["agent"]) as agent:
        for number in range(30):
            submit(agent, f"filler-{number}")
    service.stop()
    with sqlite3.connect(database) as raw:
        page_size = raw.execute("PRAGMA page_size").fetchone()[0]
        (root,) = raw.execute("SELECT rootpage FROM sqlite_master WHERE name = 'trail_proposal'").fetchone()
    with database.open("r+b") as file:
        file.seek((root - 1) * page_size + 16)
        file.write(b"\xff" * 64)

    started = run_reviewer("serve", "--db", str(database), "--port", str(free_port()))

    assert started.returncode == 1
    lines = started.stderr.strip().splitlines()
    assert len(lines) == 1, started.stderr
    assert lines[0].startswith(f"reviewer serve: {database} is damaged (")
    assert f"restore it from a backup with `reviewer db restore BACKUP --db {database}`" in lines[0]


def test_a_postgresql_copy_restored_from_an_older_dump_is_refused_until_db_reopen(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    """The queue remembers the largest log it signed outside the database: `pg_restore` of a dump
    taken before a decision brings back a shorter trail, which the running queue refuses to sign and
    `serve` refuses to start on, in one line naming `reviewer db reopen`; that closes what the copy
    left open, and the queue serves again."""
    url = postgres_cluster.fresh_database()
    key = tmp_path / "trail_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    memory = tmp_path / "signed.json"
    signing = ("--trail-key", str(key), "--signed-memory", str(memory))
    service = Service(db=url, log_path=tmp_path / "service.log", serve_args=signing)
    service.start()
    tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
    dump = tmp_path / "queue.dump"
    bindir = postgres_bindir()
    with service.client(tokens["alice"]) as alice, service.client(tokens["agent"]) as agent:
        submit(agent, "open-at-dump")
        assert alice.get("/v1/trail/checkpoint").status_code == 200
        subprocess.run([str(bindir / "pg_dump"), "-Fc", "-f", str(dump), url], check=True)
        digest = submit(agent, "after-dump")["plan_sha256"]
        assert decide(alice, "after-dump", 1, digest).status_code == 201
        signed_size = alice.get("/v1/trail/checkpoint").json()["size"]
        restore = [str(bindir / "pg_restore"), "--clean", "--if-exists", "-d", url, str(dump)]
        subprocess.run(restore, check=True, capture_output=True)  # under the running queue
        unsigned = alice.get("/v1/trail/checkpoint")
    service.stop()

    refused = run_reviewer("serve", "--db", url, "--port", str(free_port()), *signing)
    reopened = run_reviewer("db", "reopen", "--db", url, "--signed-memory", str(memory))

    service.start()
    try:
        with service.client(tokens["alice"]) as alice:
            closed = alice.get("/v1/proposals/open-at-dump/decision").json()
            gone = alice.get("/v1/proposals/after-dump/decision")
            checkpoint = alice.get("/v1/trail/checkpoint")
    finally:
        service.stop()
    assert unsigned.status_code == 503, unsigned.text
    assert f"fewer than the {signed_size} it signed before" in unsigned.json()["message"]
    assert refused.returncode == 1
    line = refused.stderr.strip()
    assert "\n" not in line, refused.stderr
    assert f"trail holds 1 entries, fewer than the {signed_size} this queue signed before" in line
    assert (
        f"run `reviewer db reopen --db {url.replace('postgres@', '')}`" in line
        or "reviewer db reopen" in line
    )
    assert reopened.returncode == 0, reopened.stderr
    assert "1 proposal(s) it left open are closed (decide them again): open-at-dump" in reopened.stderr
    assert (closed["state"], closed["reason"][:27]) == ("expired", "closed by a restore of the ")
    assert gone.status_code == 404
    assert checkpoint.status_code == 200
    assert checkpoint.json()["size"] == 1


def test_db_reopen_without_a_trail_key_closes_what_the_copy_left_open(tmp_path: Path) -> None:
    """A queue that signs no trail: `reopen` still closes every open proposal, and remembers nothing."""
    database = tmp_path / "queue.sqlite3"
    service = Service(db=database, log_path=tmp_path / "service.log")
    service.start()
    tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
    with service.client(tokens["agent"]) as agent:
        submit(agent, "left-open")
    service.stop()

    reopened = run_reviewer("db", "reopen", "--db", str(database))

    service.start()
    try:
        with service.client(tokens["alice"]) as alice:
            state = alice.get("/v1/proposals/left-open/decision").json()
    finally:
        service.stop()
    assert reopened.returncode == 0, reopened.stderr
    assert reopened.stderr.strip() == (
        f"reopened {database}: 1 proposal(s) it left open are closed (decide them again): left-open"
    )
    assert state["state"] == "expired" and state["reason"].startswith("closed by a restore")
