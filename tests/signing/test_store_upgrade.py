"""A queue database of schema version 2 (before signed decisions) opens as the current version and keeps
its trail."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from reviewer.service.store import SCHEMA_VERSION, StoreSettings
from reviewer.service.store.sqlite import SCHEMA, TRAIL_SIGNATURE_COLUMNS, SQLiteStore

VERSION_2_SCHEMA = SCHEMA.replace(
    "    reason TEXT,\n    statement TEXT,\n    signature TEXT,\n    key_fingerprint TEXT\n);",
    "    reason TEXT\n);",
)


def test_a_version_2_database_gains_the_signature_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    assert VERSION_2_SCHEMA != SCHEMA, "the trail's signature columns moved: update this test"
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(VERSION_2_SCHEMA + "PRAGMA user_version = 2;")
        db.execute(
            "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256) "
            "VALUES (1, 'agent', 'submitted', 'p', 1, 'abc')"
        )
    SQLiteStore(path, StoreSettings(clock=lambda: 2.0, pending_ttl=10, approval_ttl=10)).close()
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(trail)")}
        rows = db.execute("SELECT actor, statement FROM trail").fetchall()
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(TRAIL_SIGNATURE_COLUMNS) <= columns and "ssh_keys" in tables
    assert rows == [("agent", None)] and version == SCHEMA_VERSION
    # opening again is fine
    SQLiteStore(path, StoreSettings(clock=lambda: 3.0, pending_ttl=10, approval_ttl=10)).close()
