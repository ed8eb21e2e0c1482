"""Upgrades with a way back: a database of the previous release (schema 3, `fixtures/queue_v3.sql`)
is backed up next to itself, migrated step by step, logged, and keeps every row; the backup is still
the previous release's database. `--no-migrate`, `db upgrade`, `db backup`, and two PostgreSQL
replicas starting together on an old schema (one migrates)."""

from __future__ import annotations

import sqlite3
import stat
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import psycopg
import pytest

from reviewer.service.store import SCHEMA_VERSION
from tests.queue_harness import PYTHON, Service, reviewer_command, start_together
from tests.service.ports import free_port
from tests.service.postgres import Cluster
from tests.service.test_command_line import run

FIXTURE = Path(__file__).with_name("fixtures") / "queue_v3.sql"
PREVIOUS_RELEASE = "e14a3aa"
"""The commit that made the fixture: the release before schema 4 and 5."""
ALICE = "rvw_" + "A" * 43
"""The fixture's reviewer token (a test's own secret: only its hash is in the fixture)."""
REPO = Path(__file__).resolve().parents[2]


def previous_release_database(path: Path) -> Path:
    with sqlite3.connect(path) as db:
        db.executescript(FIXTURE.read_text())
    db.close()
    return path


def dump(path: Path) -> list[str]:
    db = sqlite3.connect(path)
    try:
        return list(db.iterdump())
    finally:
        db.close()


def user_version(path: Path) -> int:
    db = sqlite3.connect(path)
    try:
        return int(db.execute("PRAGMA user_version").fetchone()[0])
    finally:
        db.close()


def backups_of(path: Path) -> list[Path]:
    return sorted(path.parent.glob(path.name + ".v*.backup"))


def previous_release_reads(database: Path, tmp: Path) -> str | None:
    """The decision state of `kept-rejected` as the previous release's own code serves it from
    `database`; None when this clone lacks that commit (a shallow clone)."""
    archive = subprocess.run(
        ["git", "-C", str(REPO), "archive", PREVIOUS_RELEASE, "reviewer"], capture_output=True, check=False
    )
    if archive.returncode != 0:
        return None
    tree = tmp / "previous-release"
    with tarfile.open(fileobj=BytesIO(archive.stdout)) as members:
        members.extractall(tree, filter="data")
    script = f"""
import asyncio, sys
sys.path.insert(0, {str(tree)!r})
import httpx
from reviewer.service.app import create_app
assert create_app.__code__.co_filename.startswith({str(tree)!r})
async def main():
    app = create_app({str(database)!r})
    async with httpx.AsyncClient(transport=httpx.ASGITransport(app=app), base_url="http://q") as client:
        answer = await client.get(
            "/v1/proposals/kept-rejected/decision", headers={{"Authorization": "Bearer {ALICE}"}}
        )
        print(answer.status_code, answer.json()["state"])
asyncio.run(main())
"""
    done = subprocess.run([PYTHON, "-c", script], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def test_serve_backs_up_the_previous_release_database_migrates_it_and_keeps_every_row(tmp_path: Path) -> None:
    database = previous_release_database(tmp_path / "queue.sqlite3")
    before = dump(database)
    service = Service(db=database, log_path=tmp_path / "service.log")
    service.start()
    try:
        with service.client(ALICE) as alice:
            listed = alice.get("/v1/proposals").json()["proposals"]
            rejected = alice.get("/v1/proposals/kept-rejected").json()
            approved = alice.get("/v1/proposals/kept-approved/decision").json()
    finally:
        service.stop()
    assert sorted(p["proposal_id"] for p in listed) == ["kept-approved", "kept-pending", "kept-rejected"]
    assert (rejected["latest"]["state"], rejected["latest"]["decided_by"]) == ("rejected", "alice")
    assert [event["event"] for event in rejected["history"]] == ["submitted", "rejected"]
    assert (approved["decided_by"], approved["reason"]) == ("alice", "fixture")
    [backup] = backups_of(database)
    log = service.log()
    assert f"migrating {database} from queue schema version 3 to {SCHEMA_VERSION}" in log
    assert f"the version-3 database was backed up to {backup}" in log
    assert f"migrated {database} to queue schema version {SCHEMA_VERSION}" in log
    assert user_version(database) == SCHEMA_VERSION
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    assert dump(backup) == before and user_version(backup) == 3  # the previous release's very database
    served = previous_release_reads(backup, tmp_path)
    if served is not None:
        assert served == "200 rejected"


def test_serve_no_migrate_refuses_an_old_schema_and_changes_nothing(tmp_path: Path) -> None:
    database = previous_release_database(tmp_path / "queue.sqlite3")
    before = dump(database)
    refused = run("serve", "--db", str(database), "--port", str(free_port()), "--no-migrate")
    assert refused.returncode == 1
    assert f"holds queue schema version 3, and this release writes version {SCHEMA_VERSION}" in refused.stderr
    assert "reviewer db upgrade" in refused.stderr
    assert dump(database) == before and backups_of(database) == []


def test_db_upgrade_backs_up_and_migrates_once(tmp_path: Path) -> None:
    database = previous_release_database(tmp_path / "queue.sqlite3")
    before = dump(database)
    upgraded = run("db", "upgrade", "--db", str(database))
    assert upgraded.returncode == 0, upgraded.stderr
    [backup] = backups_of(database)
    assert f"backed up to {backup}" in upgraded.stderr and dump(backup) == before
    assert user_version(database) == SCHEMA_VERSION
    again = run("db", "upgrade", "--db", str(database))
    assert again.returncode == 0 and "nothing to do" in again.stderr
    assert backups_of(database) == [backup]


def test_two_upgrades_started_together_migrate_once_and_keep_one_backup(tmp_path: Path) -> None:
    database = previous_release_database(tmp_path / "queue.sqlite3")
    before = dump(database)
    command = reviewer_command("db", "upgrade", "--db", str(database))
    both = [subprocess.Popen(command, stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outputs = [process.communicate(timeout=60)[1] for process in both]
    assert [process.returncode for process in both] == [0, 0], outputs
    assert sum("migrated" in output for output in outputs) == 1, outputs
    [backup] = backups_of(database)
    assert dump(backup) == before and user_version(database) == SCHEMA_VERSION


def test_a_token_command_on_an_old_schema_says_to_upgrade(tmp_path: Path) -> None:
    database = previous_release_database(tmp_path / "queue.sqlite3")
    refused = run("token", "list", "--db", str(database))
    assert refused.returncode == 1 and "reviewer db upgrade" in refused.stderr
    assert user_version(database) == 3


def test_db_backup_copies_a_live_queue_and_refuses_to_overwrite(tmp_path: Path) -> None:
    database = tmp_path / "queue.sqlite3"
    assert run("db", "upgrade", "--db", str(database)).returncode == 1  # no queue there: nothing made
    previous_release_database(database)
    assert run("db", "upgrade", "--db", str(database)).returncode == 0
    copy = tmp_path / "copy.sqlite3"
    made = run("db", "backup", str(copy), "--db", str(database))
    assert made.returncode == 0, made.stderr
    assert f"(queue schema version {SCHEMA_VERSION}) to {copy}" in made.stderr
    assert dump(copy) == dump(database) and stat.S_IMODE(copy.stat().st_mode) == 0o600
    again = run("db", "backup", str(copy), "--db", str(database))
    assert again.returncode == 1 and "exists" in again.stderr


def version_4_postgresql(cluster: Cluster) -> str:
    """A PostgreSQL queue as the release before migration 5 left it (no metrics role, no expiry)."""
    url = cluster.fresh_database()
    assert run("db", "upgrade", "--db", url).returncode == 1  # holds no queue: refused, nothing made
    from reviewer.service.databases import open_store

    open_store(url, clock=lambda: 0.0, pending_ttl=1, approval_ttl=1, create=True).close()
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute(
            "ALTER TABLE tokens DROP COLUMN expires_at, DROP COLUMN previous_sha256, "
            "DROP COLUMN previous_expires_at"
        )
        raw.execute("ALTER TABLE tokens DROP CONSTRAINT tokens_role_check")
        raw.execute(
            "ALTER TABLE tokens ADD CONSTRAINT tokens_role_check CHECK (role IN ('agent', 'reviewer'))"
        )
        raw.execute(
            "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('alice', 'reviewer', 'x', 1)"
        )
        raw.execute("UPDATE reviewer_schema SET version = 4")
    return url


@pytest.mark.slow
def test_two_postgresql_replicas_starting_on_an_old_schema_migrate_it_once(
    tmp_path: Path, postgres_cluster: Cluster
) -> None:
    url = version_4_postgresql(postgres_cluster)
    replicas = [Service(db=url, log_path=tmp_path / f"replica-{n}.log") for n in (1, 2)]
    start_together(*replicas)
    try:
        logs = [replica.log() for replica in replicas]
    finally:
        for replica in replicas:
            replica.stop()
    migrated = [log for log in logs if "from queue schema version 4 to 5" in log]
    assert len(migrated) == 1, logs
    with psycopg.connect(url, autocommit=True) as raw:
        assert raw.execute("SELECT version FROM reviewer_schema").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("SELECT name FROM tokens").fetchall() == [("alice",)]
    minted = run("token", "create", "--db", url, "--name", "prometheus", "--role", "metrics")
    assert minted.returncode == 0, minted.stderr


def test_a_postgresql_database_newer_than_the_release_is_refused_naming_both(
    tmp_path: Path, postgres_cluster: Cluster
) -> None:
    url = version_4_postgresql(postgres_cluster)
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("UPDATE reviewer_schema SET version = 9")
    refused = run("serve", "--db", url, "--port", str(free_port()))
    assert refused.returncode == 1
    assert f"holds queue schema version 9, newer than version {SCHEMA_VERSION}" in refused.stderr
