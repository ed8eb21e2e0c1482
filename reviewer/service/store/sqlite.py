"""The queue on one SQLite file: connections, transactions and the schema; the operations are `QueueStore`'s.

Every write runs in a `BEGIN IMMEDIATE` transaction, so the write lock is taken before the first
read and the rules hold across threads and processes. Acknowledged means on disk: WAL with
`synchronous=FULL`. A lock another process holds is waited for `BUSY_TIMEOUT_MS`; that, a full
disk, an I/O error or a damaged file is an outage (`outage_of`), answered 503.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Final

from reviewer.private_files import private_folder
from reviewer.service.auth import ROLES
from reviewer.service.errors import DatabaseUnusable
from reviewer.service.rules import Row
from reviewer.service.store import (
    DECISION_CHECK,
    SCHEMA_VERSION,
    TRAIL_EVENT_CHECK,
    QueueStore,
    StoreSettings,
    migrations,
)
from reviewer.service.store.base import ThreadConnections
from reviewer.service.store.outages import Outage

BUSY_TIMEOUT_MS: Final = 5000
"""How long a statement waits for a lock another process holds (a backup, a second `serve`, a
command) before its request is answered 503: well within the 10 s every request is answered in."""

OUTAGES: Final = (
    ("SQLITE_BUSY", f"the database file is locked by another process past {BUSY_TIMEOUT_MS // 1000} s"),
    ("SQLITE_LOCKED", f"the database file is locked by another process past {BUSY_TIMEOUT_MS // 1000} s"),
    ("SQLITE_FULL", "the disk holding the database file is full"),
    ("SQLITE_IOERR", "the database file could not be read or written (an I/O error)"),
    ("SQLITE_CANTOPEN", "the database file cannot be opened"),
    ("SQLITE_READONLY", "the database file cannot be written (read-only)"),
    ("SQLITE_CORRUPT", "the database file is damaged; restore it from a backup (`reviewer db restore`)"),
    ("SQLITE_NOTADB", "the database file is damaged; restore it from a backup (`reviewer db restore`)"),
    ("SQLITE_NOMEM", "SQLite is out of memory"),
    ("SQLITE_PROTOCOL", "SQLite's file locking failed"),
)
"""SQLite's result codes (by name, as `sqlite3` reports them, extended codes included) that are outages."""


def outage_of(error: BaseException) -> Outage | None:
    """The outage an sqlite3 error is, or None for one that is not (a bug: answered 500)."""
    if not isinstance(error, sqlite3.Error):
        return None
    name = getattr(error, "sqlite_errorname", None) or ""
    for code, cause in OUTAGES:
        if name == code or name.startswith(code + "_"):
            return Outage(cause)
    return None


OUTBOX_SCHEMA = """
CREATE TABLE IF NOT EXISTS outbox (
    id INTEGER PRIMARY KEY,
    event_id TEXT NOT NULL,
    event_key TEXT NOT NULL,
    event TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    target TEXT NOT NULL,
    created_at REAL NOT NULL,
    body BLOB NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL,
    next_attempt_at REAL NOT NULL,
    give_up_at REAL NOT NULL,
    leased_until REAL,
    last_error TEXT,
    finished_at REAL,
    UNIQUE (event_key, target)
);
CREATE INDEX IF NOT EXISTS outbox_due ON outbox(state, next_attempt_at);
"""
"""Notifications waiting to be sent, one row per event and target, written in the transaction that
makes the event true (version 4: migration 4)."""

TRAIL_LOG_SCHEMA = """
CREATE TABLE IF NOT EXISTS trail_log (
    leaf_index INTEGER PRIMARY KEY,
    seq INTEGER NOT NULL,
    leaf TEXT NOT NULL,
    hashes BLOB NOT NULL
);
"""
"""The trail's Merkle log (`reviewer.service.store.trail`): each leaf's bytes, its hash and the
hashes of the subtrees it completes (version 8: migration step 8)."""

REFUSALS_SCHEMA = """
CREATE TABLE IF NOT EXISTS refusals (
    id INTEGER PRIMARY KEY,
    proposal_id TEXT NOT NULL REFERENCES proposals(proposal_id),
    revision INTEGER NOT NULL,
    plan_sha256 TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    refused_by TEXT NOT NULL,
    refused_at REAL NOT NULL
);
CREATE INDEX IF NOT EXISTS refusals_proposal ON refusals(proposal_id, revision);
"""
"""Executors' refusals of approvals before their claim (`reviewer.service.store.refusals`), append-only
(version 9: migration step 9). `kind` has no CHECK: the API admits only `RefusalKind`'s words, and a
new word must not cost SQLite a rebuild of the table."""

QUEUE_CLOCK_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue_clock (at REAL NOT NULL);
INSERT INTO queue_clock (at) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM queue_clock);
"""
"""The latest time the queue used, one row kept by `QueueStore.keep_time` (version 9: migration step
9): a restart on a clock set back starts no earlier. Created where missing, so it leaves no mark."""

PASSKEYS_SCHEMA = """
CREATE TABLE IF NOT EXISTS passkeys (
    id INTEGER PRIMARY KEY,
    credential_id TEXT NOT NULL UNIQUE,
    token_id INTEGER NOT NULL REFERENCES tokens(id),
    public_key TEXT NOT NULL,
    sign_count INTEGER NOT NULL,
    rp_id TEXT NOT NULL,
    origin TEXT NOT NULL,
    label TEXT NOT NULL,
    added_at REAL NOT NULL,
    removed_at REAL
);
CREATE INDEX IF NOT EXISTS passkeys_token ON passkeys(token_id);
CREATE TABLE IF NOT EXISTS passkey_links (
    link_sha256 TEXT PRIMARY KEY,
    token_id INTEGER NOT NULL REFERENCES tokens(id),
    challenge TEXT,
    created_at REAL NOT NULL,
    expires_at REAL NOT NULL,
    used_at REAL
);
CREATE TABLE IF NOT EXISTS review_link_key (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret TEXT NOT NULL
);
"""
"""Reviewers' passkeys, each bound to the sign-in (the tokens row) that enrolled it, so the end of
that sign-in ends the passkey's power; the one-time enrolment links, kept by their SHA-256; and the
key of the review pages' links, one random secret every replica shares (version 10: migration step 10)."""

TOKENS_SCHEMA = """
CREATE TABLE IF NOT EXISTS {table} (
    id INTEGER PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL CHECK (role IN ({roles})),
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at REAL NOT NULL,
    revoked_at REAL,
    expires_at REAL,
    previous_sha256 TEXT UNIQUE,
    previous_expires_at REAL
);
"""
"""`{table}` is `tokens`, or the table migrations 5 and 8 copy the tokens into (SQLite changes a CHECK
only by building the table again); the index on active names is made after the rename. `{roles}`
is the roles a release knows."""
TOKEN_ROLES: Final = ", ".join(f"'{role}'" for role in ROLES)
TOKENS_COLUMNS: Final = (
    "id, name, role, token_sha256, created_at, revoked_at, expires_at, previous_sha256, previous_expires_at"
)
TOKENS_INDEX = (
    "CREATE UNIQUE INDEX IF NOT EXISTS tokens_active_name ON tokens(name) WHERE revoked_at IS NULL;\n"
)

SSH_KEYS_SCHEMA = """
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
DECISIONS_COLUMNS: Final = (
    "id, proposal_id, revision, plan_sha256, decision, reason, decided_by, decided_at, expires_at"
)
DECISIONS_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS {{table}} (
    id INTEGER PRIMARY KEY,
    proposal_id TEXT NOT NULL REFERENCES proposals(proposal_id),
    revision INTEGER NOT NULL,
    plan_sha256 TEXT NOT NULL,
    decision TEXT NOT NULL CHECK ({DECISION_CHECK}),
    reason TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    decided_at REAL NOT NULL,
    expires_at REAL,
    UNIQUE (proposal_id, revision)
);
"""
TRAIL_COLUMNS: Final = (
    "seq, at, actor, event, proposal_id, revision, plan_sha256, reason, statement, signature, key_fingerprint"
)
TRAIL_SCHEMA: Final = f"""
CREATE TABLE IF NOT EXISTS {{table}} (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    at REAL NOT NULL,
    actor TEXT NOT NULL,
    event TEXT NOT NULL CHECK ({TRAIL_EVENT_CHECK}),
    proposal_id TEXT,
    revision INTEGER,
    plan_sha256 TEXT,
    reason TEXT,
    statement TEXT,
    signature TEXT,
    key_fingerprint TEXT
);
"""
TRAIL_INDEX: Final = "CREATE INDEX IF NOT EXISTS trail_proposal ON trail(proposal_id, seq);\n"
"""`{table}` is the table's name, or the one migration 6 copies its rows into (a new decision, and
its trail event, in the CHECK); the copy keeps every row and id, and the rename gives it the name
`claims` and `executions` reference."""


def _rebuilt(table: str, schema: str, columns: str) -> str:
    """SQLite changes a CHECK only by building the table again: a copy under a new name with every
    row, the old table dropped (its append-only triggers go with it; `upgrade` creates them again),
    the copy renamed. `upgrade` turns foreign keys off around it and checks them before committing."""
    return (
        schema.format(table=f"{table}_v6")
        + f"INSERT INTO {table}_v6 ({columns}) SELECT {columns} FROM {table};\n"
        f"DROP TABLE {table};\n"
        f"ALTER TABLE {table}_v6 RENAME TO {table};\n"
    )


SCHEMA = (
    TOKENS_SCHEMA.format(table="tokens", roles=TOKEN_ROLES)
    + TOKENS_INDEX
    + """
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

"""
    + DECISIONS_SCHEMA.format(table="decisions")
    + """
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

"""
    + TRAIL_SCHEMA.format(table="trail")
    + TRAIL_INDEX
    + """
"""
    + SSH_KEYS_SCHEMA
    + OUTBOX_SCHEMA
    + TRAIL_LOG_SCHEMA
    + REFUSALS_SCHEMA
    + QUEUE_CLOCK_SCHEMA
    + PASSKEYS_SCHEMA
)

IDENTITY_COLUMNS: Final = (
    "ALTER TABLE tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'minted';\n"
    "ALTER TABLE tokens ADD COLUMN issuer TEXT;\n"
    "ALTER TABLE tokens ADD COLUMN subject TEXT;\n"
    "ALTER TABLE tokens ADD COLUMN session_ends_at REAL;\n"
    "CREATE INDEX IF NOT EXISTS tokens_subject ON tokens(issuer, subject);\n"
    "ALTER TABLE trail ADD COLUMN identity TEXT;\n"
)
"""Version 7: how a reviewer signed in (a minted token, a break-glass token, or the provider's
person by issuer and subject, with the end of their session), and the deciding identity in the trail.
Nullable or defaulted columns, so no row changes; a new database gets them the same way."""
SCHEMA += IDENTITY_COLUMNS
READING_COLUMN: Final = "ALTER TABLE proposals ADD COLUMN summary TEXT;\n"
"""Version 10: the reading of each proposal's latest revision (`reviewer.reading.summary`), stored at
submission for the list; NULL on a row stored before, which is read from its body when listed."""
SCHEMA += READING_COLUMN
TOKENS_V7_COLUMNS: Final = TOKENS_COLUMNS + ", kind, issuer, subject, session_ends_at"
TOKENS_SUBJECT_INDEX: Final = "CREATE INDEX IF NOT EXISTS tokens_subject ON tokens(issuer, subject);\n"


def _identity_columns_of(table: str) -> str:
    """Version 7's token columns added to `table`, the copy migration 8 builds of `tokens` (SQLite
    changes a CHECK, a new role, only by building the table again)."""
    return "".join(
        line.replace("ALTER TABLE tokens ", f"ALTER TABLE {table} ", 1) + "\n"
        for line in IDENTITY_COLUMNS.splitlines()
        if line.startswith("ALTER TABLE tokens ")
    )


TRAIL_SIGNATURE_COLUMNS = ("statement", "signature", "key_fingerprint")
"""Signed decisions in `trail`; a version-2 file gains them on open (nullable, so no row changes)."""

MIGRATIONS: Final = {
    3: "".join(f"ALTER TABLE trail ADD COLUMN {column} TEXT;\n" for column in TRAIL_SIGNATURE_COLUMNS)
    + SSH_KEYS_SCHEMA,
    4: OUTBOX_SCHEMA,
    5: TOKENS_SCHEMA.format(table="tokens_v5", roles="'agent', 'reviewer', 'metrics'")
    + "INSERT INTO tokens_v5 (id, name, role, token_sha256, created_at, revoked_at) "
    "SELECT id, name, role, token_sha256, created_at, revoked_at FROM tokens;\n"
    "DROP TABLE tokens;\n"
    "ALTER TABLE tokens_v5 RENAME TO tokens;\n" + TOKENS_INDEX,
    6: _rebuilt("decisions", DECISIONS_SCHEMA, DECISIONS_COLUMNS)
    + _rebuilt("trail", TRAIL_SCHEMA, TRAIL_COLUMNS)
    + TRAIL_INDEX,
    7: IDENTITY_COLUMNS,
    8: TOKENS_SCHEMA.format(table="tokens_v8", roles=TOKEN_ROLES)
    + _identity_columns_of("tokens_v8")
    + f"INSERT INTO tokens_v8 ({TOKENS_V7_COLUMNS}) SELECT {TOKENS_V7_COLUMNS} FROM tokens;\n"
    "DROP TABLE tokens;\n"
    "ALTER TABLE tokens_v8 RENAME TO tokens;\n" + TOKENS_INDEX + TOKENS_SUBJECT_INDEX + TRAIL_LOG_SCHEMA,
    9: REFUSALS_SCHEMA + QUEUE_CLOCK_SCHEMA,
    10: PASSKEYS_SCHEMA,
    11: _rebuilt(
        "trail",
        TRAIL_SCHEMA + "ALTER TABLE {table} ADD COLUMN identity TEXT;\n",
        TRAIL_COLUMNS + ", identity",
    )
    + TRAIL_INDEX,
    12: READING_COLUMN,
}
"""Each numbered step of `reviewer.service.store.migrations.STEPS` in SQLite's words (10 builds the
trail again: its CHECK takes the events `sign_in_ended` and `withdrawn`, and a sign-in's end
concerns no proposal)."""
OLDEST_VERSION: Final = 2

APPEND_ONLY_TABLES = ("revisions", "decisions", "claims", "executions", "trail", "trail_log", "refusals")


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
        self.changed: set[str] = set()

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

    def __init__(
        self, path: Path | str, settings: StoreSettings, *, create: bool = True, migrate: bool = True
    ) -> None:
        super().__init__(settings)
        self.path = Path(path)
        self._threads: ThreadConnections[sqlite3.Connection] = ThreadConnections()
        if not self.path.exists() and not create:
            raise DatabaseUnusable(
                f"no queue database at {self.path}; check the path, or start "
                f"`reviewer serve --db {self.path}` once to create it"
            )
        private_folder(self.path.parent)
        _create_private(self.path)
        self._migrate(migrate)
        self._start_clock()

    @property
    def location(self) -> str:
        return str(self.path)

    def schema_version(self) -> int:
        return int(self._connection().execute("PRAGMA user_version").fetchone()[0])

    def _migrate(self, migrate: bool) -> None:
        """Create the schema in a new file; bring an older one up to date, after a backup, in one
        transaction (`reviewer.service.store.migrations`); refuse a newer one, changing nothing."""
        connection = self._connection()
        try:
            version = self.schema_version()
            tables = {
                row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
            }
        except sqlite3.DatabaseError as error:
            raise DatabaseUnusable(f"{self.path} is not a queue database ({error})") from None
        if tables and "proposals" not in tables:
            raise DatabaseUnusable(f"{self.path} is an SQLite file of something else, not a queue database")
        if not tables:
            self.created = True
            connection.executescript(
                "BEGIN IMMEDIATE;"
                + SCHEMA
                + _append_only_triggers()
                + f"PRAGMA user_version = {SCHEMA_VERSION}; COMMIT;"
            )
            return
        upgrade = migrations.plan_upgrade(self.location, version, oldest=OLDEST_VERSION, migrate=migrate)
        if upgrade is not None:
            self.upgrade(upgrade)

    def upgrade(self, upgrade: migrations.Upgrade) -> None:
        """Back the file up next to it, then run every step in one transaction; the version is read
        again under the write lock, so of two processes starting together one migrates, and the
        other drops its backup."""
        connection = self._connection()
        backup = migrations.backup_before_upgrade(connection, self.path, upgrade.found, self.clock())
        # A step that rebuilds a table others reference drops it first: foreign keys stay off for
        # the transaction (SQLite ignores the pragma inside one) and are checked before the commit.
        connection.execute("PRAGMA foreign_keys = OFF")
        try:
            connection.execute("BEGIN IMMEDIATE")
            if self.schema_version() != upgrade.found:
                connection.execute("ROLLBACK")
                backup.unlink()  # another process migrated meanwhile, after a backup of its own
                return
            migrations.log_upgrade(upgrade, backup)
            for step in upgrade.steps:
                migrations.check_before_step(self.location, upgrade.found, step, self._columns)
                for statement in migrations.sqlite_statements(MIGRATIONS[step]):
                    connection.execute(statement)
            for statement in migrations.sqlite_statements(_append_only_triggers()):
                connection.execute(statement)
            connection.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            broken = connection.execute("PRAGMA foreign_key_check").fetchall()
            if broken:
                raise DatabaseUnusable(
                    f"migrating {self.path} would leave {len(broken)} rows referencing rows that do not "
                    f"exist (first: table {broken[0][0]}); nothing was changed"
                )
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                connection.execute("ROLLBACK")
            raise
        finally:
            connection.execute("PRAGMA foreign_keys = ON")
        migrations.log_upgraded(upgrade)
        self.upgraded_from = upgrade.found

    def _columns(self, table: str) -> set[str] | None:
        rows = self._connection().execute(f"PRAGMA table_info({table})").fetchall()
        return {row[1] for row in rows} or None

    def backup(self, destination: Path) -> None:
        """`reviewer db backup`: a consistent copy of the queue, taken while it serves."""
        migrations.backup_sqlite(self._connection(), destination)

    # connections and transactions

    def _connection(self) -> sqlite3.Connection:
        connection = self._threads.current()
        if connection is None:
            connection = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
            connection.row_factory = sqlite3.Row
            connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
            connection.execute("PRAGMA journal_mode = WAL")
            connection.execute("PRAGMA synchronous = FULL")
            connection.execute("PRAGMA foreign_keys = ON")
            self._threads.keep(connection)
        return connection

    PROBE_WRITE = f"PRAGMA user_version = {SCHEMA_VERSION}"

    @contextmanager
    def write(self) -> Iterator[_SQLiteTransaction]:
        """A `BEGIN IMMEDIATE` transaction: the write lock is taken before the first read."""
        with self.health.guarded(outage_of, writing=True), self._transaction("BEGIN IMMEDIATE") as db:
            yield db
        self.announce(db.changed)

    @contextmanager
    def read(self) -> Iterator[_SQLiteTransaction]:
        """A read transaction, so a record assembled from several tables is one snapshot."""
        with self.health.guarded(outage_of, writing=False), self._transaction("BEGIN") as db:
            yield db

    @contextmanager
    def _transaction(self, begin: str) -> Iterator[_SQLiteTransaction]:
        """Committed when the block ends; rolled back when it raises, or when the COMMIT fails (a
        full disk), so the thread's connection is left outside any transaction either way."""
        connection = self._connection()
        connection.execute(begin)
        try:
            yield _SQLiteTransaction(connection)
            connection.execute("COMMIT")
        except BaseException:
            if connection.in_transaction:
                try:
                    connection.execute("ROLLBACK")
                except sqlite3.Error:  # a connection that cannot roll back is not used again
                    self._threads.discard()
            raise

    @contextmanager
    def single(self) -> Iterator[_SQLiteTransaction]:
        with self.health.guarded(outage_of, writing=False):
            yield _SQLiteTransaction(self._connection())

    def close(self) -> None:
        self._threads.close()

    def check_before_serving(self) -> None:
        """`PRAGMA quick_check` (every page and index entry read, no cross-check of index contents):
        a file with a broken page or index is refused before it serves wrong answers or 500s."""
        try:
            problems = [row[0] for row in self._connection().execute("PRAGMA quick_check(5)")]
        except sqlite3.DatabaseError as error:
            problems = [str(error)]
        if problems != ["ok"]:
            lines = [" ".join(line.split()) for problem in problems for line in problem.splitlines()]
            said = "; ".join(line for line in lines if line and not line.startswith("***"))
            raise DatabaseUnusable(
                f"{self.path} is damaged ({said[:200]}); restore it from a backup with "
                f"`reviewer db restore BACKUP --db {self.path}` (it keeps this file beside it)"
            )

    # for tests and operators

    def integrity_check(self) -> str:
        return str(self._connection().execute("PRAGMA integrity_check").fetchone()[0])
