"""Upgrades with a way back: a database of the previous release (schema 3,
`tests/service/fixtures/queue_v3.sql`) is backed up next to itself, migrated step by step, logged,
and keeps every row; the backup is still the previous release's database. `--no-migrate`,
`db upgrade`, `db backup`, and two PostgreSQL replicas starting together on an old schema (one
migrates)."""

from __future__ import annotations

import json
import sqlite3
import stat
import subprocess
import tarfile
from io import BytesIO
from pathlib import Path

import psycopg
import pytest

from reviewer.service.store import SCHEMA_VERSION, TRAIL_EVENT_CHECK
from reviewer.service.store.opener import open_store
from tests.queue_harness import PYTHON, Service, reviewer_command, start_together
from tests.service.commands.test_command_line import run
from tests.service.ports import free_port
from tests.service.postgres import Cluster

FIXTURE = Path(__file__).parents[1] / "fixtures" / "queue_v3.sql"
PREVIOUS_RELEASE = "e14a3aa"
"""The commit that made the fixture: the release before schema 4 and 5."""
ALICE = "rvw_" + "A" * 43
"""The fixture's reviewer token (a test's own secret: only its hash is in the fixture)."""
REPO = Path(__file__).resolve().parents[3]


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
    """A PostgreSQL queue as the release before migration 5 left it (no metrics role, no expiry, no
    request_changes)."""
    url = cluster.fresh_database()
    assert run("db", "upgrade", "--db", url).returncode == 1  # holds no queue: refused, nothing made
    from reviewer.service.store.opener import open_store

    open_store(url, clock=lambda: 0.0, pending_ttl=1, approval_ttl=1, create=True).close()
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute(
            "ALTER TABLE tokens DROP COLUMN expires_at, DROP COLUMN previous_sha256, "
            "DROP COLUMN previous_expires_at, DROP COLUMN kind, DROP COLUMN issuer, DROP COLUMN subject, "
            "DROP COLUMN session_ends_at"
        )
        raw.execute("ALTER TABLE trail DROP COLUMN identity")
        raw.execute("ALTER TABLE tokens DROP CONSTRAINT tokens_role_check")
        raw.execute(
            "ALTER TABLE tokens ADD CONSTRAINT tokens_role_check CHECK (role IN ('agent', 'reviewer'))"
        )
        for table, constraint, before in (
            ("decisions", "decisions_decision_check", "decision IN ('approve', 'reject')"),
            (
                "trail",
                "trail_event_check",
                "event IN ('submitted', 'approved', 'rejected', 'claimed', 'executed')",
            ),
        ):  # as PostgreSQL named a column's CHECK before migration 6 named it
            raw.execute(f"ALTER TABLE {table} DROP CONSTRAINT {constraint}")
            raw.execute(f"ALTER TABLE {table} ADD CONSTRAINT {constraint} CHECK ({before})")
        raw.execute("DROP TABLE trail_log")  # migration 8's
        raw.execute("DROP TABLE refusals")  # migration 9's
        raw.execute("DROP TABLE passkeys, passkey_links, review_link_key")  # migration 10's
        raw.execute("ALTER TABLE proposals DROP COLUMN summary")  # migration 12's
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
    migrated = [log for log in logs if f"from queue schema version 4 to {SCHEMA_VERSION}" in log]
    assert len(migrated) == 1, logs
    with psycopg.connect(url, autocommit=True) as raw:
        assert raw.execute("SELECT version FROM reviewer_schema").fetchone() == (SCHEMA_VERSION,)
        assert raw.execute("SELECT name FROM tokens").fetchall() == [("alice",)]
        raw.execute(
            "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256) "
            "VALUES (1, 'alice', 'changes_requested', 'p', 1, 'a')"
        )  # migration 6 let the trail say it
    minted = run("token", "create", "--db", url, "--name", "prometheus", "--role", "metrics")
    assert minted.returncode == 0, minted.stderr


def test_a_postgresql_database_newer_than_the_release_is_refused_naming_both(
    tmp_path: Path, postgres_cluster: Cluster
) -> None:
    url = version_4_postgresql(postgres_cluster)
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute(f"UPDATE reviewer_schema SET version = {SCHEMA_VERSION + 1}")
    refused = run("serve", "--db", url, "--port", str(free_port()))
    assert refused.returncode == 1
    assert f"holds queue schema version {SCHEMA_VERSION + 1}, newer than version {SCHEMA_VERSION}" in (
        refused.stderr
    )


SCHEMA_5_CHECKS = {
    "decision IN ('approve', 'reject', 'request_changes')": "decision IN ('approve', 'reject')",
    TRAIL_EVENT_CHECK: "event IN ('submitted', 'approved', 'rejected', 'claimed', 'executed')",
    "proposal_id TEXT,\n    revision INTEGER,\n    plan_sha256 TEXT,": (
        "proposal_id TEXT NOT NULL,\n    revision INTEGER NOT NULL,\n    plan_sha256 TEXT NOT NULL,"
    ),
}
"""What migrations 6 and 11 changed: the CHECKs of `decisions.decision` and `trail.event` before
them, and a trail event that always named a proposal."""


def version_5_sqlite(path: Path) -> Path:
    """An SQLite queue as schema 5 left it, holding a decided, claimed and reported proposal."""
    from reviewer.service.store.sqlite import (
        IDENTITY_COLUMNS,
        PASSKEYS_SCHEMA,
        READING_COLUMN,
        REFUSALS_SCHEMA,
        SCHEMA,
        TRAIL_LOG_SCHEMA,
        _append_only_triggers,
    )

    # migrations 7's, 8's, 9's, 10's and 12's (11 changed what SCHEMA_5_CHECKS puts back)
    schema = SCHEMA
    for added in (IDENTITY_COLUMNS, TRAIL_LOG_SCHEMA, REFUSALS_SCHEMA, PASSKEYS_SCHEMA, READING_COLUMN):
        schema = schema.replace(added, "")
    for now, before in SCHEMA_5_CHECKS.items():
        assert now in schema
        schema = schema.replace(now, before)
    with sqlite3.connect(path) as db:
        triggers = "\n".join(
            line
            for line in _append_only_triggers().splitlines()
            if " trail_log " not in line and " refusals " not in line
        )
        db.executescript(schema + triggers + "PRAGMA user_version = 5;")
        db.executescript(
            """
INSERT INTO proposals (proposal_id, owner, latest_revision, latest_seq, plan_sha256, title, agent_name,
    call_count, submitted_at, pending_expires_at, decision, decided_by, decided_at, reason, decision_id,
    approval_expires_at, claim_id, claimed_by, claimed_at, lease_expires_at, executed_at)
    VALUES ('ran', 'agent', 1, 4, 'a', 't', 'agent', 1, 1, 9, 'approve', 'alice', 2, NULL, 7, 99,
    'c1', 'agent', 3, 50, 4);
INSERT INTO revisions VALUES ('ran', 1, 'a', 't', 1, 'agent', 1, x'7b7d');
INSERT INTO decisions VALUES (7, 'ran', 1, 'a', 'approve', '', 'alice', 2, 99);
INSERT INTO claims VALUES ('c1', 7, 'ran', 1, 'a', 'agent', 3, 50);
INSERT INTO executions VALUES (1, 7, 'c1', 'ran', 1, 'agent', 4, 'completed', x'7b7d');
INSERT INTO trail (seq, at, actor, event, proposal_id, revision, plan_sha256) VALUES
    (1, 1, 'agent', 'submitted', 'ran', 1, 'a'), (2, 2, 'alice', 'approved', 'ran', 1, 'a'),
    (3, 3, 'agent', 'claimed', 'ran', 1, 'a'), (4, 4, 'agent', 'executed', 'ran', 1, 'a');
"""
        )
    db.close()
    return path


def test_migration_6_rebuilds_decisions_and_trail_keeping_rows_ids_and_the_append_only_triggers(
    tmp_path: Path,
) -> None:
    """SQLite cannot alter a CHECK: the two tables are built again in the step's transaction. Every row
    and id is kept (the claim and the execution still reference decision 7), the trail goes on
    numbering after its last `seq`, and it is still append-only."""
    from reviewer.service.store import StoreSettings
    from reviewer.service.store.sqlite import SQLiteStore

    database = version_5_sqlite(tmp_path / "queue.sqlite3")
    tables = ("decisions", "trail", "claims", "executions", "proposals")
    before = {table: dump_table(database, table) for table in tables}
    SQLiteStore(database, StoreSettings(clock=lambda: 10.0, pending_ttl=10, approval_ttl=10)).close()
    assert user_version(database) == SCHEMA_VERSION
    after = {table: dump_table(database, table) for table in tables}
    assert {row[-1] for row in after["trail"]} == {None}  # migration 7's `identity`, unknown before it
    after["trail"] = [row[:-1] for row in after["trail"]]
    assert {row[-1] for row in after["proposals"]} == {None}  # migration 10's reading: read when listed
    after["proposals"] = [row[:-1] for row in after["proposals"]]
    assert after == before
    with sqlite3.connect(database) as db:
        db.execute("PRAGMA foreign_keys = ON")
        assert db.execute("PRAGMA foreign_key_check").fetchall() == []
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        db.execute(
            "INSERT INTO decisions (proposal_id, revision, plan_sha256, decision, reason, decided_by, "
            "decided_at) VALUES ('ran', 2, 'b', 'request_changes', 'keep t3 open', 'alice', 5)"
        )
        seq = db.execute(
            "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256) "
            "VALUES (5, 'alice', 'changes_requested', 'ran', 2, 'b') RETURNING seq"
        ).fetchone()
        assert seq == (5,)
        for statement in ("UPDATE trail SET actor = 'mallory'", "DELETE FROM decisions"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(statement)
        with pytest.raises(sqlite3.IntegrityError, match="CHECK"):
            db.execute(
                "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256) "
                "VALUES (6, 'alice', 'shrugged', 'ran', 2, 'b')"
            )
    db.close()
    [backup] = backups_of(database)
    assert user_version(backup) == 5 and dump_table(backup, "trail") == before["trail"]


def dump_table(path: Path, table: str) -> list[tuple[object, ...]]:
    db = sqlite3.connect(path)
    try:
        return list(db.execute(f"SELECT * FROM {table} ORDER BY 1"))
    finally:
        db.close()


def test_migration_8_accepts_auditors_and_the_trail_written_before_leads_the_log(tmp_path: Path) -> None:
    """The events of a database from before the log are logged, in order, once, when the queue
    first serves it; the log then verifies against its own signed checkpoint."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from reviewer.service.store import StoreSettings
    from reviewer.service.store.sqlite import SQLiteStore
    from reviewer.trail import checkpoint
    from reviewer.trail.entries import entry_line, header_line
    from reviewer.trail.verify import verify_export

    database = version_5_sqlite(tmp_path / "queue.sqlite3")
    store = SQLiteStore(database, StoreSettings(clock=lambda: 10.0, pending_ttl=10, approval_ttl=10))
    try:
        store.create_token("auditor-1", "auditor", "a" * 64)
        assert store.log_earlier_events() == 4
        assert store.log_earlier_events() == 0
        head = store.trail_head()
        entries = store.trail_entries(0, head.size)
        key = Ed25519PrivateKey.generate()
        signed = checkpoint.sign(key, head.size, head.root)
        lines = [header_line(0, head.size, signed.text, [])]
        lines += [entry_line(index, hashed, content) for index, hashed, content in entries]
    finally:
        store.close()
    assert [json.loads(content)["event"] for _, _, content in entries] == [
        "submitted",
        "approved",
        "claimed",
        "executed",
    ]
    assert verify_export(lines, key.public_key()).entries == 4


def test_migration_8_rebuilds_tokens_keeping_every_sign_in_column(tmp_path: Path) -> None:
    """SQLite adds the auditor role only by building `tokens` again: a provider's person, a
    break-glass token and a rotated token keep every column of version 7, and the ids their
    idempotency keys and claims name."""
    from reviewer.service.store import StoreSettings
    from reviewer.service.store.sqlite import SQLiteStore

    database = tmp_path / "queue.sqlite3"
    settings = StoreSettings(clock=lambda: 10.0, pending_ttl=10, approval_ttl=10)
    SQLiteStore(database, settings).close()
    with sqlite3.connect(database) as db:
        db.executescript(
            """
INSERT INTO tokens (id, name, role, token_sha256, created_at, kind, issuer, subject, session_ends_at)
    VALUES (4, 'alice@example.com', 'reviewer', 'h1', 1, 'provider', 'https://id.example', 'alice-7', 99);
INSERT INTO tokens (id, name, role, token_sha256, created_at, kind)
    VALUES (5, 'ops', 'reviewer', 'h2', 2, 'break-glass');
INSERT INTO tokens (id, name, role, token_sha256, created_at, previous_sha256, previous_expires_at)
    VALUES (6, 'deploy', 'agent', 'h3', 3, 'h0', 50);
DROP TABLE trail_log;
DROP TABLE refusals;
DROP TABLE passkeys;
DROP TABLE passkey_links;
DROP TABLE review_link_key;
ALTER TABLE proposals DROP COLUMN summary;
PRAGMA user_version = 7;
"""
        )
        before = dump_table(database, "tokens")
    db.close()
    SQLiteStore(database, settings).close()
    assert user_version(database) == SCHEMA_VERSION
    assert dump_table(database, "tokens") == before
    with sqlite3.connect(database) as db:
        db.execute(
            "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('audit', 'auditor', 'h4', 4)"
        )
        with pytest.raises(sqlite3.IntegrityError, match="UNIQUE"):  # the active-name index came back
            db.execute(
                "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('ops', 'agent', 'h5', 5)"
            )
        indexes = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'index'")}
    db.close()
    assert {"tokens_active_name", "tokens_subject"} <= indexes


def test_a_database_whose_tables_are_ahead_of_its_version_is_refused_and_keeps_its_token_expiries(
    tmp_path: Path,
) -> None:
    """A file that has step 5's token columns (expiry times set) but says version 4: `db upgrade`
    refuses before step 5 rebuilds the tokens (it would copy them without their expiry), naming the
    column; the file is as it was."""
    database = tmp_path / "queue.sqlite3"
    db = open_store(
        str(database), clock=lambda: 1_800_000_000.0, pending_ttl=60, approval_ttl=60, create=True
    )
    db.create_token("agent", "agent", "a" * 64, expires_at=1_900_000_000.0)
    db.close()
    with sqlite3.connect(database) as raw:
        raw.execute("PRAGMA user_version = 4")
    raw.close()
    before = dump(database)
    refused = run("db", "upgrade", "--db", str(database))
    assert refused.returncode != 0
    assert "says queue schema version 4, but it already has the column tokens.expires_at that step 5" in (
        refused.stderr
    )
    assert "Traceback" not in refused.stderr
    assert dump(database) == before


def test_a_database_missing_what_its_version_says_it_has_is_refused_before_the_next_step(
    tmp_path: Path,
) -> None:
    """A file that says version 5 and has no outbox (step 4's table): refused before step 6."""
    database = tmp_path / "queue.sqlite3"
    open_store(str(database), clock=lambda: 1.0, pending_ttl=60, approval_ttl=60, create=True).close()
    with sqlite3.connect(database) as raw:
        raw.execute("DROP TABLE outbox")
        raw.execute("PRAGMA user_version = 5")
    raw.close()
    refused = run("db", "upgrade", "--db", str(database))
    assert refused.returncode != 0
    assert "says queue schema version 5, but it lacks the table outbox that step 4 adds" in refused.stderr
    assert user_version(database) == 5


def test_migration_9_adds_the_append_only_refusals_and_keeps_every_row(tmp_path: Path) -> None:
    """A version-8 file (this schema less the refusals) gains the table, append-only, and loses nothing:
    a decided proposal reads the same, now with no refusal, and an executor's refusal is then kept."""
    from reviewer.queue.messages import RefusalReport
    from reviewer.service.store import StoreSettings
    from reviewer.service.store.sqlite import SQLiteStore

    database = version_5_sqlite(tmp_path / "queue.sqlite3")
    settings = StoreSettings(clock=lambda: 10.0, pending_ttl=10, approval_ttl=10)
    SQLiteStore(database, settings).close()  # to this version, then back to a version-8 file
    with sqlite3.connect(database) as raw:
        raw.executescript(
            "DROP TABLE refusals; DROP TABLE passkeys; DROP TABLE passkey_links; DROP TABLE review_link_key; "
            "ALTER TABLE proposals DROP COLUMN summary; PRAGMA user_version = 8;"
        )
    raw.close()
    tables = ("decisions", "trail", "claims", "executions", "tokens", "trail_log")
    before = {table: dump_table(database, table) for table in tables}
    proposals_before = dump_table(database, "proposals")
    store = SQLiteStore(database, settings)
    try:
        assert store.upgraded_from == 8 and user_version(database) == SCHEMA_VERSION
        assert {table: dump_table(database, table) for table in tables} == before
        assert [row[:-1] for row in dump_table(database, "proposals")] == proposals_before
        with store.write() as db:
            db.run(
                "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('agent', 'agent', 'h', 1)"
            )
        agent = store.resolve_token("h")
        assert agent is not None
        report = RefusalReport(revision=1, plan_sha256="a" * 64, kind="ledger", message="AlreadyRun")
        with pytest.raises(Exception, match="another plan"):  # the fixture's digest is 'a'
            store.record_refusal(agent, "ran", report, "k")
        _, state = store.record_refusal(agent, "ran", report.model_copy(update={"plan_sha256": "a"}), "k")
        assert [refusal.kind for refusal in state.refusals] == ["ledger"]
    finally:
        store.close()
    with sqlite3.connect(database) as raw, pytest.raises(sqlite3.IntegrityError, match="append-only"):
        raw.execute("DELETE FROM refusals")
    raw.close()
    [*_, backup] = backups_of(database)
    assert user_version(backup) == 8


def test_migration_9_on_postgresql_adds_the_append_only_refusals(
    tmp_path: Path, postgres_cluster: Cluster
) -> None:
    url = version_4_postgresql(postgres_cluster)
    store = open_store(url, clock=lambda: 10.0, pending_ttl=10, approval_ttl=10, create=False)
    try:
        assert store.upgraded_from == 4
        assert store.figures(()).refusals == {"trail": 0, "signatures": 0, "ledger": 0, "other": 0}
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as raw:
        assert raw.execute("SELECT version FROM reviewer_schema").fetchone() == (SCHEMA_VERSION,)
        triggers = raw.execute(
            "SELECT tgname FROM pg_trigger WHERE tgrelid = 'refusals'::regclass AND NOT tgisinternal"
        ).fetchall()
    assert triggers == [("refusals_append_only",)]


def test_migration_11_takes_sign_in_ends_in_a_trail_that_keeps_its_rows_index_and_triggers(
    tmp_path: Path,
) -> None:
    """The trail is built again (SQLite changes a CHECK no other way): every row and seq kept, its
    index and append-only triggers back, and the end of a reviewer's sign-in (no proposal) accepted."""
    from reviewer.service.store import StoreSettings
    from reviewer.service.store.sqlite import SQLiteStore

    database = version_5_sqlite(tmp_path / "queue.sqlite3")
    before = dump_table(database, "trail")
    settings = StoreSettings(clock=lambda: 10.0, pending_ttl=10, approval_ttl=10)
    store = SQLiteStore(database, settings)
    try:
        assert store.upgraded_from == 5 and user_version(database) == SCHEMA_VERSION
        assert [row[: len(before[0])] for row in dump_table(database, "trail")] == before
        with store.write() as db:
            db.run(
                "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('bob', 'reviewer', 'h', 1)"
            )
        assert store.revoke_token("bob")
        assert [json.loads(leaf)["event"] for *_, leaf in store.trail_entries(0, store.trail_head().size)][
            -1
        ] == "sign_in_ended"
    finally:
        store.close()
    with sqlite3.connect(database) as raw:
        assert raw.execute("SELECT name FROM sqlite_master WHERE name = 'trail_proposal'").fetchone()
        with pytest.raises(sqlite3.IntegrityError, match="append-only"):
            raw.execute("DELETE FROM trail")
    raw.close()


def test_migration_11_on_postgresql_takes_sign_in_ends_in_the_trail(postgres_cluster: Cluster) -> None:
    url = version_4_postgresql(postgres_cluster)
    store = open_store(url, clock=lambda: 10.0, pending_ttl=10, approval_ttl=10, create=False)
    try:
        with store.write() as db:
            db.run(
                "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('bob', 'reviewer', 'h', 1)"
            )
        assert store.revoke_token("bob")
    finally:
        store.close()
    with psycopg.connect(url, autocommit=True) as raw:
        ended = raw.execute("SELECT actor, proposal_id, reason FROM trail WHERE event = 'sign_in_ended'")
        assert ended.fetchall() == [("bob", None, "token revoked")]


def test_migration_12_keeps_each_proposal_and_lists_one_stored_before_with_its_plan_read(
    tmp_path: Path,
) -> None:
    """A version-9 file (this schema less the passkeys and the stored readings) gains the column, every
    row kept; a proposal submitted before it is listed with the reading of its stored plan, one
    submitted after with the reading stored beside it, the two alike."""
    from reviewer.service.auth import Identity
    from reviewer.service.bodies import submission
    from reviewer.service.store import StoreSettings
    from reviewer.service.store.sqlite import SQLiteStore
    from tests.queue_harness import body, proposal

    database = tmp_path / "queue.sqlite3"
    settings = StoreSettings(clock=lambda: 10.0, pending_ttl=100, approval_ttl=100)
    store = SQLiteStore(database, settings)
    with store.write() as db:
        db.run("INSERT INTO tokens (name, role, token_sha256, created_at) VALUES ('agent', 'agent', 'h', 1)")
    agent = store.resolve_token("h")
    assert isinstance(agent, Identity)
    store.submit(agent, submission(body(proposal("before", calls=3))))
    store.close()
    with sqlite3.connect(database) as raw:
        raw.executescript(
            "ALTER TABLE proposals DROP COLUMN summary; DROP TABLE passkeys; DROP TABLE passkey_links; "
            "DROP TABLE review_link_key; PRAGMA user_version = 9;"
        )
    raw.close()
    before = dump_table(database, "proposals")
    store = SQLiteStore(database, settings)
    try:
        assert store.upgraded_from == 9 and user_version(database) == SCHEMA_VERSION
        assert [row[:-1] for row in dump_table(database, "proposals")] == before
        store.submit(agent, submission(body(proposal("after", calls=3))))
        listed = {
            summary.proposal_id: summary.reading for summary in store.list_proposals(None, None, 10).proposals
        }
    finally:
        store.close()
    assert listed["before"] is not None and listed["before"] == listed["after"]
    assert (listed["before"].updates, listed["before"].environment) == (3, "staging")
