"""The queue on PostgreSQL (psycopg 3): connections, transactions and the schema; the operations are
`QueueStore`'s, the rules `reviewer.service.rules`'.

Several `reviewer serve` processes may share one database. Each write transaction first takes one
transaction-scoped advisory lock, the same single-writer discipline as SQLite's `BEGIN IMMEDIATE`:
the rules read and then write, so two replicas must never interleave (one winner per race), and
the trail's `seq` (the list's ETag and cursor) must grow in commit order, which a sequence alone
does not give. A decision is a few milliseconds of work, so one writer at a time costs nothing a
review queue can notice. Reads run on a REPEATABLE READ snapshot and take no lock.

Every connection carries timeouts (`SESSION_SETTINGS`) and TCP keepalives (`KEEPALIVES`), and every
transaction is bounded from outside (`TRANSACTION_BOUND`, `outages.Watchdog`): a database that is
paused or cut off is answered as an outage (`outage_of`) within seconds, and a replica cut off while
it holds the write lock loses it (and its transaction) after `idle_in_transaction_session_timeout`,
so the other replicas write again. A connection the server closed while it sat idle (a restart) is
noticed before it is used and replaced.

A write that changed proposals says so on the `CHANGES` channel (`NOTIFY`, sent at its commit), and
each replica `LISTEN`s on one connection of its own (`ChangeListener`), so a decision taken through
one replica wakes the requests waiting for it on every other within milliseconds.

psycopg is imported only here, so the SQLite default needs nothing from it.
"""

from __future__ import annotations

import logging
import os
import re
import secrets
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import cache, partial
from typing import Any, Final

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg.rows import dict_row

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
from reviewer.service.store.base import Clock, ThreadConnections
from reviewer.service.store.clock import DatabaseTime
from reviewer.service.store.outages import Outage, Watchdog

WRITE_LOCK: Final = 0x72657669  # "revi": the advisory lock every write transaction holds
CHANGES: Final = "reviewer_changes"
"""The channel a write's `NOTIFY` names; the payload is the writing replica's id and a proposal's."""
LISTEN_RETRY: Final = 2.0
"""Seconds between two tries to listen again after the listening connection failed."""
CONNECT_TIMEOUT: Final = 2
"""Seconds to open a connection (libpq's `connect_timeout`, its least)."""
SESSION_SETTINGS: Final = {
    "statement_timeout": "5s",
    "lock_timeout": "4s",
    "idle_in_transaction_session_timeout": "4s",
}
"""Set on every connection: no statement runs past 5 s, no write waits past 4 s for the write lock
(another replica's), and a replica that stops talking inside a transaction (cut off while it holds
the lock) has it ended by the server after 4 s. Settings in the URL's `options` come after these,
so an operator's own win."""
KEEPALIVES: Final[dict[str, Any]] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 3,
    "tcp_user_timeout": 8000,
}
"""libpq's TCP settings: a silent peer is probed after 5 s idle and given up after three missed
probes; data unacknowledged for 8 s ends the connection (Linux). Unix sockets ignore them."""
TRANSACTION_BOUND: Final = 8.0
"""Seconds a transaction may take before the watchdog cuts its connection: a paused server answers
nothing, and none of the timeouts above can fire in it. With `CONNECT_TIMEOUT`, every request is
answered within 10 s."""

OUTAGE_STATES: Final = (
    ("57014", "a statement ran past its statement_timeout (5 s)", False),
    ("55P03", "the write lock was held past lock_timeout (4 s) by another replica", False),
    ("25P03", "the server ended a transaction left idle past 4 s", True),
    ("25006", "the database takes no writes (a standby, or read-only)", False),
    ("53100", "the database's disk is full", False),
    ("53300", "the database has no connection to spare", False),
    ("53", "the database is out of resources", False),
    ("57P", "the database is shutting down, restarting or starting", True),
    ("58", "the database's disk failed", False),
    ("08", "the connection to the database failed", True),
)
"""SQLSTATE codes (or their classes, by prefix) that are outages, and whether each means the
database does not answer at all."""

OUTBOX_SCHEMA = """
CREATE TABLE outbox (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    event_id TEXT NOT NULL,
    event_key TEXT NOT NULL,
    event TEXT NOT NULL,
    proposal_id TEXT NOT NULL,
    target TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    body BYTEA NOT NULL,
    state TEXT NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
    attempts INTEGER NOT NULL,
    next_attempt_at DOUBLE PRECISION NOT NULL,
    give_up_at DOUBLE PRECISION NOT NULL,
    leased_until DOUBLE PRECISION,
    last_error TEXT,
    finished_at DOUBLE PRECISION,
    UNIQUE (event_key, target)
);
CREATE INDEX outbox_due ON outbox (state, next_attempt_at);
"""
"""Notifications waiting to be sent, one row per event and target (version 4: migration 4)."""

TRAIL_LOG_SCHEMA = """
CREATE TABLE trail_log (
    leaf_index BIGINT PRIMARY KEY,
    seq BIGINT NOT NULL,
    leaf TEXT NOT NULL,
    hashes BYTEA NOT NULL
);
CREATE TRIGGER trail_log_append_only BEFORE UPDATE OR DELETE ON trail_log
    FOR EACH ROW EXECUTE FUNCTION reviewer_append_only();
"""
"""The trail's Merkle log (`reviewer.service.store.trail`), append-only (version 8: migration step 8)."""
REFUSALS_SCHEMA = """
CREATE TABLE refusals (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    proposal_id TEXT NOT NULL REFERENCES proposals (proposal_id),
    revision BIGINT NOT NULL,
    plan_sha256 TEXT NOT NULL,
    kind TEXT NOT NULL,
    message TEXT NOT NULL,
    refused_by TEXT NOT NULL,
    refused_at DOUBLE PRECISION NOT NULL
);
CREATE INDEX refusals_proposal ON refusals (proposal_id, revision);
CREATE TRIGGER refusals_append_only BEFORE UPDATE OR DELETE ON refusals
    FOR EACH ROW EXECUTE FUNCTION reviewer_append_only();
"""
"""Executors' refusals of approvals, append-only (version 9: migration step 9), as
`store.sqlite.REFUSALS_SCHEMA` says."""
QUEUE_CLOCK_SCHEMA = """
CREATE TABLE IF NOT EXISTS queue_clock (at DOUBLE PRECISION NOT NULL);
INSERT INTO queue_clock (at) SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM queue_clock);
"""
"""The latest time the queue used, as `store.sqlite.QUEUE_CLOCK_SCHEMA` says (version 9)."""
PASSKEYS_SCHEMA = """
CREATE TABLE passkeys (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    credential_id TEXT NOT NULL UNIQUE,
    token_id BIGINT NOT NULL REFERENCES tokens (id),
    public_key TEXT NOT NULL,
    sign_count BIGINT NOT NULL,
    rp_id TEXT NOT NULL,
    origin TEXT NOT NULL,
    label TEXT NOT NULL,
    added_at DOUBLE PRECISION NOT NULL,
    removed_at DOUBLE PRECISION
);
CREATE INDEX passkeys_token ON passkeys (token_id);
CREATE TABLE passkey_links (
    link_sha256 TEXT PRIMARY KEY,
    token_id BIGINT NOT NULL REFERENCES tokens (id),
    challenge TEXT,
    created_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION NOT NULL,
    used_at DOUBLE PRECISION
);
CREATE TABLE IF NOT EXISTS review_link_key (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    secret TEXT NOT NULL
);
"""
"""Reviewers' passkeys and their enrolment links (version 10), as `store.sqlite.PASSKEYS_SCHEMA` says."""
TOKEN_ROLES: Final = ", ".join(f"'{role}'" for role in ROLES)

SCHEMA = (
    """
CREATE TABLE tokens (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    role TEXT NOT NULL CONSTRAINT tokens_role_check CHECK (role IN ("""
    + TOKEN_ROLES
    + """)),
    token_sha256 TEXT NOT NULL UNIQUE,
    created_at DOUBLE PRECISION NOT NULL,
    revoked_at DOUBLE PRECISION,
    expires_at DOUBLE PRECISION,
    previous_sha256 TEXT UNIQUE,
    previous_expires_at DOUBLE PRECISION
);
CREATE UNIQUE INDEX tokens_active_name ON tokens (lower(name)) WHERE revoked_at IS NULL;

CREATE TABLE proposals (
    proposal_id TEXT PRIMARY KEY,
    owner TEXT NOT NULL,
    latest_revision BIGINT NOT NULL,
    latest_seq BIGINT NOT NULL,
    plan_sha256 TEXT NOT NULL,
    title TEXT NOT NULL,
    agent_name TEXT NOT NULL,
    call_count BIGINT NOT NULL,
    submitted_at DOUBLE PRECISION NOT NULL,
    pending_expires_at DOUBLE PRECISION NOT NULL,
    decision TEXT,
    decided_by TEXT,
    decided_at DOUBLE PRECISION,
    reason TEXT,
    decision_id BIGINT,
    approval_expires_at DOUBLE PRECISION,
    claim_id TEXT,
    claimed_by TEXT,
    claimed_at DOUBLE PRECISION,
    lease_expires_at DOUBLE PRECISION,
    executed_at DOUBLE PRECISION,
    deadline DOUBLE PRECISION
);
CREATE INDEX proposals_latest_seq ON proposals (latest_seq);
CREATE INDEX proposals_deadline ON proposals (deadline);

CREATE TABLE revisions (
    proposal_id TEXT NOT NULL REFERENCES proposals (proposal_id),
    revision BIGINT NOT NULL,
    plan_sha256 TEXT NOT NULL,
    title TEXT NOT NULL,
    call_count BIGINT NOT NULL,
    submitted_by TEXT NOT NULL,
    submitted_at DOUBLE PRECISION NOT NULL,
    body BYTEA NOT NULL,
    PRIMARY KEY (proposal_id, revision)
);

CREATE TABLE decisions (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    proposal_id TEXT NOT NULL REFERENCES proposals (proposal_id),
    revision BIGINT NOT NULL,
    plan_sha256 TEXT NOT NULL,
    decision TEXT NOT NULL CONSTRAINT decisions_decision_check CHECK ("""
    + DECISION_CHECK
    + """),
    reason TEXT NOT NULL,
    decided_by TEXT NOT NULL,
    decided_at DOUBLE PRECISION NOT NULL,
    expires_at DOUBLE PRECISION,
    UNIQUE (proposal_id, revision)
);

CREATE TABLE claims (
    claim_id TEXT PRIMARY KEY,
    decision_id BIGINT NOT NULL UNIQUE REFERENCES decisions (id),
    proposal_id TEXT NOT NULL,
    revision BIGINT NOT NULL,
    plan_sha256 TEXT NOT NULL,
    claimed_by TEXT NOT NULL,
    claimed_at DOUBLE PRECISION NOT NULL,
    lease_expires_at DOUBLE PRECISION NOT NULL
);

CREATE TABLE executions (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    decision_id BIGINT NOT NULL UNIQUE REFERENCES decisions (id),
    claim_id TEXT NOT NULL UNIQUE REFERENCES claims (claim_id),
    proposal_id TEXT NOT NULL,
    revision BIGINT NOT NULL,
    reported_by TEXT NOT NULL,
    reported_at DOUBLE PRECISION NOT NULL,
    ended TEXT,
    body BYTEA NOT NULL
);

CREATE TABLE idempotency (
    token_id BIGINT NOT NULL,
    key TEXT NOT NULL,
    request_sha256 TEXT NOT NULL,
    answer TEXT NOT NULL,
    created_at DOUBLE PRECISION NOT NULL,
    PRIMARY KEY (token_id, key)
);

CREATE TABLE trail (
    seq BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    at DOUBLE PRECISION NOT NULL,
    actor TEXT NOT NULL,
    event TEXT NOT NULL CONSTRAINT trail_event_check CHECK ("""
    + TRAIL_EVENT_CHECK
    + """),
    proposal_id TEXT,
    revision BIGINT,
    plan_sha256 TEXT,
    reason TEXT,
    statement TEXT,
    signature TEXT,
    key_fingerprint TEXT
);
CREATE INDEX trail_proposal ON trail (proposal_id, seq);

-- Reviewers' SSH keys; a key is active under one name at a time.
CREATE TABLE ssh_keys (
    id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    name TEXT NOT NULL,
    public_key TEXT NOT NULL,
    fingerprint TEXT NOT NULL,
    comment TEXT NOT NULL,
    added_at DOUBLE PRECISION NOT NULL,
    removed_at DOUBLE PRECISION
);
CREATE UNIQUE INDEX ssh_keys_active ON ssh_keys (fingerprint) WHERE removed_at IS NULL;

CREATE FUNCTION reviewer_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is append-only', TG_TABLE_NAME;
END;
$$;
CREATE TRIGGER revisions_append_only BEFORE UPDATE OR DELETE ON revisions
    FOR EACH ROW EXECUTE FUNCTION reviewer_append_only();
CREATE TRIGGER decisions_append_only BEFORE UPDATE OR DELETE ON decisions
    FOR EACH ROW EXECUTE FUNCTION reviewer_append_only();
CREATE TRIGGER claims_append_only BEFORE UPDATE OR DELETE ON claims
    FOR EACH ROW EXECUTE FUNCTION reviewer_append_only();
CREATE TRIGGER executions_append_only BEFORE UPDATE OR DELETE ON executions
    FOR EACH ROW EXECUTE FUNCTION reviewer_append_only();
CREATE TRIGGER trail_append_only BEFORE UPDATE OR DELETE ON trail
    FOR EACH ROW EXECUTE FUNCTION reviewer_append_only();

CREATE TABLE reviewer_schema (version INTEGER NOT NULL);
"""
    + OUTBOX_SCHEMA
    + TRAIL_LOG_SCHEMA
    + REFUSALS_SCHEMA
    + QUEUE_CLOCK_SCHEMA
    + PASSKEYS_SCHEMA
)

IDENTITY_COLUMNS: Final = """
ALTER TABLE tokens ADD COLUMN kind TEXT NOT NULL DEFAULT 'minted';
ALTER TABLE tokens ADD COLUMN issuer TEXT;
ALTER TABLE tokens ADD COLUMN subject TEXT;
ALTER TABLE tokens ADD COLUMN session_ends_at DOUBLE PRECISION;
CREATE INDEX tokens_subject ON tokens (issuer, subject);
ALTER TABLE trail ADD COLUMN identity TEXT;
"""
"""Version 7, as `store.sqlite.IDENTITY_COLUMNS` says; a new database gets the same columns."""
SCHEMA += IDENTITY_COLUMNS
READING_COLUMN: Final = "ALTER TABLE proposals ADD COLUMN summary TEXT;\n"
"""Version 10, as `store.sqlite.READING_COLUMN` says; a new database gets the same column."""
SCHEMA += READING_COLUMN

MIGRATIONS: Final = {
    4: OUTBOX_SCHEMA,
    5: """
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check CHECK (role IN ('agent', 'reviewer', 'metrics'));
ALTER TABLE tokens ADD COLUMN expires_at DOUBLE PRECISION;
ALTER TABLE tokens ADD COLUMN previous_sha256 TEXT UNIQUE;
ALTER TABLE tokens ADD COLUMN previous_expires_at DOUBLE PRECISION;
""",
    6: f"""
ALTER TABLE decisions DROP CONSTRAINT decisions_decision_check;
ALTER TABLE decisions ADD CONSTRAINT decisions_decision_check CHECK ({DECISION_CHECK});
ALTER TABLE trail DROP CONSTRAINT trail_event_check;
ALTER TABLE trail ADD CONSTRAINT trail_event_check CHECK ({TRAIL_EVENT_CHECK});
""",
    7: IDENTITY_COLUMNS,
    8: f"""
ALTER TABLE tokens DROP CONSTRAINT tokens_role_check;
ALTER TABLE tokens ADD CONSTRAINT tokens_role_check CHECK (role IN ({TOKEN_ROLES}));
"""
    + TRAIL_LOG_SCHEMA,
    9: REFUSALS_SCHEMA + QUEUE_CLOCK_SCHEMA,
    10: PASSKEYS_SCHEMA,
    11: f"""
ALTER TABLE trail DROP CONSTRAINT trail_event_check;
ALTER TABLE trail ADD CONSTRAINT trail_event_check CHECK ({TRAIL_EVENT_CHECK});
ALTER TABLE trail ALTER COLUMN proposal_id DROP NOT NULL, ALTER COLUMN revision DROP NOT NULL,
    ALTER COLUMN plan_sha256 DROP NOT NULL;
""",
    12: READING_COLUMN,
}
"""Each numbered step of `reviewer.service.store.migrations.STEPS` in PostgreSQL's words."""
OLDEST_VERSION: Final = 3
"""The first schema a PostgreSQL queue had."""

_NAMED = re.compile(r"(?<![:\w]):([A-Za-z_]\w*)")


@cache
def _psycopg_sql(sql: str) -> str:
    """`:name` parameters (the form sqlite3 reads) as psycopg's `%(name)s`."""
    return _NAMED.sub(r"%(\1)s", sql.replace("%", "%%"))


def describe(url: str) -> str:
    """`host:port/dbname` of a URL, never its password: for messages and logs."""
    try:
        parts = conninfo_to_dict(url)
    except psycopg.ProgrammingError:
        return "a PostgreSQL URL that cannot be read"
    return f"{parts.get('host', 'localhost')}:{parts.get('port', 5432)}/{parts.get('dbname', '')}"


class _PostgresTransaction:
    def __init__(self, connection: psycopg.Connection[Row] | psycopg.Cursor[Row]) -> None:
        self.connection = connection  # a cursor executes the same way, and answers with itself
        self.changed: set[str] = set()

    # Each answer is named with its type: without the postgres extra installed, psycopg is unknown to
    # the type checker, and the core install is checked too.
    def one(self, sql: str, **params: Any) -> Row | None:
        row: Row | None = self.connection.execute(_psycopg_sql(sql), params).fetchone()
        return row

    def all(self, sql: str, **params: Any) -> list[Row]:
        rows: list[Row] = self.connection.execute(_psycopg_sql(sql), params).fetchall()
        return rows

    def run(self, sql: str, **params: Any) -> int:
        count: int = self.connection.execute(_psycopg_sql(sql), params).rowcount
        return count


class PostgresStore(QueueStore):
    """`QueueStore` on a PostgreSQL database named by a `postgresql://` URL; one connection per thread.

    `create=False` refuses a database without the queue's tables (a token command pointed at the
    wrong database must not create a queue there).
    """

    def __init__(
        self, url: str, settings: StoreSettings, *, create: bool = True, migrate: bool = True
    ) -> None:
        super().__init__(settings)
        self.url = url
        self.replica = secrets.token_hex(6)
        """Names this process in its `NOTIFY`s, so its listener skips what it announced itself."""
        self._threads: ThreadConnections[psycopg.Connection[Row]] = ThreadConnections()
        self._watchdog = Watchdog()
        self._migrate(create, migrate)
        self._start_clock()

    def _time_source(self, clock: Clock) -> Clock:
        """On the real clock, the database's: every replica reads the same one (`DatabaseTime`)."""
        return DatabaseTime(self._database_clock) if clock is time.time else clock

    def _database_clock(self) -> float:
        with self.single() as db:
            row = db.one("SELECT extract(epoch FROM clock_timestamp())::float8 AS now")
        assert row is not None
        return float(row["now"])

    @property
    def location(self) -> str:
        return "postgresql://" + describe(self.url)

    def schema_version(self) -> int:
        with self.single() as db:
            row = db.one("SELECT version FROM reviewer_schema")
        if row is None:
            raise DatabaseUnusable(f"{self.location} holds no schema version")
        return int(row["version"])

    def _migrate(self, create: bool, migrate: bool) -> None:
        """Create the schema on first start, or bring an older one up to date step by step, in one
        transaction under the write lock: two replicas starting together create or migrate it once
        (the second finds it done). A newer schema is refused, changing nothing."""
        with self.write() as db:
            present = db.one("SELECT to_regclass('reviewer_schema') IS NOT NULL AS present")
            assert present is not None
            if present["present"]:
                row = db.one("SELECT version FROM reviewer_schema")
                found = -1 if row is None else int(row["version"])
                upgrade = migrations.plan_upgrade(
                    self.location, found, oldest=OLDEST_VERSION, migrate=migrate
                )
                if upgrade is not None:
                    self._upgrade(db, upgrade)
            else:
                self._create(db, create)
        if self.upgraded_from is not None:
            migrations.log_upgraded(migrations.Upgrade(self.location, self.upgraded_from))

    def check_before_serving(self) -> None:
        """Nothing to read first: PostgreSQL checks its own pages (with checksums, where initdb
        turned them on) as it reads them, and refuses a damaged one with an error of its own."""

    def _upgrade(self, db: _PostgresTransaction, upgrade: migrations.Upgrade) -> None:
        migrations.log_upgrade(upgrade, None)
        connection = self._connection()

        def columns(table: str) -> set[str] | None:
            rows = db.all(
                "SELECT column_name FROM information_schema.columns WHERE table_schema = current_schema() "
                "AND table_name = :table",
                table=table,
            )
            return {row["column_name"] for row in rows} or None

        for step in upgrade.steps:
            migrations.check_before_step(self.location, upgrade.found, step, columns)
            connection.execute(MIGRATIONS[step])  # a parameterless script: one simple query
        db.run("UPDATE reviewer_schema SET version = :version", version=SCHEMA_VERSION)
        self.upgraded_from = upgrade.found

    def _create(self, db: _PostgresTransaction, create: bool) -> None:
        if not create:
            raise DatabaseUnusable(
                f"{self.location} holds no queue; check the URL, or start `reviewer serve --db URL` once "
                "to create the queue's tables"
            )
        taken = db.one("SELECT to_regclass('proposals') IS NOT NULL AS taken")
        assert taken is not None
        if taken["taken"]:
            raise DatabaseUnusable(
                f"{self.location} has a table named proposals that is not the queue's; use a database "
                "of its own for the queue"
            )
        self.created = True
        connection = self._connection()
        connection.execute(SCHEMA)  # psycopg sends a parameterless script as one simple query
        connection.execute("INSERT INTO reviewer_schema (version) VALUES (%s)", (SCHEMA_VERSION,))

    # connections and transactions

    def _connection(self) -> psycopg.Connection[Row]:
        connection = self._threads.current()
        if connection is None or connection.closed or connection.broken or _hung_up(connection):
            try:
                connection = psycopg.connect(
                    self.url,
                    autocommit=True,
                    row_factory=dict_row,
                    connect_timeout=CONNECT_TIMEOUT,
                    options=_options(self.url),
                    **KEEPALIVES,
                )
            except psycopg.OperationalError as error:
                # libpq's first line ends with the reason ("Connection refused"); later lines are hints
                first_line = (str(error).strip().splitlines() or ["no answer"])[0]
                reason = first_line.rsplit("failed: ", 1)[-1].strip()
                raise DatabaseUnusable(f"cannot reach PostgreSQL at {describe(self.url)}: {reason}") from None
            self._threads.keep(connection)
            self._threads.local.cursor = connection.cursor()
        return connection

    @contextmanager
    def _bounded(self, *, writing: bool) -> Iterator[psycopg.Connection[Row]]:
        """This thread's connection for one transaction, an outage in it answered as one, and the
        connection cut if the transaction outlasts `TRANSACTION_BOUND`."""
        bound = None

        def outage_of(error: BaseException) -> Outage | None:
            if bound is not None and bound.fired:
                where = f"PostgreSQL at {describe(self.url)}"
                return Outage(f"{where} did not answer within {TRANSACTION_BOUND:g} s", unreachable=True)
            return self._outage_of(error)

        with self.health.guarded(outage_of, writing=writing):
            connection = self._connection()
            with self._watchdog.bound(TRANSACTION_BOUND, partial(_cut, connection)) as bound:
                yield connection

    def _outage_of(self, error: BaseException) -> Outage | None:
        if isinstance(error, DatabaseUnusable):  # the connection could not be opened
            return Outage(error.message, unreachable=True)
        if not isinstance(error, psycopg.Error):
            return None
        where = f"PostgreSQL at {describe(self.url)}"
        state = error.sqlstate or ""
        for prefix, cause, unreachable in OUTAGE_STATES:
            if state.startswith(prefix):
                return Outage(f"{where}: {cause} ({state})", unreachable)
        if not state and isinstance(error, psycopg.OperationalError | psycopg.InterfaceError):
            return Outage(f"{where}: the connection broke", unreachable=True)
        return None

    @contextmanager
    def write(self) -> Iterator[_PostgresTransaction]:
        """A transaction holding the one write lock from before its first read, released at commit."""
        with self._bounded(writing=True) as connection, connection.transaction():
            connection.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))
            db = _PostgresTransaction(connection)
            yield db
            for proposal_id in sorted(db.changed):  # delivered at the commit, and only if it commits
                connection.execute("SELECT pg_notify(%s, %s)", (CHANGES, f"{self.replica} {proposal_id}"))
        self.announce(db.changed)

    ROW_LOCK = " FOR UPDATE SKIP LOCKED"
    PROBE_WRITE = "UPDATE reviewer_schema SET version = version"

    @contextmanager
    def outbox_write(self) -> Iterator[_PostgresTransaction]:
        """Outbox rows are claimed by row locks (`ROW_LOCK`), not the queue's one write lock: a
        replica sending notifications never holds up another's decisions."""
        with self._bounded(writing=True) as connection, connection.transaction():
            yield _PostgresTransaction(connection)

    @contextmanager
    def read(self) -> Iterator[_PostgresTransaction]:
        with self._bounded(writing=False) as connection, connection.transaction():
            connection.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield _PostgresTransaction(connection)

    @contextmanager
    def single(self) -> Iterator[_PostgresTransaction]:
        """Autocommit, so the statement is its own transaction; on the thread's one cursor, which
        costs the idle poll less than a new cursor for each statement."""
        with self._bounded(writing=False):
            yield _PostgresTransaction(self._threads.local.cursor)

    def close(self) -> None:
        self._threads.close()

    def hear_other_writers(self) -> Callable[[], None]:
        listener = ChangeListener(self, self.replica)
        listener.start()
        return listener.stop


class ChangeListener(threading.Thread):
    """`LISTEN`s on `CHANGES` on a connection of its own, and tells the store's `on_change` what
    other replicas changed. A connection lost is opened again every `LISTEN_RETRY` seconds; once it
    listens again, every waiting request is told that anything may have changed (a `NOTIFY` sent
    meanwhile reached nobody)."""

    def __init__(self, store: PostgresStore, replica: str) -> None:
        super().__init__(name="reviewer-changes", daemon=True)
        self.store = store
        self.own_prefix = f"{replica} "
        self.stopping = threading.Event()

    def run(self) -> None:
        while not self.stopping.is_set():
            try:
                with psycopg.connect(
                    self.store.url,
                    autocommit=True,
                    connect_timeout=CONNECT_TIMEOUT,
                    options=_options(self.store.url),
                    **KEEPALIVES,
                ) as connection:
                    connection.execute(f"LISTEN {CHANGES}")
                    self.tell(None)
                    while not self.stopping.is_set():
                        for note in connection.notifies(timeout=1.0):
                            if not note.payload.startswith(self.own_prefix):
                                self.tell(frozenset({note.payload.partition(" ")[2]}))
            except psycopg.Error:
                self.stopping.wait(LISTEN_RETRY)
            except Exception:  # a bug must not end the thread: the replica would hear no other again
                logging.getLogger(__name__).warning(
                    "listening for other replicas' changes failed", exc_info=True
                )
                self.stopping.wait(LISTEN_RETRY)

    def tell(self, changed: frozenset[str] | None) -> None:
        if self.store.on_change is not None:
            self.store.on_change(changed)

    def stop(self) -> None:
        self.stopping.set()


def _options(url: str) -> str:
    """libpq's `options`: `SESSION_SETTINGS`, then whatever the URL's own `options` set."""
    ours = " ".join(f"-c {name}={value}" for name, value in SESSION_SETTINGS.items())
    try:
        theirs = conninfo_to_dict(url).get("options") or ""
    except psycopg.ProgrammingError:
        theirs = ""
    return f"{ours} {theirs}".strip()


def _hung_up(connection: psycopg.Connection[Row]) -> bool:
    """Whether the server closed this idle connection: it has something to read (the server's
    goodbye, or the end of the stream), where an idle connection of ours has nothing."""
    try:
        descriptor = connection.pgconn.socket
    except psycopg.OperationalError:
        return True
    poller = select.poll()
    poller.register(descriptor, select.POLLIN)
    return bool(poller.poll(0))


def _cut(connection: psycopg.Connection[Row]) -> None:
    """Shut the connection's socket down under the thread waiting on it, which then fails at once
    (the connection is broken, and replaced at its next use)."""
    descriptor = connection.pgconn.socket
    with socket.socket(fileno=os.dup(descriptor)) as duplicate:
        duplicate.shutdown(socket.SHUT_RDWR)
