"""The queue on one SQLite file: connections, transactions and the schema; the operations are `QueueStore`'s.

Every write runs in a `BEGIN IMMEDIATE` transaction, so the write lock is taken before the first
read and the rules hold across threads and processes. Acknowledged means on disk: WAL with
`synchronous=FULL`.
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from reviewer.service.errors import DatabaseUnusable
from reviewer.service.rules import Row
from reviewer.service.store import SCHEMA_VERSION, QueueStore, StoreSettings

SCHEMA = """
CREATE TABLE IF NOT EXISTS tokens (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ('agent', 'reviewer')),
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    revoked_at REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS tokens_active_name ON tokens(name) WHERE revoked_at IS NULL;

CREATE TABLE IF NOT EXISTS proposals (
    proposal_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    latest_revision INTEGER NOT NULL,
    latest_seq INTEGER NOT NULL,
    plan_sha256 TEXT NOT NULL,
    title TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    call_count INTEGER NOT NULL,
    submitted_at REAL NOT NULL,
    pending_expires_at REAL NOT NULL,
    decision TEXT,
    decided_by TEXT,
    decided_at REAL,
    reason TEXT,
    decision_id INTEGER,
    approval_expires_at REAL,
    claim_id TEXT,
    claimed_by TEXT,
    claimed_at REAL,
    lease_expires_at REAL,
    executed_at REAL,
    deadline REAL
);
CREATE INDEX IF NOT EXISTS proposals_latest_seq ON proposals(latest_seq);
CREATE INDEX IF NOT EXISTS proposals_deadline ON proposals(deadline);

CREATE TABLE IF NOT EXISTS revisions (
    proposal_id TEXT NOT NULL REFERENCES proposals(proposal_id),
    revision INTEGER NOT NULL,
    plan_sha256 TEXT NOT NULL,
    title TEXT NOT NULL,
    call_count INTEGER NOT NULL,
    submitted_by TEXT NOT NULL,
    submitted_at REAL NOT NULL,
    body BLOB NOT NULL,
    PRIMARY KEY (proposal_id, revision)
);

CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY,
    proposal_id TEXT NOT NULL REFERENCES proposals(proposal_id),
    revision INTEGER NOT NULL,
    plan_sha256 TEXT NOT NULL,
    decision TEXT NOT NULL CHECK (decision IN ('approve', 'reject')),
    reason TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    decided_at REAL NOT NULL,
    expires_at REAL,
    UNIQUE (proposal_id, revision)
);

CREATE TABLE IF NOT EXISTS claims (
    claim_id TEXT PRIMARY KEY,
    decision_id INTEGER NOT NULL UNIQUE REFERENCES decisions(id),
    proposal_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    plan_sha256 TEXT NOT NULL,
    claimed_by TEXT NOT NULL,
    claimed_at REAL NOT NULL,
    lease_expires_at REAL NOT NULL
);

CREATE TABLE IF NOT EXISTS executions (
    id INTEGER PRIMARY KEY,
    decision_id INTEGER NOT NULL UNIQUE REFERENCES decisions(id),
    claim_id TEXT NOT NULL UNIQUE REFERENCES claims(claim_id),
    proposal_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    reported_by TEXT NOT NULL,
    reported_at REAL NOT NULL,
    ended TEXT,
    body BLOB NOT NULL
);

CREATE TABLE IF NOT EXISTS idempotency (
    token_id INTEGER NOT NULL,
    key TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_at REAL NOT NULL,
    PRIMARY KEY (token_id, key)
);

CREATE TABLE IF NOT EXISTS trail (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    event TEXT NOT NULL CHECK (event IN ('submitted', 'approved', 'rejected', 'claimed', 'executed')),
    proposal_id TEXT NOT NULL,
    revision INTEGER NOT NULL,
    plan_sha256 TEXT NOT NULL,
    reason TEXT,
    statement TEXT,
    signature TEXT,
    key_fingerprint TEXT
);
CREATE INDEX IF NOT EXISTS trail_proposal ON trail(proposal_id, seq);

CREATE TABLE IF NOT EXISTS ssh_keys (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    public_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    comment TEXT NOT NULL,
    added_at REAL NOT NULL,
    removed_at REAL
);
CREATE UNIQUE INDEX IF NOT EXISTS ssh_keys_active ON ssh_keys(fingerprint) WHERE removed_at IS NULL;
"""
"""Reviewers' SSH keys: a key is active under one name at a time (one key signing as two reviewers
would let one person meet a quorum of two)."""

TRAIL_SIGNATURE_COLUMNS = ("statement", "signature", "key_fingerprint")
"""Signed decisions in `trail`; a version-2 file gains them on open (nullable, so no row changes)."""

APPEND_ONLY_TABLES = ("revisions", "decisions", "claims", "executions", "trail")


def _append_only_triggers() -> str:
    return "\n".join(
        f"CREATE TRIGGER IF NOT EXISTS {table}_no_{verb} BEFORE {verb.upper()} ON {table} "
        f"BEGIN SELECT RAISE(ABORT, '{table} is append-only'); END;"
        for table in APPEND_ONLY_TABLES
        for verb in ("update", "delete")
    )


def _create_private(path: Path) -> None:
    """Create the database file 0600 (whatever the umask) unless it exists; an existing one keeps its mode.

    It holds every proposal and the token hashes. SQLite gives the -wal and -shm files it creates
    the mode of the database file, so they are 0600 too; an empty file is a valid empty database.
    """
    try:
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    except FileExistsError:
        return
    os.close(descriptor)


class _SQLiteTransaction:
    def __init__(self, connection: sqlite3.Connection) -> None:
        self.connection = connection

    def one(self, sql: str, **params: Any) -> Row | None:
        row: Row | None = self.connection.execute(sql, params).fetchone()
        return row

    def all(self, sql: str, **params: Any) -> list[Row]:
        return list(self.connection.execute(sql, params).fetchall())

    def run(self, sql: str, **params: Any) -> int:
        return self.connection.execute(sql, params).rowcount


class SQLiteStore(QueueStore):
    """`QueueStore` on one SQLite file; one connection per thread, as sqlite3 requires.

    `create=False` refuses a file that does not exist (a mistyped `--db` for a token command must
    not become a new, empty queue).
    """

    def __init__(self, path: Path | str, settings: StoreSettings, *, create: bool = True) -> None:
        super().__init__(settings)
        self.path = Path(path)
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        if not self.path.exists() and not create:
            raise DatabaseUnusable(
                f"no queue database at {self.path}; check the path, or start "
                f"`reviewer serve --db {self.path}` once to create it"
            )
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, mode=0o700)
        _create_private(self.path)
        self._migrate()

    @property
    def location(self) -> str:
        return str(self.path)

    def _migrate(self) -> None:
        """Create the schema in a new file; a file of another schema version is refused, never changed."""
        connection = self._connection()
        try:
            version = connection.execute("PRAGMA user_version").fetchone()[0]
            tables = {
                row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        except sqlite3.DatabaseError as error:
            raise DatabaseUnusable(f"{self.path} is not a queue database ({error})") from None
        if tables and "proposals" not in tables:
            raise DatabaseUnusable(f"{self.path} is an SQLite file of something else, not a queue database")
        if tables and version == 2:
            present = {row[1] for row in connection.execute("PRAGMA table_info(trail)")}
            for column in TRAIL_SIGNATURE_COLUMNS:
                if column not in present:
                    connection.execute(f"ALTER TABLE trail ADD COLUMN {column} TEXT")
        elif tables and version != SCHEMA_VERSION:
            raise DatabaseUnusable(
                f"{self.path} holds queue schema version {version}, and this reviewer reads version "
                f"{SCHEMA_VERSION}; run the reviewer release that wrote it, or point --db elsewhere"
            )
        self.created = not tables
        connection.executescript(
            SCHEMA + _append_only_triggers() + f"PRAGMA user_version = {SCHEMA_VERSION};"
        )

    # connections and transactions

    def _connection(self) -> sqlite3.Connection:
        connection: sqlite3.Connection | None = getattr(self._local, "connection", None)
        if connection is None:
            connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            connection.row_factory = sqlite3.Row
            connection.execute("PRAGMA busy_timeout = 30000")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("PRAGMA foreign_keys = ON")
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    @contextmanager
    def write(self) -> Iterator[_SQLiteTransaction]:
        """A `BEGIN IMMEDIATE` transaction: the write lock is taken before the first read."""
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield _SQLiteTransaction(connection)
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    @contextmanager
    def read(self) -> Iterator[_SQLiteTransaction]:
        """A read transaction, so a record assembled from several tables is one snapshot."""
        connection = self._connection()
        connection.execute("BEGIN")
        try:
            yield _SQLiteTransaction(connection)
        finally:
            connection.execute("COMMIT")

    @contextmanager
    def single(self) -> Iterator[_SQLiteTransaction]:
        yield _SQLiteTransaction(self._connection())

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()

    # for tests and operators

    def integrity_check(self) -> str:
        return str(self._connection().execute("PRAGMA integrity_check").fetchone()[0])
