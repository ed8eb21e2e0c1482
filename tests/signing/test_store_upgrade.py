"""A queue database of schema version 2 (before signed decisions) opens as the current version and keeps
its trail."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from reviewer.service.store import SCHEMA_VERSION, StoreSettings
from reviewer.service.store.sqlite import TRAIL_SIGNATURE_COLUMNS, SQLiteStore

PREVIOUS_RELEASE = Path(__file__).parents[1] / "service" / "fixtures" / "queue_v3.sql"
"""The version-3 file the previous release wrote (`tests/service/store/test_migrations.py` reads it too)."""


def version_2_database(path: Path) -> Path:
    """The previous release's version-3 file less what step 3 added (the trail's signature columns and
    the reviewers' keys): a version-2 file, tables and version agreeing, as a migration requires."""
    with sqlite3.connect(path) as db:
        db.executescript(PREVIOUS_RELEASE.read_text())
        for column in TRAIL_SIGNATURE_COLUMNS:
            db.execute(f"ALTER TABLE trail DROP COLUMN {column}")
        db.execute("DROP TABLE ssh_keys")
        db.execute("PRAGMA user_version = 2")
    db.close()
    return path


def test_a_version_2_database_gains_the_signature_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = version_2_database(tmp_path / "old.sqlite3")
    with sqlite3.connect(path) as db:
        before = db.execute("SELECT actor FROM trail ORDER BY seq").fetchall()
    db.close()
    assert before
    SQLiteStore(path, StoreSettings(clock=lambda: 2.0, pending_ttl=10, approval_ttl=10)).close()
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(trail)")}
        rows = db.execute("SELECT actor, statement FROM trail ORDER BY seq").fetchall()
        version = db.execute("PRAGMA user_version").fetchone()[0]
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert set(TRAIL_SIGNATURE_COLUMNS) <= columns and "ssh_keys" in tables
    assert rows == [(actor, None) for (actor,) in before] and version == SCHEMA_VERSION
    # opening again is fine
    SQLiteStore(path, StoreSettings(clock=lambda: 3.0, pending_ttl=10, approval_ttl=10)).close()
