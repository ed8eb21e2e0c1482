"""The queue's storage: the `QueueStore` interface and its SQLite implementation.

Every rule that reads and then writes (revision numbering, 412 before 403 before 409, one
winner, a decider who is not the proposer, one execution per approval, idempotency) runs inside
one `BEGIN IMMEDIATE` transaction, so it holds across threads and processes alike and a refusal
never leaves a partial write. Acknowledged means on disk: WAL with `synchronous=FULL`.
Revisions, decisions, executions and the trail are append-only (triggers refuse UPDATE and
DELETE); `proposals` is the one mutable table, an index of each proposal's latest revision and its
state, rewritten in the same transaction as the history.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

import msgspec

from reviewer.api import (
    Claim,
    ClaimRequest,
    DecisionRequest,
    DecisionState,
    ExecutionHistory,
    ExecutionReport,
    ProposalPage,
    ProposalRecord,
    ProposalSummary,
    RevisionInfo,
    RevisionState,
    State,
    StoredExecution,
    SubmissionAnswer,
    TrailEvent,
)
from reviewer.policy import Policy, Rule
from reviewer.service.auth import Identity, Role, hashes_match
from reviewer.service.errors import (
    ClaimRefused,
    Conflict,
    ExecutionRefused,
    Forbidden,
    IdempotencyMismatch,
    NotFound,
    NotPending,
    StaleRevision,
)
from reviewer.service.signed_decisions import (
    CastDecision,
    VerifiedSignature,
    admit_decision,
    environment_of,
    outcome,
    with_votes,
)
from reviewer.signing import PublicKey

DEFAULT_CLAIM_LEASE = 3600.0
"""How long a claimed run may take before reviewers see its outcome as unknown (it stays claimed)."""

SCHEMA_VERSION = 3
"""Stored as SQLite's `user_version`; 2 added claims (DESIGN 9); 3 added reviewers' SSH keys and
signed decisions in the trail (DESIGN 11), and a version-2 database is brought up to it on open."""

Clock = Callable[[], float]
Answer = TypeVar("Answer", DecisionState, Claim)
"""Seconds since the epoch; injected so tests can move time instead of waiting."""


class SchemaMismatch(Exception):
    """The database was made by another version of the queue; the message says what to do."""


@dataclass(frozen=True)
class Submission:
    """A validated proposal revision, ready to store: its identity, digest and original bytes."""

    proposal_id: str
    revision: int
    plan_sha256: str
    title: str
    agent_name: str
    call_count: int
    body: bytes


@dataclass(frozen=True)
class TokenInfo:
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None


@dataclass(frozen=True)
class RegisteredKey:
    """An SSH public key a reviewer signs decisions with."""

    name: str
    public_key: str
    fingerprint: str
    comment: str
    added_at: datetime


@dataclass(frozen=True)
class ListVersion:
    """What the proposal list depends on: the last write and the next deadline to pass."""

    last_seq: int
    next_deadline: float | None


class QueueStore(Protocol):
    """The storage the routes need; a PostgreSQL store would implement the same methods."""

    def create_token(self, name: str, role: Role, token_sha256: str) -> None: ...
    def list_tokens(self) -> list[TokenInfo]: ...
    def revoke_token(self, name: str) -> bool: ...
    def resolve_token(self, token_sha256: str) -> Identity | None: ...
    def add_ssh_key(self, name: str, key: PublicKey, comment: str = "") -> None: ...
    def remove_ssh_key(self, name: str, fingerprint: str) -> bool: ...
    def list_ssh_keys(self, name: str | None = None) -> list[RegisteredKey]: ...
    def submit(self, identity: Identity, submission: Submission) -> tuple[bool, SubmissionAnswer]: ...
    def list_version(self) -> ListVersion: ...
    def list_proposals(self, state: State | None, before_seq: int | None, limit: int) -> ProposalPage: ...
    def get_record(self, identity: Identity, proposal_id: str) -> ProposalRecord: ...
    def get_revision_body(self, identity: Identity, proposal_id: str, revision: int) -> bytes: ...
    def decision_state(self, identity: Identity, proposal_id: str) -> DecisionState: ...
    def decide(
        self, identity: Identity, proposal_id: str, request: DecisionRequest, idempotency_key: str
    ) -> tuple[bool, DecisionState]: ...
    def claim(
        self, identity: Identity, proposal_id: str, request: ClaimRequest, idempotency_key: str
    ) -> tuple[bool, Claim]: ...
    def record_execution(
        self,
        identity: Identity,
        proposal_id: str,
        report: ExecutionReport,
        body: bytes,
        idempotency_key: str | None = None,
    ) -> tuple[bool, DecisionState]: ...
    def list_executions(self, identity: Identity, proposal_id: str) -> ExecutionHistory: ...
    def close(self) -> None: ...


def derive_state(
    decision: str | None,
    approval_expires_at: float | None,
    claimed_at: float | None,
    executed_at: float | None,
    pending_expires_at: float,
    now: float,
) -> State:
    """The state of a latest revision at `now`; also registered as the SQL function `reviewer_state`.

    A claim fixes the approval: a claimed revision neither expires nor turns back into approved,
    whatever the clock says, until its run's report makes it executed.
    """
    if executed_at is not None:
        return "executed"
    if claimed_at is not None:
        return "claimed"
    if decision == "reject":
        return "rejected"
    if decision == "approve":
        return "approved" if approval_expires_at is not None and now < approval_expires_at else "expired"
    return "pending" if now < pending_expires_at else "expired"


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
"""

SIGNING_SCHEMA = """
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
"""Reviewers' SSH keys. A key is active under one name at a time: one key that signed as two
reviewers would let one person meet a quorum of two."""

TRAIL_SIGNATURE_COLUMNS = ("statement", "signature", "key_fingerprint")
"""Signed decisions in `trail`; a version-2 database gains them on open (nullable, so no row changes)."""

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


def _timestamp(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def _required_timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


class SQLiteStore:
    """`QueueStore` on one SQLite file; one connection per thread, as sqlite3 requires."""

    def __init__(
        self,
        path: Path | str,
        *,
        clock: Clock,
        pending_ttl: float,
        approval_ttl: float,
        claim_lease: float = DEFAULT_CLAIM_LEASE,
        policy: Policy | None = None,
    ) -> None:
        self.path = Path(path)
        self.clock = clock
        self.pending_ttl = pending_ttl
        self.approval_ttl = approval_ttl
        self.claim_lease = claim_lease
        self._local = threading.local()
        self._connections: list[sqlite3.Connection] = []
        self._lock = threading.Lock()
        if not self.path.parent.exists():
            self.path.parent.mkdir(parents=True, mode=0o700)
        _create_private(self.path)
        self.policy = policy or Policy()
        self._environments: dict[tuple[str, int], str | None] = {}
        connection = self._connection()
        version = connection.execute("PRAGMA user_version").fetchone()[0]
        tables = connection.execute("SELECT count(*) FROM sqlite_master WHERE type = 'table'").fetchone()[0]
        if tables and version == 2:
            _add_missing_columns(connection, "trail", TRAIL_SIGNATURE_COLUMNS)
        elif tables and version != SCHEMA_VERSION:
            raise SchemaMismatch(
                f"{self.path} holds a queue of schema version {version}; this reviewer uses version "
                f"{SCHEMA_VERSION}. Serve it with the reviewer that made it, or start a new database"
            )
        connection.executescript(
            SCHEMA + SIGNING_SCHEMA + _append_only_triggers() + f"PRAGMA user_version = {SCHEMA_VERSION};"
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
            connection.create_function("reviewer_state", 6, derive_state, deterministic=True)
            self._local.connection = connection
            with self._lock:
                self._connections.append(connection)
        return connection

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        """A `BEGIN IMMEDIATE` transaction: the write lock is taken before the first read."""
        connection = self._connection()
        connection.execute("BEGIN IMMEDIATE")
        try:
            yield connection
        except BaseException:
            connection.execute("ROLLBACK")
            raise
        connection.execute("COMMIT")

    @contextmanager
    def _read(self) -> Iterator[sqlite3.Connection]:
        """A read transaction, so a record assembled from several tables is one snapshot."""
        connection = self._connection()
        connection.execute("BEGIN")
        try:
            yield connection
        finally:
            connection.execute("COMMIT")

    def close(self) -> None:
        with self._lock:
            for connection in self._connections:
                connection.close()
            self._connections.clear()
        self._local = threading.local()

    # tokens

    def create_token(self, name: str, role: Role, token_sha256: str) -> None:
        """Mint under `name`; a name keeps the role of its first token, revoked or not.

        Proposals are owned by name and a decider must not be the owner, so an agent's name that
        came back as a reviewer's could approve that agent's proposals.
        """
        with self._write() as db:
            earlier = db.execute("SELECT role FROM tokens WHERE name = ? AND role != ? LIMIT 1", (name, role))
            used = earlier.fetchone()
            if used is not None:
                article = "an" if used["role"] == "agent" else "a"
                raise Conflict(
                    f"the name {name!r} was used for {article} {used['role']} token, and a name keeps "
                    f"its role for life; choose another name for the {role} token"
                )
            if db.execute("SELECT 1 FROM tokens WHERE name = ? AND revoked_at IS NULL", (name,)).fetchone():
                raise Conflict(f"a token named {name!r} exists; revoke it first or choose another name")
            db.execute(
                "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES (?, ?, ?, ?)",
                (name, role, token_sha256, self.clock()),
            )

    def list_tokens(self) -> list[TokenInfo]:
        rows = self._connection().execute(
            "SELECT name, role, created_at, revoked_at FROM tokens ORDER BY name, created_at"
        )
        return [
            TokenInfo(
                row["name"],
                row["role"],
                _required_timestamp(row["created_at"]),
                _timestamp(row["revoked_at"]),
            )
            for row in rows
        ]

    def revoke_token(self, name: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "UPDATE tokens SET revoked_at = ? WHERE name = ? AND revoked_at IS NULL", (self.clock(), name)
            )
            return cursor.rowcount > 0

    def resolve_token(self, token_sha256: str) -> Identity | None:
        row = (
            self._connection()
            .execute(
                "SELECT id, name, role, token_sha256 FROM tokens "
                "WHERE token_sha256 = ? AND revoked_at IS NULL",
                (token_sha256,),
            )
            .fetchone()
        )
        if row is None or not hashes_match(row["token_sha256"], token_sha256):
            return None
        return Identity(row["id"], row["name"], row["role"])

    # reviewers' SSH keys

    def add_ssh_key(self, name: str, key: PublicKey, comment: str = "") -> None:
        """Register `key` for the reviewer `name`; refused for an agent's name or a key another holds."""
        with self._write() as db:
            role = db.execute("SELECT role FROM tokens WHERE name = ? LIMIT 1", (name,)).fetchone()
            if role is None or role["role"] != "reviewer":
                raise Conflict(f"{name!r} is not a reviewer's token name; keys sign reviewers' decisions")
            held = db.execute(
                "SELECT name FROM ssh_keys WHERE fingerprint = ? AND removed_at IS NULL", (key.fingerprint,)
            ).fetchone()
            if held is not None:
                whose = "this reviewer" if held["name"] == name else repr(held["name"])
                raise Conflict(f"the key {key.fingerprint} is already registered for {whose}")
            db.execute(
                "INSERT INTO ssh_keys (name, public_key, fingerprint, comment, added_at) "
                "VALUES (?, ?, ?, ?, ?)",
                (name, key.openssh(), key.fingerprint, comment, self.clock()),
            )

    def remove_ssh_key(self, name: str, fingerprint: str) -> bool:
        with self._write() as db:
            cursor = db.execute(
                "UPDATE ssh_keys SET removed_at = ? "
                "WHERE name = ? AND fingerprint = ? AND removed_at IS NULL",
                (self.clock(), name, fingerprint),
            )
            return cursor.rowcount > 0

    def list_ssh_keys(self, name: str | None = None) -> list[RegisteredKey]:
        rows = self._connection().execute(
            "SELECT name, public_key, fingerprint, comment, added_at FROM ssh_keys "
            "WHERE removed_at IS NULL AND (? IS NULL OR name = ?) ORDER BY name, added_at",
            (name, name),
        )
        return [
            RegisteredKey(
                row["name"],
                row["public_key"],
                row["fingerprint"],
                row["comment"],
                _required_timestamp(row["added_at"]),
            )
            for row in rows
        ]

    def _signing_keys(self, db: sqlite3.Connection, name: str) -> list[PublicKey]:
        rows = db.execute("SELECT public_key FROM ssh_keys WHERE name = ? AND removed_at IS NULL", (name,))
        return [PublicKey.from_openssh(row["public_key"]) for row in rows]

    # the policy and the decisions so far

    def _rule(self, db: sqlite3.Connection, proposal_id: str, revision: int) -> tuple[Rule, str | None]:
        """The policy's rule for this revision's target environment (read once per revision: it never
        changes, and a policy without environments needs no read at all)."""
        if not self.policy.environments:
            return self.policy.default, None
        key = (proposal_id, revision)
        if key not in self._environments:
            body = db.execute(
                "SELECT body FROM revisions WHERE proposal_id = ? AND revision = ?", key
            ).fetchone()["body"]
            self._environments[key] = environment_of(bytes(body))
        environment = self._environments[key]
        return self.policy.rule_for(environment), environment

    def _cast(self, db: sqlite3.Connection, proposal_id: str, revision: int) -> list[CastDecision]:
        rows = db.execute(
            "SELECT actor, event, reason, at, statement, signature, key_fingerprint FROM trail "
            "WHERE proposal_id = ? AND revision = ? AND event IN ('approved', 'rejected') ORDER BY seq",
            (proposal_id, revision),
        )
        return [
            CastDecision(
                reviewer=row["actor"],
                decision="reject" if row["event"] == "rejected" else "approve",
                reason=row["reason"],
                at=_required_timestamp(row["at"]),
                statement=row["statement"],
                signature=row["signature"],
                key_fingerprint=row["key_fingerprint"],
            )
            for row in rows
        ]

    def _voted_state(self, db: sqlite3.Connection, row: sqlite3.Row, now: float) -> DecisionState:
        """The decision state with the quorum so far and the signed decisions of the latest revision."""
        proposal_id, revision = row["proposal_id"], row["latest_revision"]
        rule, _environment = self._rule(db, proposal_id, revision)
        return with_votes(self._decision_state(row, now), rule, self._cast(db, proposal_id, revision))

    # proposals

    def _proposal_row(self, db: sqlite3.Connection, identity: Identity, proposal_id: str) -> sqlite3.Row:
        """The proposal if this identity may see it; another agent's proposal is as absent as a missing one.

        A reviewer sees every proposal; an agent only those it submitted (revision 1 fixes the owner).
        """
        row = db.execute("SELECT * FROM proposals WHERE proposal_id = ?", (proposal_id,)).fetchone()
        if row is None or (identity.role != "reviewer" and row["owner"] != identity.name):
            raise NotFound(f"no proposal {proposal_id!r}; check the id, or whether it was submitted by you")
        return row

    def _state(self, row: sqlite3.Row, now: float) -> State:
        return derive_state(
            row["decision"],
            row["approval_expires_at"],
            row["claimed_at"],
            row["executed_at"],
            row["pending_expires_at"],
            now,
        )

    def _decision_state(self, row: sqlite3.Row, now: float) -> DecisionState:
        state = self._state(row, now)
        if state in ("claimed", "executed"):
            expires_at = None  # the claim fixed the approval
        elif row["decision"] == "approve":
            expires_at = row["approval_expires_at"]
        elif row["decision"] is None:
            expires_at = row["pending_expires_at"]
        else:
            expires_at = None
        return DecisionState(
            proposal_id=row["proposal_id"],
            revision=row["latest_revision"],
            plan_sha256=row["plan_sha256"],
            state=state,
            decided_by=row["decided_by"],
            decided_at=_timestamp(row["decided_at"]),
            reason=row["reason"],
            expires_at=_timestamp(expires_at),
            claimed_by=row["claimed_by"],
            claimed_at=_timestamp(row["claimed_at"]),
            lease_expires_at=_timestamp(row["lease_expires_at"]),
            outcome_unknown=_outcome_unknown(row, state, now),
            executed_at=_timestamp(row["executed_at"]),
        )

    def submit(self, identity: Identity, submission: Submission) -> tuple[bool, SubmissionAnswer]:
        """Store a revision; answers (False, its record) when this very plan is already stored."""
        now = self.clock()
        with self._write() as db:
            row = db.execute(
                "SELECT * FROM proposals WHERE proposal_id = ?", (submission.proposal_id,)
            ).fetchone()
            if row is not None and row["owner"] != identity.name:
                raise Conflict(
                    f"proposal_id {submission.proposal_id!r} belongs to another agent; choose another id"
                )
            if row is not None and self._state(row, now) == "claimed" and now < row["lease_expires_at"]:
                raise ClaimRefused(
                    f"revision {row['latest_revision']} of {submission.proposal_id!r} is running under a "
                    f"claim by {row['claimed_by']}; submit a new revision once that run is reported",
                    state="claimed",
                    claimed_by=row["claimed_by"],
                )
            if row is not None:
                stored = db.execute(
                    "SELECT plan_sha256 FROM revisions WHERE proposal_id = ? AND revision = ?",
                    (submission.proposal_id, submission.revision),
                ).fetchone()
                if stored is not None and stored["plan_sha256"] == submission.plan_sha256:
                    latest = submission.revision == row["latest_revision"]
                    state: RevisionState = self._state(row, now) if latest else "superseded"
                    return False, SubmissionAnswer(
                        proposal_id=submission.proposal_id,
                        revision=submission.revision,
                        plan_sha256=submission.plan_sha256,
                        state=state,
                    )
            expected = 1 if row is None else row["latest_revision"] + 1
            if submission.revision != expected:
                stored_note = (
                    f" and revision {submission.revision} is stored with another plan"
                    if row is not None and submission.revision <= row["latest_revision"]
                    else ""
                )
                raise Conflict(
                    f"the next revision of {submission.proposal_id!r} is {expected}{stored_note}; "
                    f"re-plan as revision {expected}"
                )
            seq = self._append_trail(
                db,
                now,
                identity.name,
                "submitted",
                submission.proposal_id,
                submission.revision,
                submission.plan_sha256,
            )
            pending_expires_at = now + self.pending_ttl
            # One statement for the first revision and each re-plan: a re-plan keeps the owner and
            # clears the decision of the revision it supersedes.
            db.execute(
                "INSERT INTO proposals (proposal_id, owner, latest_revision, latest_seq, plan_sha256, "
                "title, agent_name, call_count, submitted_at, pending_expires_at, deadline) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
                "ON CONFLICT (proposal_id) DO UPDATE SET latest_revision = excluded.latest_revision, "
                "latest_seq = excluded.latest_seq, plan_sha256 = excluded.plan_sha256, "
                "title = excluded.title, agent_name = excluded.agent_name, "
                "call_count = excluded.call_count, submitted_at = excluded.submitted_at, "
                "pending_expires_at = excluded.pending_expires_at, decision = NULL, decided_by = NULL, "
                "decided_at = NULL, reason = NULL, decision_id = NULL, approval_expires_at = NULL, "
                "claim_id = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, "
                "executed_at = NULL, deadline = excluded.deadline",
                (
                    submission.proposal_id,
                    identity.name,
                    submission.revision,
                    seq,
                    submission.plan_sha256,
                    submission.title,
                    submission.agent_name,
                    submission.call_count,
                    now,
                    pending_expires_at,
                    pending_expires_at,
                ),
            )
            db.execute(
                "INSERT INTO revisions (proposal_id, revision, plan_sha256, title, call_count, submitted_by, "
                "submitted_at, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    submission.proposal_id,
                    submission.revision,
                    submission.plan_sha256,
                    submission.title,
                    submission.call_count,
                    identity.name,
                    now,
                    submission.body,
                ),
            )
        return True, SubmissionAnswer(
            proposal_id=submission.proposal_id,
            revision=submission.revision,
            plan_sha256=submission.plan_sha256,
            state="pending",
        )

    def _append_trail(
        self,
        db: sqlite3.Connection,
        now: float,
        actor: str,
        event: str,
        proposal_id: str,
        revision: int,
        plan_sha256: str,
        reason: str | None = None,
        signed: VerifiedSignature | None = None,
    ) -> int:
        cursor = db.execute(
            "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256, reason, "
            "statement, signature, key_fingerprint) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                now,
                actor,
                event,
                proposal_id,
                revision,
                plan_sha256,
                reason,
                signed.statement if signed else None,
                signed.signature if signed else None,
                signed.key_fingerprint if signed else None,
            ),
        )
        assert cursor.lastrowid is not None
        return cursor.lastrowid

    def list_version(self) -> ListVersion:
        """Two index lookups: enough for an ETag that changes on every write and every expiry."""
        db = self._connection()
        last_seq = db.execute("SELECT coalesce(max(seq), 0) FROM trail").fetchone()[0]
        next_deadline = db.execute(
            "SELECT min(deadline) FROM proposals WHERE deadline > ?", (self.clock(),)
        ).fetchone()[0]
        return ListVersion(last_seq, next_deadline)

    def list_proposals(self, state: State | None, before_seq: int | None, limit: int) -> ProposalPage:
        now = self.clock()
        rows = (
            self._connection()
            .execute(
                "SELECT * FROM proposals WHERE (? IS NULL OR latest_seq < ?) AND (? IS NULL OR "
                "reviewer_state(decision, approval_expires_at, claimed_at, executed_at, "
                "pending_expires_at, ?) = ?) "
                "ORDER BY latest_seq DESC LIMIT ?",
                (before_seq, before_seq, state, now, state, limit + 1),
            )
            .fetchall()
        )
        summaries = []
        for row in rows[:limit]:
            decision_state = self._decision_state(row, now)
            summaries.append(
                ProposalSummary(
                    proposal_id=row["proposal_id"],
                    revision=row["latest_revision"],
                    title=row["title"],
                    agent_name=row["agent_name"],
                    proposed_by=row["owner"],
                    plan_sha256=row["plan_sha256"],
                    call_count=row["call_count"],
                    submitted_at=_required_timestamp(row["submitted_at"]),
                    state=decision_state.state,
                    decided_by=decision_state.decided_by,
                    expires_at=decision_state.expires_at,
                    claimed_by=decision_state.claimed_by,
                    outcome_unknown=decision_state.outcome_unknown,
                )
            )
        next_cursor = str(rows[limit - 1]["latest_seq"]) if len(rows) > limit else None
        return ProposalPage(proposals=summaries, next_cursor=next_cursor)

    def get_record(self, identity: Identity, proposal_id: str) -> ProposalRecord:
        now = self.clock()
        with self._read() as db:
            row = self._proposal_row(db, identity, proposal_id)
            latest = self._voted_state(db, row, now)
            revisions = [
                RevisionInfo(
                    revision=revision["revision"],
                    plan_sha256=revision["plan_sha256"],
                    title=revision["title"],
                    call_count=revision["call_count"],
                    submitted_by=revision["submitted_by"],
                    submitted_at=_required_timestamp(revision["submitted_at"]),
                    state=latest.state if revision["revision"] == latest.revision else "superseded",
                )
                for revision in db.execute(
                    "SELECT revision, plan_sha256, title, call_count, submitted_by, submitted_at "
                    "FROM revisions WHERE proposal_id = ? ORDER BY revision",
                    (proposal_id,),
                )
            ]
            history = [
                TrailEvent(
                    seq=event["seq"],
                    at=_required_timestamp(event["at"]),
                    actor=event["actor"],
                    event=event["event"],
                    revision=event["revision"],
                    plan_sha256=event["plan_sha256"],
                    reason=event["reason"],
                    statement=event["statement"],
                    signature=event["signature"],
                )
                for event in db.execute(
                    "SELECT * FROM trail WHERE proposal_id = ? ORDER BY seq", (proposal_id,)
                )
            ]
        return ProposalRecord(
            proposal_id=proposal_id,
            proposed_by=row["owner"],
            latest=latest,
            revisions=revisions,
            history=history,
        )

    def get_revision_body(self, identity: Identity, proposal_id: str, revision: int) -> bytes:
        with self._read() as db:
            self._proposal_row(db, identity, proposal_id)
            row = db.execute(
                "SELECT body FROM revisions WHERE proposal_id = ? AND revision = ?", (proposal_id, revision)
            ).fetchone()
        if row is None:
            raise NotFound(f"proposal {proposal_id!r} has no revision {revision}")
        return bytes(row["body"])

    def decision_state(self, identity: Identity, proposal_id: str) -> DecisionState:
        with self._read() as db:
            row = self._proposal_row(db, identity, proposal_id)
            return self._voted_state(db, row, self.clock())

    def decide(
        self, identity: Identity, proposal_id: str, request: DecisionRequest, idempotency_key: str
    ) -> tuple[bool, DecisionState]:
        """Record a decision; answers (True, the first answer) for a retry of an earlier request.

        Refusals in order: 412 (not the latest revision), 403 (the decider's name owns the
        proposal: a name revoked as an agent and minted again as a reviewer), 409 (not pending).
        """
        fingerprint = _fingerprint(proposal_id, request)
        now = self.clock()
        with self._write() as db:
            row = self._proposal_row(db, identity, proposal_id)
            earlier = _earlier_answer(db, identity, idempotency_key, fingerprint, "decision", DecisionState)
            if earlier is not None:
                return True, earlier
            _require_latest(row, request.revision, request.plan_sha256)
            if row["owner"] == identity.name:
                raise Forbidden(
                    f"{identity.name!r} submitted {proposal_id!r}: you proposed this; another reviewer "
                    "must decide",
                )
            state = self._state(row, now)
            if state != "pending":
                who = f" by {row['decided_by']}" if row["decided_by"] else ""
                raise NotPending(
                    f"revision {row['latest_revision']} of {proposal_id!r} is already {state}{who}; "
                    "reload it before deciding",
                    state=state,
                    decided_by=row["decided_by"],
                )
            rule, environment = self._rule(db, proposal_id, request.revision)
            cast = self._cast(db, proposal_id, request.revision)
            signed = admit_decision(
                rule,
                cast,
                identity.name,
                proposal_id,
                request,
                self._signing_keys(db, identity.name),
                environment,
            )
            event = "approved" if request.decision == "approve" else "rejected"
            self._append_trail(
                db,
                now,
                identity.name,
                event,
                proposal_id,
                request.revision,
                request.plan_sha256,
                request.reason or None,
                signed,
            )
            cast.append(
                CastDecision(
                    identity.name,
                    request.decision,
                    request.reason or None,
                    _required_timestamp(now),
                    *((signed.statement, signed.signature, signed.key_fingerprint) if signed else ()),
                )
            )
            result = outcome(rule, cast)
            if result.state != "pending":
                decided_by = ", ".join(result.approvals) if result.state == "approved" else identity.name
                self._record_decision(db, row, request, decided_by, now)
            updated = db.execute("SELECT * FROM proposals WHERE proposal_id = ?", (proposal_id,)).fetchone()
            answer = with_votes(self._decision_state(updated, now), rule, cast)
            _remember_answer(db, identity, idempotency_key, fingerprint, answer, now)
        return False, answer

    def _record_decision(
        self, db: sqlite3.Connection, row: sqlite3.Row, request: DecisionRequest, decided_by: str, now: float
    ) -> None:
        """The revision's final decision (a quorum met, or a rejection), which an execution then uses."""
        approval_expires_at = now + self.approval_ttl if request.decision == "approve" else None
        cursor = db.execute(
            "INSERT INTO decisions (proposal_id, revision, plan_sha256, decision, reason, decided_by, "
            "decided_at, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                row["proposal_id"],
                request.revision,
                request.plan_sha256,
                request.decision,
                request.reason,
                decided_by,
                now,
                approval_expires_at,
            ),
        )
        db.execute(
            "UPDATE proposals SET decision = ?, decided_by = ?, decided_at = ?, reason = ?, "
            "decision_id = ?, approval_expires_at = ?, deadline = ? WHERE proposal_id = ?",
            (
                request.decision,
                decided_by,
                now,
                request.reason or None,
                cursor.lastrowid,
                approval_expires_at,
                approval_expires_at,
                row["proposal_id"],
            ),
        )

    def claim(
        self, identity: Identity, proposal_id: str, request: ClaimRequest, idempotency_key: str
    ) -> tuple[bool, Claim]:
        """Take the approval for one run; answers (True, the first answer) for a retry of the same claim.

        Refusals in order: 404 (not this agent's proposal), 412 (not the latest revision and digest),
        409 (not approved now: pending, decided otherwise, expired, or already claimed, naming who holds it).
        """
        fingerprint = _fingerprint(proposal_id, request)
        now = self.clock()
        with self._write() as db:
            row = self._proposal_row(db, identity, proposal_id)
            earlier = _earlier_answer(db, identity, idempotency_key, fingerprint, "claim", Claim)
            if earlier is not None:
                return True, earlier
            _require_latest(row, request.revision, request.plan_sha256)
            state = self._state(row, now)
            if state != "approved":
                raise ClaimRefused(
                    f"revision {row['latest_revision']} of {proposal_id!r} cannot be claimed: "
                    + _why_not_claimable(row, state),
                    state=state,
                    decided_by=row["decided_by"],
                    claimed_by=row["claimed_by"],
                )
            claim = Claim(
                claim_id=uuid.uuid4().hex,
                proposal_id=proposal_id,
                revision=request.revision,
                plan_sha256=request.plan_sha256,
                claimed_by=identity.name,
                claimed_at=_required_timestamp(now),
                lease_expires_at=_required_timestamp(now + self.claim_lease),
            )
            db.execute(
                "INSERT INTO claims (claim_id, decision_id, proposal_id, revision, plan_sha256, claimed_by, "
                "claimed_at, lease_expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim.claim_id,
                    row["decision_id"],
                    proposal_id,
                    request.revision,
                    request.plan_sha256,
                    identity.name,
                    now,
                    now + self.claim_lease,
                ),
            )
            self._append_trail(
                db, now, identity.name, "claimed", proposal_id, request.revision, request.plan_sha256
            )
            db.execute(
                "UPDATE proposals SET claim_id = ?, claimed_by = ?, claimed_at = ?, lease_expires_at = ?, "
                "deadline = ? WHERE proposal_id = ?",
                (
                    claim.claim_id,
                    identity.name,
                    now,
                    now + self.claim_lease,
                    now + self.claim_lease,
                    proposal_id,
                ),
            )
            _remember_answer(db, identity, idempotency_key, fingerprint, claim, now)
        return False, claim

    def record_execution(
        self,
        identity: Identity,
        proposal_id: str,
        report: ExecutionReport,
        body: bytes,
        idempotency_key: str | None = None,
    ) -> tuple[bool, DecisionState]:
        """Store the real run under its claim; answers (True, the first answer) for a retry under its key.

        The report belongs to the claim, not to whatever the proposal became meanwhile: it is stored
        after the lease ran out, or after a newer revision arrived, so a run that wrote is never lost.
        """
        fingerprint = "" if idempotency_key is None else _fingerprint(proposal_id, report)
        now = self.clock()
        with self._write() as db:
            self._proposal_row(db, identity, proposal_id)
            if idempotency_key is not None:
                earlier = _earlier_answer(
                    db, identity, idempotency_key, fingerprint, "execution report", DecisionState
                )
                if earlier is not None:
                    return True, earlier
            claim = _claim_for_report(db, identity, proposal_id, report)
            db.execute(
                "INSERT INTO executions (decision_id, claim_id, proposal_id, revision, reported_by, "
                "reported_at, ended, body) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    claim["decision_id"],
                    claim["claim_id"],
                    proposal_id,
                    claim["revision"],
                    identity.name,
                    now,
                    report.ended,
                    body,
                ),
            )
            self._append_trail(
                db,
                now,
                identity.name,
                "executed",
                proposal_id,
                claim["revision"],
                claim["plan_sha256"],
                report.ended,
            )
            # Only the revision this claim holds turns executed; a newer one keeps its own state.
            db.execute(
                "UPDATE proposals SET executed_at = ?, deadline = NULL "
                "WHERE proposal_id = ? AND claim_id = ?",
                (now, proposal_id, claim["claim_id"]),
            )
            updated = db.execute("SELECT * FROM proposals WHERE proposal_id = ?", (proposal_id,)).fetchone()
            answer = self._voted_state(db, updated, now)
            if idempotency_key is not None:
                _remember_answer(db, identity, idempotency_key, fingerprint, answer, now)
        return False, answer

    def list_executions(self, identity: Identity, proposal_id: str) -> ExecutionHistory:
        """The execution reports stored for a proposal, oldest first, each as the agent sent it."""
        with self._read() as db:
            self._proposal_row(db, identity, proposal_id)
            rows = db.execute(
                "SELECT reported_by, reported_at, claim_id, body FROM executions WHERE proposal_id = ? "
                "ORDER BY id",
                (proposal_id,),
            ).fetchall()
        executions = []
        for row in rows:
            report = ExecutionReport.model_validate_json(row["body"])
            executions.append(
                StoredExecution(
                    revision=report.revision,
                    plan_sha256=report.plan_sha256,
                    executed_by=row["reported_by"],
                    at=_required_timestamp(row["reported_at"]),
                    claim_id=row["claim_id"],
                    ended=report.ended,
                    calls=report.calls,
                    audit_log=report.audit_log,
                    note=report.note,
                )
            )
        return ExecutionHistory(proposal_id=proposal_id, executions=executions)

    # for tests and operators

    def integrity_check(self) -> str:
        return str(self._connection().execute("PRAGMA integrity_check").fetchone()[0])


def _add_missing_columns(db: sqlite3.Connection, table: str, columns: tuple[str, ...]) -> None:
    """Bring a database made by an earlier version up to date: new nullable TEXT columns only."""
    present = {row["name"] for row in db.execute(f"PRAGMA table_info({table})")}
    for column in columns:
        if column not in present:
            db.execute(f"ALTER TABLE {table} ADD COLUMN {column} TEXT")


def _outcome_unknown(row: sqlite3.Row, state: State, now: float) -> bool | None:
    """True for a claim whose run has not reported by the end of its lease: it may have written."""
    if state != "claimed":
        return None
    return bool(now >= row["lease_expires_at"])


def _why_not_claimable(row: sqlite3.Row, state: State) -> str:
    if state == "claimed":
        return (
            f"a run by {row['claimed_by']} already holds its approval (claimed at "
            f"{_required_timestamp(row['claimed_at']).isoformat()}); an approval authorizes one run"
        )
    return {
        "pending": "no reviewer has approved it yet",
        "rejected": f"{row['decided_by']} rejected it",
        "expired": "its approval expired before a run claimed it; submit it again for a new decision",
        "executed": "its approval was already used by a run; an approval authorizes one",
    }[state]


def _claim_for_report(
    db: sqlite3.Connection, identity: Identity, proposal_id: str, report: ExecutionReport
) -> sqlite3.Row:
    """The claim a report belongs to; 409 without one (or with one already reported), 412 if it names
    another revision or digest than its claim."""
    if report.claim_id is None:
        raise ExecutionRefused(
            f"a report of {proposal_id!r} must name its claim (claim_id): claim the approval "
            "(POST /v1/proposals/{id}/claims) before the first real write"
        )
    claim = db.execute(
        "SELECT * FROM claims WHERE claim_id = ? AND proposal_id = ? AND claimed_by = ?",
        (report.claim_id, proposal_id, identity.name),
    ).fetchone()
    if claim is None:
        raise ExecutionRefused(
            f"no claim {report.claim_id} of {proposal_id!r} is yours; claim before running"
        )
    if db.execute("SELECT 1 FROM executions WHERE claim_id = ?", (report.claim_id,)).fetchone():
        raise ExecutionRefused(
            f"the run of claim {report.claim_id} was already reported; a claim has one report",
            state="executed",
        )
    if report.revision != claim["revision"] or report.plan_sha256 != claim["plan_sha256"]:
        raise StaleRevision(
            f"the report names revision {report.revision}, but its claim is for revision "
            f"{claim['revision']} with plan_sha256 {claim['plan_sha256']}",
            latest_revision=claim["revision"],
            latest_plan_sha256=claim["plan_sha256"],
        )
    return claim


def _require_latest(row: sqlite3.Row, revision: int, plan_sha256: str) -> None:
    """412 unless the request names the latest revision and its digest; checked before any state."""
    if revision != row["latest_revision"] or plan_sha256 != row["plan_sha256"]:
        what = "revision" if revision != row["latest_revision"] else "plan_sha256"
        raise StaleRevision(
            f"the {what} named is not the latest: {row['proposal_id']!r} is at revision "
            f"{row['latest_revision']} with plan_sha256 {row['plan_sha256']}; review that revision first",
            latest_revision=row["latest_revision"],
            latest_plan_sha256=row["plan_sha256"],
        )


def _fingerprint(proposal_id: str, request: DecisionRequest | ClaimRequest | ExecutionReport) -> str:
    """What makes two requests "the same body" for an Idempotency-Key: equal fields, in any key order.

    msgspec writes the sorted JSON: a 64 MB execution report takes a fraction of what `json.dumps` takes.
    """
    material: dict[str, Any] = {"proposal_id": proposal_id, **request.model_dump()}
    return hashlib.sha256(msgspec.json.encode(material, order="sorted")).hexdigest()


def _earlier_answer(
    db: sqlite3.Connection,
    identity: Identity,
    idempotency_key: str,
    fingerprint: str,
    what: str,
    answer_model: type[Answer],
) -> Answer | None:
    """The answer already given under this token's key, if any; 422 if the key came with another body."""
    earlier = db.execute(
        "SELECT request_sha256, answer FROM idempotency WHERE token_id = ? AND key = ?",
        (identity.token_id, idempotency_key),
    ).fetchone()
    if earlier is None:
        return None
    if earlier["request_sha256"] != fingerprint:
        raise IdempotencyMismatch(
            f"this Idempotency-Key was used for a different {what}; use a new key for each new {what}"
        )
    return answer_model.model_validate_json(earlier["answer"])


def _remember_answer(
    db: sqlite3.Connection,
    identity: Identity,
    idempotency_key: str,
    fingerprint: str,
    answer: DecisionState | Claim,
    now: float,
) -> None:
    """Keep the answer under the key, in the transaction that made it, for a retry to get again."""
    db.execute(
        "INSERT INTO idempotency (token_id, key, request_sha256, answer, created_at) VALUES (?, ?, ?, ?, ?)",
        (identity.token_id, idempotency_key, fingerprint, answer.model_dump_json(), now),
    )
