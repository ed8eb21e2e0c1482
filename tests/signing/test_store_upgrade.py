"""A queue database made before signed decisions opens, keeps its trail, and gains the new columns."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from reviewer.service.store import SCHEMA, TRAIL_SIGNATURE_COLUMNS, SQLiteStore


def test_an_older_database_gains_the_signature_columns_and_keeps_its_rows(tmp_path: Path) -> None:
    path = tmp_path / "old.sqlite3"
    with sqlite3.connect(path) as db:
        db.executescript(SCHEMA)
        db.execute(
            "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256) "
            "VALUES (1, 'agent', 'submitted', 'p', 1, 'abc')"
        )
    store = SQLiteStore(path, clock=lambda: 2.0, pending_ttl=10, approval_ttl=10)
    store.close()
    with sqlite3.connect(path) as db:
        columns = {row[1] for row in db.execute("PRAGMA table_info(trail)")}
        rows = db.execute("SELECT actor, statement FROM trail").fetchall()
    assert set(TRAIL_SIGNATURE_COLUMNS) <= columns
    assert rows == [("agent", None)]
    SQLiteStore(path, clock=lambda: 3.0, pending_ttl=10, approval_ttl=10).close()  # opening twice is fine
