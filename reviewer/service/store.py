"""The queue's storage: the queue API's operations as transactions, on any SQL database.

`QueueStore` holds the operations once: each read-then-write runs in one serialized write
transaction (the backend's `write()`), reads the rows it needs, asks `reviewer.service.rules`
what the rules allow, and writes that, so a refusal never leaves a partial write and the rules
hold across threads, processes and replicas alike. The SQL is written once with `:name`
parameters in the subset SQLite and PostgreSQL share; a backend (`SQLiteStore`,
`PostgresStore`) brings only its connections, its transactions and its schema.

Revisions, decisions, executions and the trail are append-only (the backends' triggers refuse
UPDATE and DELETE); `proposals` is the one mutable table, an index of each proposal's latest
revision and its state, rewritten in the same transaction as the history.
"""

from __future__ import annotations

import hashlib
import threading
import uuid
from abc import ABC, abstractmethod
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, Final, Protocol

import msgspec

from reviewer.plan.proposal import Proposal, scan_proposal
from reviewer.policy.bounded import PolicyEvaluator
from reviewer.policy.file import Policy
from reviewer.policy.quorum import Requirement, person
from reviewer.policy.verdict import Verdict, evaluate
from reviewer.queue.messages import (
    Claim,
    ClaimRequest,
    Decision,
    DecisionRequest,
    DecisionState,
    ExecutionReport,
    ProposalPage,
    ProposalRecord,
    ProposalSummary,
    RevisionInfo,
    State,
    SubmissionAnswer,
    TrailEvent,
)
from reviewer.service import events, rules
from reviewer.service.auth import Identity, Role, hashes_match
from reviewer.service.errors import Conflict, NotFound, Unauthorized
from reviewer.service.rules import Row
from reviewer.service.signed_decisions import (
    CastDecision,
    KeyRemoval,
    PolicySigning,
    VerifiedSignature,
    Withdrawal,
    admit_decision,
    outcome,
    policy_state,
    with_votes,
    without_removed_keys,
)
from reviewer.signing.sshsig import PublicKey

SCHEMA_VERSION: Final = 6
"""The version of the tables a database holds: 2 added claims, 3 reviewers' SSH keys and signed
decisions in the trail, 4 the notifications' outbox, 5 metrics tokens, token expiry and rotation. An older
database is brought up to date by numbered steps (`reviewer.service.migrations`), a newer one refused."""
TRAIL_EVENTS: Final[dict[Decision, str]] = {
    "approve": "approved",
    "reject": "rejected",
    "request_changes": "changes_requested",
}
"""The trail's word for each decision."""
DECISION_CHECK: Final = "decision IN ('approve', 'reject', 'request_changes')"
TRAIL_EVENT_CHECK: Final = (
    "event IN ('submitted', 'approved', 'rejected', 'changes_requested', 'claimed', 'executed')"
)
"""The CHECK constraints on `decisions.decision` and `trail.event`, the same in both backends' schemas."""

DEFAULT_PENDING_TTL: Final = 24 * 3600.0
"""A proposal nobody decided within a day is stale: the agent re-plans against today's state."""
DEFAULT_APPROVAL_TTL: Final = 3600.0
"""An approval is for running now, not next week: an hour to start the real run."""

DEFAULT_CLAIM_LEASE: Final = 3600.0
"""How long a claimed run may take before reviewers see its outcome as unknown (it stays claimed)."""

DEFAULT_GIVE_UP_AFTER: Final = 24 * 3600.0
"""A notification nobody could receive for a day is marked failed (and logged), no longer retried."""
DEFAULT_KEEP_DELIVERIES: Final = 7 * 24 * 3600.0
"""How long a delivered or failed notification stays in the outbox (for `notify list`): a week."""
DEFAULT_BACKLOG: Final = 1000
"""The most deliveries a target may have waiting; older ones are given up on (a receiver down for
long does not grow the outbox without end)."""

Clock = Callable[[], float]
"""Seconds since the epoch; injected so tests can move time instead of waiting."""


@dataclass(frozen=True)
class Notifying:
    """What the store writes to its outbox: one row per event and target, none without targets."""

    targets: tuple[str, ...] = ()
    """The targets' names (never their URLs, which may carry a chat service's secret)."""
    only: dict[str, frozenset[str]] = field(default_factory=dict)
    """Targets that get only some events (a pager: `run.unknown`), by name; the others get all."""
    remind_after: float | None = None
    give_up_after: float = DEFAULT_GIVE_UP_AFTER
    keep_deliveries: float = DEFAULT_KEEP_DELIVERIES
    """Seconds a finished delivery is kept; an event that time makes true (a reminder, an unknown
    outcome) is written only while it is younger than this, so a pruned one is never written again."""
    backlog: int = DEFAULT_BACKLOG


@dataclass(frozen=True)
class Delivery:
    """One event for one target in the outbox, and how its delivery went so far."""

    id: int
    event_id: str
    """Sent as `Reviewer-Delivery`: the same on every retry, so a receiver drops a duplicate."""
    event: str
    proposal_id: str
    target: str
    body: bytes
    state: str
    attempts: int
    created_at: float
    next_attempt_at: float
    give_up_at: float
    last_error: str | None
    finished_at: float | None


@dataclass(frozen=True)
class Submission:
    """A validated proposal revision, ready to store: its identity, digest and original bytes."""

    proposal_id: str
    revision: int
    plan_sha256: str
    title: str
    agent_name: str
    call_count: int
    body: bytes | bytearray
    proposal: Proposal | None = None
    """The parsed proposal, when the caller has it, for the policy to read without parsing again."""


@dataclass(frozen=True)
class TokenInfo:
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    previous_valid_until: datetime | None = None
    """After a rotation: until when the replaced token is still accepted."""


TOKEN_COLUMNS: Final = "tokens.id, tokens.name, tokens.role, tokens.token_sha256, tokens.previous_sha256"
"""What `_identity_of` reads of a token's row."""
TOKEN_VALID: Final = (
    "(tokens.token_sha256 = :token_sha256 OR (tokens.previous_sha256 = :token_sha256 "
    "AND tokens.previous_expires_at > :now)) AND tokens.revoked_at IS NULL "
    "AND (tokens.expires_at IS NULL OR tokens.expires_at > :now)"
)
"""The row of a token that authenticates at `:now`: its current secret, or the one a rotation
replaced within its grace period; not revoked, not expired."""


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


@dataclass(frozen=True)
class StoreSettings:
    """What every backend is opened with: the clock, how long each state lasts, the approval policy."""

    clock: Clock
    pending_ttl: float
    approval_ttl: float
    claim_lease: float = DEFAULT_CLAIM_LEASE
    policy: Policy | None = None


class Transaction(Protocol):
    """One open transaction: statements with `:name` parameters, rows readable by column name."""

    def one(self, sql: str, **params: Any) -> Row | None: ...
    def all(self, sql: str, **params: Any) -> list[Row]: ...
    def run(self, sql: str, **params: Any) -> int: ...


class QueueStore(ABC):
    """The storage the routes need; a backend supplies `write`, `read` and `close`."""

    def __init__(self, settings: StoreSettings) -> None:
        self.clock = settings.clock
        self.pending_ttl = settings.pending_ttl
        self.approval_ttl = settings.approval_ttl
        self.claim_lease = settings.claim_lease
        self.policy = settings.policy or Policy()
        self.policy_signing: PolicySigning | None = None
        """The queue's own key, to sign what the policy approves where signatures are required."""
        self.policy_evaluator: PolicyEvaluator | None = None
        """Set by `serve`: evaluates in worker processes under a deadline, so the event loop serves
        meanwhile; without it (tests, one-off commands) the policy is evaluated in this thread."""
        self._verdicts: dict[tuple[str, int], Verdict] = {}
        """Each revision's verdict under this policy, evaluated once: a revision never changes."""
        self.created = False
        """True when this store created the queue's tables (a new database), for `serve` to say so."""
        self.notifying = Notifying()
        """Set by `serve --notify`: without targets, no event is written."""
        self.on_event: Callable[[], None] | None = None
        """Called after a write that wrote an event committed: the delivery loop wakes at once."""
        self._emitted = threading.local()

    @abstractmethod
    def write(self) -> AbstractContextManager[Transaction]:
        """A transaction that holds the database's one write lock from before its first read."""

    @abstractmethod
    def read(self) -> AbstractContextManager[Transaction]:
        """A read-only transaction on one snapshot, so a record assembled from several tables agrees."""

    @abstractmethod
    def single(self) -> AbstractContextManager[Transaction]:
        """One statement outside an explicit transaction (a statement is its own snapshot): the idle
        poll's two look-ups, where BEGIN and COMMIT would cost more round trips than the query."""

    @abstractmethod
    def close(self) -> None: ...

    ROW_LOCK: str = ""
    """Appended to the outbox's claiming SELECT: PostgreSQL's `FOR UPDATE SKIP LOCKED`."""

    def outbox_write(self) -> AbstractContextManager[Transaction]:
        """A transaction that claims or updates outbox rows: on SQLite the one write lock (`BEGIN
        IMMEDIATE`); PostgreSQL locks the rows themselves and skips those another replica holds."""
        return self.write()

    @property
    @abstractmethod
    def location(self) -> str:
        """Where the queue lives, for the operator's log: a path, or a URL without its password."""

    upgraded_from: int | None = None
    """The schema version this store migrated the database from when it opened it, if it did."""

    @abstractmethod
    def schema_version(self) -> int:
        """The version of the tables the database holds now (a query: raises when it does not answer)."""

    # tokens

    def create_token(self, name: str, role: Role, token_sha256: str, expires_at: float | None = None) -> None:
        """Mint under `name` (see `rules.check_new_token` for the rules a name follows), valid until
        `expires_at` (seconds since the epoch) or for ever."""
        rules.check_token_name(name)
        with self.write() as db:
            earlier = [
                row
                for row in db.all("SELECT name, role, revoked_at FROM tokens")
                if person(row["name"]) == person(name)
            ]
            rules.check_new_token(name, role, earlier)
            db.run(
                "INSERT INTO tokens (name, role, token_sha256, created_at, expires_at) "
                "VALUES (:name, :role, :token_sha256, :now, :expires_at)",
                name=name,
                role=role,
                token_sha256=token_sha256,
                now=self.clock(),
                expires_at=expires_at,
            )

    def list_tokens(self) -> list[TokenInfo]:
        with self.read() as db:
            rows = db.all(
                "SELECT name, role, created_at, revoked_at, expires_at, previous_expires_at FROM tokens "
                "ORDER BY name, created_at"
            )
        return [
            TokenInfo(
                row["name"],
                row["role"],
                rules.required_timestamp(row["created_at"]),
                rules.timestamp(row["revoked_at"]),
                rules.timestamp(row["expires_at"]),
                rules.timestamp(row["previous_expires_at"]),
            )
            for row in rows
        ]

    def rotate_token(
        self, name: str, token_sha256: str, grace: float, expires_at: float | None = None
    ) -> bool:
        """Give the active token of `name` a new secret, keeping its identity (its idempotency keys,
        its claims); the replaced secret is accepted `grace` seconds more. False when `name` has none."""
        now = self.clock()
        with self.write() as db:
            rotated = db.run(
                "UPDATE tokens SET previous_sha256 = token_sha256, previous_expires_at = :until, "
                "token_sha256 = :token_sha256, expires_at = :expires_at "
                "WHERE lower(name) = lower(:name) AND revoked_at IS NULL",
                until=now + grace,
                token_sha256=token_sha256,
                expires_at=expires_at,
                name=name,
            )
        return rotated > 0

    def token_refusal(self, token_sha256: str) -> str | None:
        """Why a token that does not authenticate is refused, when it is ours and merely out of
        date (expired, or replaced by a rotation whose grace ended); None for unknown or revoked."""
        now = self.clock()
        with self.single() as db:
            row = db.one(
                "SELECT token_sha256, expires_at, previous_expires_at FROM tokens "
                "WHERE (token_sha256 = :token_sha256 OR previous_sha256 = :token_sha256) "
                "AND revoked_at IS NULL",
                token_sha256=token_sha256,
            )
        if row is None:
            return None
        if not hashes_match(row["token_sha256"], token_sha256):
            ended = rules.required_timestamp(row["previous_expires_at"])
            return (
                "this token was replaced by a rotation, and its grace period ended at "
                f"{ended:%Y-%m-%d %H:%M:%S} UTC"
            )
        return _expiry(row, now)

    def revoke_token(self, name: str) -> bool:
        """Revoke the active token of `name` (without regard to case); False when there is none."""
        with self.write() as db:
            revoked = db.run(
                "UPDATE tokens SET revoked_at = :now WHERE lower(name) = lower(:name) AND revoked_at IS NULL",
                now=self.clock(),
                name=name,
            )
        return revoked > 0

    def resolve_token(self, token_sha256: str) -> Identity | None:
        with self.single() as db:
            row = db.one(
                f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE {TOKEN_VALID}",
                token_sha256=token_sha256,
                now=self.clock(),
            )
        return _identity_of(row, token_sha256)

    def _require_active(self, db: Transaction, identity: Identity) -> None:
        """Read the caller's token again inside the write: a revocation or its expiry meanwhile
        refuses the write."""
        row = db.one(
            "SELECT revoked_at, expires_at FROM tokens WHERE id = :token_id", token_id=identity.token_id
        )
        rules.require_active_token(row)
        assert row is not None
        expired = _expiry(row, self.clock())
        if expired is not None:
            raise Unauthorized(f"{expired}; ask the queue's operator for one")

    # reviewers' SSH keys

    def add_ssh_key(self, name: str, key: PublicKey, comment: str = "") -> None:
        """Register `key` for the reviewer `name`; refused for an agent's name or a key another holds.

        A key is active under one name at a time: one key that signed as two reviewers would let
        one person meet a quorum of two.
        """
        with self.write() as db:
            role = db.one("SELECT role FROM tokens WHERE lower(name) = lower(:name) LIMIT 1", name=name)
            if role is None or role["role"] != "reviewer":
                raise Conflict(f"{name!r} is not a reviewer's token name; keys sign reviewers' decisions")
            held = db.one(
                "SELECT name FROM ssh_keys WHERE fingerprint = :fingerprint AND removed_at IS NULL",
                fingerprint=key.fingerprint,
            )
            if held is not None:
                whose = "this reviewer" if rules.same_name(held["name"], name) else repr(held["name"])
                raise Conflict(f"the key {key.fingerprint} is already registered for {whose}")
            db.run(
                "INSERT INTO ssh_keys (name, public_key, fingerprint, comment, added_at) "
                "VALUES (:name, :public_key, :fingerprint, :comment, :now)",
                name=name,
                public_key=key.openssh(),
                fingerprint=key.fingerprint,
                comment=comment,
                now=self.clock(),
            )

    def remove_ssh_key(self, name: str, fingerprint: str) -> bool:
        with self.write() as db:
            removed = db.run(
                "UPDATE ssh_keys SET removed_at = :now "
                "WHERE lower(name) = lower(:name) AND fingerprint = :fingerprint AND removed_at IS NULL",
                now=self.clock(),
                name=name,
                fingerprint=fingerprint,
            )
        return removed > 0

    def list_ssh_keys(self, name: str | None = None) -> list[RegisteredKey]:
        with self.read() as db:
            rows = db.all(
                "SELECT name, public_key, fingerprint, comment, added_at FROM ssh_keys "
                "WHERE removed_at IS NULL AND (CAST(:name AS TEXT) IS NULL OR lower(name) = lower(:name)) "
                "ORDER BY name, added_at",
                name=name,
            )
        return [
            RegisteredKey(
                row["name"],
                row["public_key"],
                row["fingerprint"],
                row["comment"],
                rules.required_timestamp(row["added_at"]),
            )
            for row in rows
        ]

    def _signing_keys(self, db: Transaction, name: str) -> list[PublicKey]:
        rows = db.all(
            "SELECT public_key FROM ssh_keys WHERE lower(name) = lower(:name) AND removed_at IS NULL",
            name=name,
        )
        return [PublicKey.from_openssh(row["public_key"]) for row in rows]

    # the policy and the decisions so far

    def _verdict(
        self, db: Transaction, proposal_id: str, revision: int, proposal: Proposal | None = None
    ) -> Verdict:
        """The policy's verdict on this revision (evaluated once per revision and per policy: a
        revision never changes, and a restart with another policy evaluates afresh)."""
        key = (proposal_id, revision)
        cached = self._verdicts.get(key)
        if cached is not None:
            return cached
        if self.policy.trivial:
            verdict = Verdict(None, self.policy.default.requirement, "human")
        else:
            row = db.one(
                "SELECT body FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
                proposal_id=proposal_id,
                revision=revision,
            )
            assert row is not None
            verdict = self._evaluate_policy(bytes(row["body"]), proposal)
        self._verdicts[key] = verdict
        return verdict

    def _evaluate_policy(self, body: bytes | bytearray, proposal: Proposal | None) -> Verdict:
        """The policy's verdict on the proposal whose JSON is `body` (parsed as `proposal`, if given)."""
        if self.policy_evaluator is not None:
            return self.policy_evaluator.verdict(bytes(body), proposal)
        if proposal is None:
            proposal = scan_proposal(bytes(body), "stored proposal")
        return evaluate(self.policy, proposal, signing=self.policy_signing is not None)

    def _rule(self, db: Transaction, proposal_id: str, revision: int) -> tuple[Requirement, str | None]:
        """What deciding this revision takes, and the environment it comes from."""
        verdict = self._verdict(db, proposal_id, revision)
        return verdict.requirement, verdict.environment

    def environment(self, db: Transaction, proposal_id: str, revision: int) -> str | None:
        """The policy environment of a revision's plan (None for `[default]`), for the metrics."""
        return self._verdict(db, proposal_id, revision).environment

    def _cast(self, db: Transaction, proposal_id: str, revision: int) -> list[CastDecision]:
        """The decisions on this revision that count (`_cast_and_withdrawn`)."""
        return self._cast_and_withdrawn(db, proposal_id, revision)[0]

    def _cast_and_withdrawn(
        self, db: Transaction, proposal_id: str, revision: int
    ) -> tuple[list[CastDecision], list[Withdrawal]]:
        """The decisions on this revision that count, and the approvals withdrawn since their key was
        removed (`without_removed_keys`)."""
        rows = db.all(
            "SELECT seq, actor, event, reason, at, statement, signature, key_fingerprint FROM trail "
            "WHERE proposal_id = :proposal_id AND revision = :revision AND event IN ('approved', 'rejected') "
            "ORDER BY seq",
            proposal_id=proposal_id,
            revision=revision,
        )
        cast = [
            CastDecision(
                reviewer=row["actor"],
                decision="reject" if row["event"] == "rejected" else "approve",
                reason=row["reason"],
                at=rules.required_timestamp(row["at"]),
                statement=row["statement"],
                signature=row["signature"],
                key_fingerprint=row["key_fingerprint"],
                seq=row["seq"],
            )
            for row in rows
        ]
        if not any(item.decision == "approve" for item in cast):
            return cast, []
        removed = db.all(
            "SELECT name, fingerprint, removed_at FROM ssh_keys "
            "WHERE removed_at IS NOT NULL AND fingerprint IN (SELECT key_fingerprint FROM trail "
            "WHERE proposal_id = :proposal_id AND revision = :revision AND event = 'approved')",
            proposal_id=proposal_id,
            revision=revision,
        )
        # A revoked token withdraws its approvals as a removed key does (fingerprint None: any approval).
        revoked = db.all(
            "SELECT name, NULL AS fingerprint, revoked_at AS removed_at FROM tokens "
            "WHERE revoked_at IS NOT NULL AND lower(name) IN (SELECT lower(actor) FROM trail "
            "WHERE proposal_id = :proposal_id AND revision = :revision AND event = 'approved')",
            proposal_id=proposal_id,
            revision=revision,
        )
        if not removed and not revoked:
            return cast, []
        decided = db.one(
            "SELECT decided_at FROM decisions WHERE proposal_id = :proposal_id AND revision = :revision",
            proposal_id=proposal_id,
            revision=revision,
        )
        removals = [
            KeyRemoval(row["name"], row["fingerprint"], rules.required_timestamp(row["removed_at"]))
            for row in [*removed, *revoked]
        ]
        decided_at = None if decided is None else rules.required_timestamp(decided["decided_at"])
        return without_removed_keys(cast, removals, decided_at)

    def _voted_state(self, db: Transaction, row: Row, now: float) -> DecisionState:
        """The decision state with the quorum so far and the signed decisions of the latest revision."""
        proposal_id, revision = row["proposal_id"], row["latest_revision"]
        verdict = self._verdict(db, proposal_id, revision)
        state = with_votes(
            rules.decision_state(row, now), verdict.requirement, self._cast(db, proposal_id, revision)
        )
        return state if self.policy.trivial else state.model_copy(update={"policy": policy_state(verdict)})

    # proposals

    def _visible(self, db: Transaction, identity: Identity, proposal_id: str) -> Row:
        row = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
        return rules.require_visible(row, identity, proposal_id)

    def submit(self, identity: Identity, submission: Submission) -> tuple[bool, SubmissionAnswer]:
        """Store a revision; answers (False, its record) when this very plan is already stored.

        The policy's verdict is evaluated before the write lock is taken (it may read 200,000
        calls); a policy that rejects or approves decides in the same transaction as the revision.
        """
        verdict = None
        if submission.proposal is not None and not self.policy.trivial:
            verdict = self._evaluate_policy(submission.body, submission.proposal)
        now = self.clock()
        with self.write() as db:
            self._require_active(db, identity)
            row = db.one(
                "SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=submission.proposal_id
            )
            stored = db.one(
                "SELECT plan_sha256 FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
                proposal_id=submission.proposal_id,
                revision=submission.revision,
            )
            earlier = rules.submission_outcome(
                row,
                identity,
                submission.proposal_id,
                submission.revision,
                submission.plan_sha256,
                None if stored is None else stored["plan_sha256"],
                now,
            )
            if earlier is not None:
                return False, earlier
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
            db.run(
                "INSERT INTO proposals (proposal_id, owner, latest_revision, latest_seq, plan_sha256, "
                "title, agent_name, call_count, submitted_at, pending_expires_at, deadline) "
                "VALUES (:proposal_id, :owner, :revision, :seq, :plan_sha256, :title, :agent_name, "
                ":call_count, :now, :pending_expires_at, :pending_expires_at) "
                "ON CONFLICT (proposal_id) DO UPDATE SET latest_revision = excluded.latest_revision, "
                "latest_seq = excluded.latest_seq, plan_sha256 = excluded.plan_sha256, "
                "title = excluded.title, agent_name = excluded.agent_name, "
                "call_count = excluded.call_count, submitted_at = excluded.submitted_at, "
                "pending_expires_at = excluded.pending_expires_at, decision = NULL, decided_by = NULL, "
                "decided_at = NULL, reason = NULL, decision_id = NULL, approval_expires_at = NULL, "
                "claim_id = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, "
                "executed_at = NULL, deadline = excluded.deadline",
                proposal_id=submission.proposal_id,
                owner=identity.name,
                revision=submission.revision,
                seq=seq,
                plan_sha256=submission.plan_sha256,
                title=submission.title,
                agent_name=submission.agent_name,
                call_count=submission.call_count,
                now=now,
                pending_expires_at=pending_expires_at,
            )
            db.run(
                "INSERT INTO revisions (proposal_id, revision, plan_sha256, title, call_count, submitted_by, "
                "submitted_at, body) VALUES (:proposal_id, :revision, :plan_sha256, :title, :call_count, "
                ":submitted_by, :now, :body)",
                proposal_id=submission.proposal_id,
                revision=submission.revision,
                plan_sha256=submission.plan_sha256,
                title=submission.title,
                call_count=submission.call_count,
                submitted_by=identity.name,
                now=now,
                body=submission.body,
            )
            key = (submission.proposal_id, submission.revision)
            if verdict is not None:
                self._verdicts[key] = verdict
            else:
                self._verdicts.pop(key, None)
            verdict = self._verdict(db, submission.proposal_id, submission.revision, submission.proposal)
            state = self._decide_by_policy(
                db, submission.proposal_id, submission.revision, submission.plan_sha256, verdict, now
            )
            if state == "pending" and self.notifying.targets:
                stored_row = self._proposal_row(db, submission.proposal_id)
                self._emit(
                    db,
                    now,
                    events.event_key("proposal.waiting", submission.proposal_id, submission.revision),
                    events.waiting(stored_row, bytes(submission.body), now),
                )
        self._announce_events()
        return True, SubmissionAnswer(
            proposal_id=submission.proposal_id,
            revision=submission.revision,
            plan_sha256=submission.plan_sha256,
            state=state,
        )

    def reevaluate_pending(self) -> int:
        """Evaluate every pending proposal under the policy this store was opened with (a restart
        with a changed policy), and record what that decides: a reject or an approval by policy
        (its trail event says it was evaluated again), or a quorum the approvals so far now meet.
        Returns how many proposals it decided."""
        now = self.clock()
        with self.read() as db:
            candidates = [
                (row["proposal_id"], row["latest_revision"])
                for row in db.all("SELECT * FROM proposals WHERE decision IS NULL")
                if rules.state_of(row, now) == "pending"
            ]
        decided = 0
        for proposal_id, revision in candidates:
            with self.write() as db:
                row = db.one(
                    "SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id
                )
                if row is None or row["latest_revision"] != revision or rules.state_of(row, now) != "pending":
                    continue
                verdict = self._verdict(db, proposal_id, revision)
                if verdict.outcome != "human":
                    again_under = f"evaluated again under policy {self.policy.sha256[:12]}"
                    note = f"{verdict.reason or 'approved'} ({again_under})"
                    again = Verdict(**{**vars(verdict), "reason": note})
                    self._decide_by_policy(db, proposal_id, revision, row["plan_sha256"], again, now)
                    decided += 1
                    continue
                result = outcome(verdict.requirement, self._cast(db, proposal_id, revision))
                if result.state != "pending":
                    decided_by = (
                        ", ".join(result.approvals)
                        if result.state == "approved"
                        else result.rejected_by or ""
                    )
                    decision: Decision = "approve" if result.state == "approved" else "reject"
                    request = DecisionRequest(
                        revision=revision,
                        plan_sha256=row["plan_sha256"],
                        decision=decision,
                        reason=result.reason or "",
                    )
                    self._record_decision(db, proposal_id, request, decided_by, now)
                    decided += 1
        return decided

    def _decide_by_policy(
        self, db: Transaction, proposal_id: str, revision: int, plan_sha256: str, verdict: Verdict, now: float
    ) -> State:
        """Record the policy's own decision, as `policy:<rule>`, when it rejects or approves."""
        if verdict.outcome == "human" or verdict.decided_by is None:
            return "pending"
        decision: Decision = "reject" if verdict.outcome == "reject" else "approve"
        signed = None
        if decision == "approve" and verdict.requirement.signatures:
            assert self.policy_signing is not None  # evaluate() asks a human otherwise
            signed = self.policy_signing.sign(proposal_id, revision, plan_sha256, now)
        request = DecisionRequest(
            revision=revision, plan_sha256=plan_sha256, decision=decision, reason=verdict.reason or ""
        )
        self._append_trail(
            db,
            now,
            verdict.decided_by,
            "approved" if decision == "approve" else "rejected",
            proposal_id,
            revision,
            plan_sha256,
            verdict.reason,
            signed,
        )
        self._record_decision(db, proposal_id, request, verdict.decided_by, now)
        return "approved" if decision == "approve" else "rejected"

    def _append_trail(
        self,
        db: Transaction,
        now: float,
        actor: str,
        event: str,
        proposal_id: str,
        revision: int,
        plan_sha256: str,
        reason: str | None = None,
        signed: VerifiedSignature | None = None,
    ) -> int:
        """Append to the trail; its `seq` is the list's version and cursor, so it must grow in commit
        order, which the one write lock of `write()` gives on both backends."""
        row = db.one(
            "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256, reason, statement, "
            "signature, key_fingerprint) VALUES (:now, :actor, :event, :proposal_id, :revision, "
            ":plan_sha256, :reason, :statement, :signature, :key_fingerprint) RETURNING seq",
            now=now,
            actor=actor,
            event=event,
            proposal_id=proposal_id,
            revision=revision,
            plan_sha256=plan_sha256,
            reason=reason,
            statement=signed.statement if signed else None,
            signature=signed.signature if signed else None,
            key_fingerprint=signed.key_fingerprint if signed else None,
        )
        assert row is not None
        return int(row["seq"])

    LIST_VERSION: Final = (
        "(SELECT coalesce(max(seq), 0) FROM trail) AS last_seq, "
        "(SELECT min(deadline) FROM proposals WHERE deadline > :now) AS next_deadline"
    )
    """Two index lookups: enough for an ETag that changes on every write and expiry."""

    def list_version(self) -> ListVersion:
        with self.single() as db:
            version = db.one("SELECT " + self.LIST_VERSION, now=self.clock())
        assert version is not None
        return ListVersion(int(version["last_seq"]), version["next_deadline"])

    def caller_and_list_version(self, token_sha256: str) -> tuple[Identity | None, ListVersion]:
        """`resolve_token` and `list_version` in one statement, for the idle poll: the token is read
        from the database on every poll (a revocation refuses the very next one), at the cost of
        one statement rather than two."""
        with self.single() as db:
            row = db.one(
                f"SELECT {TOKEN_COLUMNS}, "
                + self.LIST_VERSION
                + f" FROM (SELECT 1 AS always) AS one_row LEFT JOIN tokens ON {TOKEN_VALID}",
                token_sha256=token_sha256,
                now=self.clock(),
            )
        assert row is not None
        identity = None if row["id"] is None else _identity_of(row, token_sha256)
        return identity, ListVersion(int(row["last_seq"]), row["next_deadline"])

    LIST_BATCH: Final = 500

    def list_proposals(self, state: State | None, before_seq: int | None, limit: int) -> ProposalPage:
        """Newest first; a state filter is applied with `rules.state_of`, batch by batch, so the state
        is derived in one place rather than in each database's SQL dialect."""
        now = self.clock()
        before = before_seq if before_seq is not None else 2**62
        chosen: list[Row] = []
        with self.read() as db:
            while len(chosen) <= limit:
                batch = db.all(
                    "SELECT * FROM proposals WHERE latest_seq < :before "
                    "ORDER BY latest_seq DESC LIMIT :batch",
                    before=before,
                    batch=self.LIST_BATCH if state is not None else limit + 1,
                )
                chosen.extend(row for row in batch if state is None or rules.state_of(row, now) == state)
                if len(batch) < (self.LIST_BATCH if state is not None else limit + 1) or state is None:
                    break
                before = batch[-1]["latest_seq"]
        summaries = []
        for row in chosen[:limit]:
            decision_state = rules.decision_state(row, now)
            summaries.append(
                ProposalSummary(
                    proposal_id=row["proposal_id"],
                    revision=row["latest_revision"],
                    title=row["title"],
                    agent_name=row["agent_name"],
                    proposed_by=row["owner"],
                    plan_sha256=row["plan_sha256"],
                    call_count=row["call_count"],
                    submitted_at=rules.required_timestamp(row["submitted_at"]),
                    state=decision_state.state,
                    decided_by=decision_state.decided_by,
                    expires_at=decision_state.expires_at,
                    claimed_by=decision_state.claimed_by,
                    outcome_unknown=decision_state.outcome_unknown,
                )
            )
        next_cursor = str(chosen[limit - 1]["latest_seq"]) if len(chosen) > limit else None
        return ProposalPage(proposals=summaries, next_cursor=next_cursor)

    def get_record(self, identity: Identity, proposal_id: str) -> ProposalRecord:
        now = self.clock()
        with self.read() as db:
            row = self._visible(db, identity, proposal_id)
            revision_rows = db.all(
                "SELECT revision, plan_sha256, title, call_count, submitted_by, submitted_at "
                "FROM revisions WHERE proposal_id = :proposal_id ORDER BY revision",
                proposal_id=proposal_id,
            )
            trail_rows = db.all(
                "SELECT * FROM trail WHERE proposal_id = :proposal_id ORDER BY seq", proposal_id=proposal_id
            )
            latest = self._voted_state(db, row, now)
            _counted, withdrawn = self._cast_and_withdrawn(db, proposal_id, row["latest_revision"])
        revisions = [
            RevisionInfo(
                revision=revision["revision"],
                plan_sha256=revision["plan_sha256"],
                title=revision["title"],
                call_count=revision["call_count"],
                submitted_by=revision["submitted_by"],
                submitted_at=rules.required_timestamp(revision["submitted_at"]),
                state=latest.state if revision["revision"] == latest.revision else "superseded",
            )
            for revision in revision_rows
        ]
        history = [
            TrailEvent(
                seq=event["seq"],
                at=rules.required_timestamp(event["at"]),
                actor=event["actor"],
                event=event["event"],
                revision=event["revision"],
                plan_sha256=event["plan_sha256"],
                reason=event["reason"],
                statement=event["statement"],
                signature=event["signature"],
            )
            for event in trail_rows
        ]
        history = _with_withdrawals(history, withdrawn, latest.revision, latest.plan_sha256)
        return ProposalRecord(
            proposal_id=proposal_id,
            proposed_by=row["owner"],
            latest=latest,
            revisions=revisions,
            history=history,
        )

    def get_revision_body(self, identity: Identity, proposal_id: str, revision: int) -> bytes:
        with self.read() as db:
            self._visible(db, identity, proposal_id)
            row = db.one(
                "SELECT body FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
                proposal_id=proposal_id,
                revision=revision,
            )
        if row is None:
            raise NotFound(f"proposal {proposal_id!r} has no revision {revision}")
        return bytes(row["body"])

    def decision_state(self, identity: Identity, proposal_id: str) -> DecisionState:
        with self.read() as db:
            row = self._visible(db, identity, proposal_id)
            return self._voted_state(db, row, self.clock())

    def decide(
        self, identity: Identity, proposal_id: str, request: DecisionRequest, idempotency_key: str
    ) -> tuple[bool, DecisionState]:
        """Record a decision; answers (True, the first answer) for a retry of an earlier request."""
        fingerprint = _fingerprint(proposal_id, request)
        now = self.clock()
        with self.write() as db:
            row, earlier = self._idempotent_write(
                db, identity, proposal_id, idempotency_key, fingerprint, "decision", DecisionState
            )
            if earlier is not None:
                return True, earlier
            rules.check_decision(row, identity, request.revision, request.plan_sha256, now)
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
            self._append_trail(
                db,
                now,
                identity.name,
                TRAIL_EVENTS[request.decision],
                proposal_id,
                request.revision,
                request.plan_sha256,
                request.reason or None,
                signed,
            )
            if request.decision == "request_changes":
                # Not a vote: one reviewer's request closes the revision, as one rejection does; the
                # approvals so far stay with this revision and count for none after it.
                self._record_decision(db, proposal_id, request, identity.name, now)
                answer = with_votes(self._answer(db, proposal_id, now), rule, cast)
                self._remember(db, identity, idempotency_key, fingerprint, answer, now)
                return False, answer
            cast.append(
                CastDecision(
                    identity.name,
                    request.decision,
                    request.reason or None,
                    rules.required_timestamp(now),
                    *((signed.statement, signed.signature, signed.key_fingerprint) if signed else ()),
                )
            )
            result = outcome(rule, cast)
            if result.state != "pending":
                decided_by = ", ".join(result.approvals) if result.state == "approved" else identity.name
                self._record_decision(db, proposal_id, request, decided_by, now)
            answer = with_votes(self._answer(db, proposal_id, now), rule, cast)
            self._remember(db, identity, idempotency_key, fingerprint, answer, now)
        self._announce_events()
        return False, answer

    def _record_decision(
        self, db: Transaction, proposal_id: str, request: DecisionRequest, decided_by: str, now: float
    ) -> None:
        """The revision's final decision (a quorum met, or a rejection), which a claim then uses."""
        approval_expires_at = now + self.approval_ttl if request.decision == "approve" else None
        decision = db.one(
            "INSERT INTO decisions (proposal_id, revision, plan_sha256, decision, reason, decided_by, "
            "decided_at, expires_at) VALUES (:proposal_id, :revision, :plan_sha256, :decision, :reason, "
            ":decided_by, :now, :expires_at) RETURNING id",
            proposal_id=proposal_id,
            revision=request.revision,
            plan_sha256=request.plan_sha256,
            decision=request.decision,
            reason=request.reason,
            decided_by=decided_by,
            now=now,
            expires_at=approval_expires_at,
        )
        assert decision is not None
        db.run(
            "UPDATE proposals SET decision = :decision, decided_by = :decided_by, decided_at = :now, "
            "reason = :reason, decision_id = :decision_id, approval_expires_at = :expires_at, "
            "deadline = :expires_at WHERE proposal_id = :proposal_id",
            decision=request.decision,
            decided_by=decided_by,
            now=now,
            reason=request.reason or None,
            decision_id=decision["id"],
            expires_at=approval_expires_at,
            proposal_id=proposal_id,
        )
        if self.notifying.targets:
            event: events.EventName = (
                "proposal.changes_requested" if request.decision == "request_changes" else "proposal.decided"
            )
            self._emit(
                db,
                now,
                events.event_key(event, proposal_id, request.revision),
                events.decided(self._proposal_row(db, proposal_id), now, event),
            )

    def claim(
        self, identity: Identity, proposal_id: str, request: ClaimRequest, idempotency_key: str
    ) -> tuple[bool, Claim]:
        """Take the approval for one run; answers (True, the first answer) for a retry of the same claim.

        Refusals in order: 404 (not this agent's proposal), 412 (not the latest revision and digest),
        409 (not approved now, naming who holds it when it is claimed): `rules.check_claim`.
        """
        fingerprint = _fingerprint(proposal_id, request)
        now = self.clock()
        with self.write() as db:
            row, earlier = self._idempotent_write(
                db, identity, proposal_id, idempotency_key, fingerprint, "claim", Claim
            )
            if earlier is not None:
                return True, earlier
            rules.check_claim(row, request.revision, request.plan_sha256, now)
            lease_expires_at = now + self.claim_lease
            claim = Claim(
                claim_id=uuid.uuid4().hex,
                proposal_id=proposal_id,
                revision=request.revision,
                plan_sha256=request.plan_sha256,
                claimed_by=identity.name,
                claimed_at=rules.required_timestamp(now),
                lease_expires_at=rules.required_timestamp(lease_expires_at),
            )
            db.run(
                "INSERT INTO claims (claim_id, decision_id, proposal_id, revision, plan_sha256, claimed_by, "
                "claimed_at, lease_expires_at) VALUES (:claim_id, :decision_id, :proposal_id, :revision, "
                ":plan_sha256, :claimed_by, :now, :lease_expires_at)",
                claim_id=claim.claim_id,
                decision_id=row["decision_id"],
                proposal_id=proposal_id,
                revision=request.revision,
                plan_sha256=request.plan_sha256,
                claimed_by=identity.name,
                now=now,
                lease_expires_at=lease_expires_at,
            )
            self._append_trail(
                db, now, identity.name, "claimed", proposal_id, request.revision, request.plan_sha256
            )
            db.run(
                "UPDATE proposals SET claim_id = :claim_id, claimed_by = :claimed_by, claimed_at = :now, "
                "lease_expires_at = :lease_expires_at, deadline = :lease_expires_at "
                "WHERE proposal_id = :proposal_id",
                claim_id=claim.claim_id,
                claimed_by=identity.name,
                now=now,
                lease_expires_at=lease_expires_at,
                proposal_id=proposal_id,
            )
            self._remember(db, identity, idempotency_key, fingerprint, claim, now)
        return False, claim

    def check_report_allowed(self, identity: Identity, proposal_id: str, idempotency_key: str | None) -> None:
        """Refuse a report before its body is read: a revoked token (401), a proposal this agent cannot
        see (404), or no claim of this agent's still waiting for its report (409).

        A report may be 64 MB; an agent without an open claim must not make the service read it.
        The claim the body names is checked again once it is read (`rules.check_report`). A retry
        under an Idempotency-Key already answered goes through, to get its first answer again.
        """
        with self.read() as db:
            self._require_active(db, identity)
            self._visible(db, identity, proposal_id)
            if idempotency_key is not None and self._idempotent(db, identity, idempotency_key) is not None:
                return
            newest_claim = db.one(
                "SELECT claim_id, claim_id IN (SELECT claim_id FROM executions) AS reported FROM claims "
                "WHERE proposal_id = :proposal_id AND lower(claimed_by) = lower(:name) "
                "ORDER BY claimed_at DESC LIMIT 1",
                proposal_id=proposal_id,
                name=identity.name,
            )
        rules.require_open_claim(newest_claim, proposal_id)

    def _claim_of(
        self, db: Transaction, identity: Identity, proposal_id: str, claim_id: str | None
    ) -> tuple[Row | None, bool]:
        """The reporter's own claim named `claim_id`, and whether its run was already reported."""
        if claim_id is None:
            return None, False
        claim = db.one(
            "SELECT * FROM claims WHERE claim_id = :claim_id AND proposal_id = :proposal_id "
            "AND lower(claimed_by) = lower(:name)",
            claim_id=claim_id,
            proposal_id=proposal_id,
            name=identity.name,
        )
        reported = db.one(
            "SELECT 1 AS reported FROM executions WHERE claim_id = :claim_id", claim_id=claim_id
        )
        return claim, reported is not None

    def record_execution(
        self,
        identity: Identity,
        proposal_id: str,
        report: ExecutionReport,
        body: bytes | bytearray,
        idempotency_key: str | None = None,
    ) -> tuple[bool, DecisionState]:
        """Store the real run under its claim; answers (True, the first answer) for a retry under its key.

        The report belongs to the claim, not to whatever the proposal became meanwhile: it is stored
        after the lease ran out, or after a newer revision arrived, so a run that wrote is never lost.
        """
        fingerprint = "" if idempotency_key is None else _fingerprint(proposal_id, report)
        now = self.clock()
        with self.write() as db:
            _row, earlier = self._idempotent_write(
                db, identity, proposal_id, idempotency_key, fingerprint, "execution report", DecisionState
            )
            if earlier is not None:
                return True, earlier
            claim_row, reported = self._claim_of(db, identity, proposal_id, report.claim_id)
            claim = rules.check_report(
                claim_row, reported, proposal_id, report.claim_id, report.revision, report.plan_sha256
            )
            db.run(
                "INSERT INTO executions (decision_id, claim_id, proposal_id, revision, reported_by, "
                "reported_at, ended, body) VALUES (:decision_id, :claim_id, :proposal_id, :revision, "
                ":reported_by, :now, :ended, :body)",
                decision_id=claim["decision_id"],
                claim_id=claim["claim_id"],
                proposal_id=proposal_id,
                revision=claim["revision"],
                reported_by=identity.name,
                now=now,
                ended=report.ended,
                body=body,
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
            db.run(
                "UPDATE proposals SET executed_at = :now, deadline = NULL "
                "WHERE proposal_id = :proposal_id AND claim_id = :claim_id",
                now=now,
                proposal_id=proposal_id,
                claim_id=claim["claim_id"],
            )
            updated = db.one(
                "SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id
            )
            assert updated is not None
            if self.notifying.targets:
                self._emit(
                    db,
                    now,
                    events.event_key("run.ended", proposal_id, claim["revision"], claim["claim_id"]),
                    events.run_ended(updated, claim, report.ended, report.calls, identity.name, now),
                )
            answer = self._voted_state(db, updated, now)
            if idempotency_key is not None:
                self._remember(db, identity, idempotency_key, fingerprint, answer, now)
        self._announce_events()
        return False, answer

    def list_executions(self, identity: Identity, proposal_id: str) -> bytes:
        """The JSON of `ExecutionHistory`: the reports stored for a proposal, oldest first, as sent.

        Each report's calls and audit log are spliced in as the bytes the agent sent (msgspec `Raw`),
        never decoded into objects: a stored 32 MB report costs about its bytes to read, not gigabytes.
        """
        with self.read() as db:
            self._visible(db, identity, proposal_id)
            rows = db.all(
                "SELECT reported_by, reported_at, claim_id, body FROM executions "
                "WHERE proposal_id = :proposal_id ORDER BY id",
                proposal_id=proposal_id,
            )
        executions = []
        for row in rows:
            report = msgspec.json.decode(bytes(row["body"]), type=_StoredReport)
            executions.append(
                _StoredExecutionWire(
                    revision=report.revision,
                    plan_sha256=report.plan_sha256,
                    executed_by=row["reported_by"],
                    at=rules.required_timestamp(row["reported_at"]),
                    claim_id=row["claim_id"],
                    ended=report.ended,
                    calls=report.calls,
                    unknown_outcomes=report.unknown_outcomes,
                    audit_log=msgspec.UNSET if bytes(report.audit_log) == b"null" else report.audit_log,
                    note=report.note,
                    request_ids=msgspec.UNSET if bytes(report.request_ids) == b"null" else report.request_ids,
                    audit=msgspec.UNSET if bytes(report.audit) == b"null" else report.audit,
                )
            )
        return msgspec.json.encode(_ExecutionHistoryWire(proposal_id=proposal_id, executions=executions))

    # the notifications' outbox

    def _emit(self, db: Transaction, now: float, key: str, document: dict[str, Any]) -> None:
        """Write the event for each target in the caller's transaction; a key already written (a
        second replica's sweep, a retried request) is kept as it was."""
        event_id = uuid.uuid4().hex
        body = events.encode(document, event_id)
        self._emitted.pending = True
        for target in self.notifying.targets:
            if target in self.notifying.only and document["event"] not in self.notifying.only[target]:
                continue
            db.run(
                "INSERT INTO outbox (event_id, event_key, event, proposal_id, target, created_at, body, "
                "state, attempts, next_attempt_at, give_up_at) VALUES (:event_id, :event_key, :event, "
                ":proposal_id, :target, :now, :body, 'pending', 0, :now, :give_up_at) "
                "ON CONFLICT (event_key, target) DO NOTHING",
                event_id=event_id,
                event_key=key,
                event=document["event"],
                proposal_id=document["proposal_id"],
                target=target,
                now=now,
                body=body,
                give_up_at=now + self.notifying.give_up_after,
            )

    def _announce_events(self) -> None:
        """After the transaction that wrote events committed (a refusal rolled back and wrote none)."""
        if getattr(self._emitted, "pending", False):
            self._emitted.pending = False
            if self.on_event is not None:
                self.on_event()

    def _written(self, db: Transaction, key: str) -> bool:
        return db.one("SELECT 1 AS written FROM outbox WHERE event_key = :key LIMIT 1", key=key) is not None

    def sweep_events(self) -> int:
        """Write the events that time alone makes true: reminders of pending proposals, claims whose
        lease ran out without a report, and pending proposals and unclaimed approvals that expired.
        Answers how many were written; any replica may sweep."""
        if not self.notifying.targets:
            return 0
        now = self.clock()
        written = 0
        remind_after = self.notifying.remind_after
        kept_since = now - self.notifying.keep_deliveries
        with self.write() as db:
            if remind_after is not None:
                for row in db.all(
                    "SELECT * FROM proposals WHERE decision IS NULL AND claim_id IS NULL "
                    "AND executed_at IS NULL AND pending_expires_at > :now AND submitted_at <= :due",
                    now=now,
                    due=now - remind_after,
                ):
                    number = events.reminder_number(row["submitted_at"], now, remind_after)
                    key = events.event_key(
                        "proposal.reminder", row["proposal_id"], row["latest_revision"], str(number)
                    )
                    due = row["submitted_at"] + number * remind_after
                    if number == 0 or due < kept_since or self._written(db, key):
                        continue
                    body = db.one(
                        "SELECT body FROM revisions "
                        "WHERE proposal_id = :proposal_id AND revision = :revision",
                        proposal_id=row["proposal_id"],
                        revision=row["latest_revision"],
                    )
                    assert body is not None
                    self._emit(
                        db, now, key, events.waiting(row, bytes(body["body"]), now, "proposal.reminder")
                    )
                    written += 1
            for row in db.all(
                "SELECT * FROM proposals WHERE claim_id IS NOT NULL AND executed_at IS NULL "
                "AND lease_expires_at <= :now AND lease_expires_at >= :kept_since",
                now=now,
                kept_since=kept_since,
            ):
                key = events.event_key(
                    "run.unknown", row["proposal_id"], row["latest_revision"], row["claim_id"]
                )
                if not self._written(db, key):
                    self._emit(db, now, key, events.run_unknown(row, now))
                    written += 1
            for row in db.all(
                "SELECT * FROM proposals WHERE claim_id IS NULL AND executed_at IS NULL AND "
                "((decision IS NULL AND pending_expires_at <= :now AND pending_expires_at >= :kept_since) "
                "OR (decision = 'approve' AND approval_expires_at <= :now "
                "AND approval_expires_at >= :kept_since))",
                now=now,
                kept_since=kept_since,
            ):
                key = events.event_key("proposal.expired", row["proposal_id"], row["latest_revision"])
                if not self._written(db, key):
                    self._emit(db, now, key, events.expired(row, now))
                    written += 1
        self._announce_events()
        return written

    _DELIVERY_COLUMNS: Final = (
        "id, event_id, event, proposal_id, target, body, state, attempts, created_at, next_attempt_at, "
        "give_up_at, last_error, finished_at"
    )

    def claim_deliveries(self, target: str, limit: int, lease: float) -> list[Delivery]:
        """Take up to `limit` deliveries that are due, for `lease` seconds: another replica (or this
        one's next pass) takes a row again only once the lease ran out, as after a crash mid-send."""
        now = self.clock()
        with self.outbox_write() as db:
            rows = db.all(
                "UPDATE outbox SET leased_until = :until WHERE id IN (SELECT id FROM outbox "
                "WHERE state = 'pending' AND target = :target AND next_attempt_at <= :now "
                "AND (leased_until IS NULL OR leased_until <= :now) ORDER BY id LIMIT :limit"
                f"{self.ROW_LOCK}) RETURNING {self._DELIVERY_COLUMNS}",
                until=now + lease,
                now=now,
                target=target,
                limit=limit,
            )
        return sorted((_delivery(row) for row in rows), key=lambda delivery: delivery.id)

    def finish_delivery(self, delivery_id: int, error: str | None, retry_at: float | None) -> None:
        """Record an attempt: delivered (`error` None), retried at `retry_at`, or failed for good."""
        now = self.clock()
        state = "delivered" if error is None else ("pending" if retry_at is not None else "failed")
        with self.outbox_write() as db:
            db.run(
                "UPDATE outbox SET state = :state, attempts = attempts + 1, leased_until = NULL, "
                "last_error = :error, "
                "next_attempt_at = coalesce(CAST(:retry_at AS DOUBLE PRECISION), next_attempt_at), "
                "finished_at = :finished_at WHERE id = :id",
                state=state,
                error=error,
                retry_at=retry_at,
                finished_at=None if state == "pending" else now,
                id=delivery_id,
            )

    def prune_outbox(self) -> tuple[int, int]:
        """Delete deliveries finished longer ago than `keep_deliveries`, and give up on each target's
        oldest waiting ones beyond its `backlog`; answers how many of each."""
        now = self.clock()
        with self.outbox_write() as db:
            deleted = db.run(
                "DELETE FROM outbox WHERE state <> 'pending' AND finished_at < :before",
                before=now - self.notifying.keep_deliveries,
            )
            dropped = 0
            for target in self.notifying.targets:
                dropped += db.run(
                    "UPDATE outbox SET state = 'failed', finished_at = :now, leased_until = NULL, "
                    "last_error = :error WHERE target = :target AND state = 'pending' AND id <= ("
                    "SELECT id FROM outbox WHERE target = :target AND state = 'pending' "
                    "ORDER BY id DESC LIMIT 1 OFFSET :backlog)",
                    now=now,
                    error=f"given up: more than {self.notifying.backlog} deliveries were waiting",
                    target=target,
                    backlog=self.notifying.backlog,
                )
        return deleted, dropped

    def list_deliveries(self, limit: int = 100) -> list[Delivery]:
        """The newest deliveries first, for `reviewer notify list`."""
        with self.read() as db:
            rows = db.all(
                f"SELECT {self._DELIVERY_COLUMNS} FROM outbox ORDER BY id DESC LIMIT :limit", limit=limit
            )
        return [_delivery(row) for row in rows]

    # helpers of the write transactions

    def _proposal_row(self, db: Transaction, proposal_id: str) -> Row:
        row = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
        assert row is not None
        return row

    def _answer(self, db: Transaction, proposal_id: str, now: float) -> DecisionState:
        row = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
        assert row is not None
        return rules.decision_state(row, now)

    def _idempotent_write(
        self,
        db: Transaction,
        identity: Identity,
        proposal_id: str,
        idempotency_key: str | None,
        fingerprint: str,
        what: str,
        answer_model: type[rules.Answer],
    ) -> tuple[Row, rules.Answer | None]:
        """The start of every write under an Idempotency-Key: the token still active, the proposal
        visible to it, then the answer already given under the key (none without a key), 422 when
        the key came with another body."""
        self._require_active(db, identity)
        row = self._visible(db, identity, proposal_id)
        if idempotency_key is None:
            return row, None
        earlier = self._idempotent(db, identity, idempotency_key)
        return row, rules.earlier_answer(earlier, fingerprint, what, answer_model)

    def _idempotent(self, db: Transaction, identity: Identity, idempotency_key: str) -> Row | None:
        return db.one(
            "SELECT request_sha256, answer FROM idempotency WHERE token_id = :token_id AND key = :key",
            token_id=identity.token_id,
            key=idempotency_key,
        )

    def _remember(
        self,
        db: Transaction,
        identity: Identity,
        idempotency_key: str,
        fingerprint: str,
        answer: DecisionState | Claim,
        now: float,
    ) -> None:
        """Keep the answer under the key, in the transaction that made it, for a retry to get again."""
        db.run(
            "INSERT INTO idempotency (token_id, key, request_sha256, answer, created_at) "
            "VALUES (:token_id, :key, :request_sha256, :answer, :now)",
            token_id=identity.token_id,
            key=idempotency_key,
            request_sha256=fingerprint,
            answer=answer.model_dump_json(),
            now=now,
        )


def _with_withdrawals(
    history: list[TrailEvent], withdrawn: list[Withdrawal], revision: int, plan_sha256: str
) -> list[TrailEvent]:
    """The trail with a `withdrawn` event where each withdrawn approval stopped counting (when its key
    was removed); it carries the seq of the approval it withdraws."""
    events = [
        TrailEvent(
            seq=item.approval.seq or 0,
            at=item.removal.at,
            actor=item.approval.reviewer,
            event="withdrawn",
            revision=revision,
            plan_sha256=plan_sha256,
            reason=item.reason,
        )
        for item in sorted(withdrawn, key=lambda item: item.removal.at)
    ]
    merged: list[TrailEvent] = []
    for event in history:
        while events and events[0].at < event.at:
            merged.append(events.pop(0))
        merged.append(event)
    return merged + events


def _delivery(row: Row) -> Delivery:
    return Delivery(
        id=row["id"],
        event_id=row["event_id"],
        event=row["event"],
        proposal_id=row["proposal_id"],
        target=row["target"],
        body=bytes(row["body"]),
        state=row["state"],
        attempts=row["attempts"],
        created_at=row["created_at"],
        next_attempt_at=row["next_attempt_at"],
        give_up_at=row["give_up_at"],
        last_error=row["last_error"],
        finished_at=row["finished_at"],
    )


_NULL: Final = msgspec.Raw(b"null")
"""An absent audit log as read (msgspec holds no `Raw` in a union with None); written as UNSET, left out."""


class _StoredReport(msgspec.Struct):
    """A stored report as the agent sent it (validated when it arrived), its lists left as bytes."""

    revision: int
    plan_sha256: str
    calls: msgspec.Raw
    claim_id: str | None = None
    ended: str | None = None
    unknown_outcomes: list[int] = []
    audit_log: msgspec.Raw = _NULL
    note: str | None = None
    request_ids: msgspec.Raw = _NULL
    audit: msgspec.Raw = _NULL


class _StoredExecutionWire(msgspec.Struct, omit_defaults=True):
    """`reviewer.queue.messages.StoredExecution` on the wire (its field order and names), by msgspec."""

    revision: int
    plan_sha256: str
    executed_by: str
    at: datetime
    calls: msgspec.Raw
    claim_id: str | None = None
    ended: str | None = None
    unknown_outcomes: list[int] = []
    audit_log: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    note: str | None = None
    request_ids: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET
    audit: msgspec.Raw | msgspec.UnsetType = msgspec.UNSET


class _ExecutionHistoryWire(msgspec.Struct):
    proposal_id: str
    executions: list[_StoredExecutionWire]


def _fingerprint(proposal_id: str, request: DecisionRequest | ClaimRequest | ExecutionReport) -> str:
    """What makes two requests "the same body" for an Idempotency-Key: equal fields, in any key order.

    msgspec writes the sorted JSON of the model's fields as they are (no `model_dump` copy): a 64 MB
    execution report costs its encoded bytes here, not another copy of every object in it.
    """
    material: dict[str, Any] = {"proposal_id": proposal_id, **vars(request)}
    return hashlib.sha256(msgspec.json.encode(material, order="sorted")).hexdigest()


def _expiry(row: Row, now: float) -> str | None:
    """What a 401 says of a token row's expiry at `now`, None while it is valid."""
    if row["expires_at"] is None or row["expires_at"] > now:
        return None
    return f"this token expired at {rules.required_timestamp(row['expires_at']):%Y-%m-%d %H:%M:%S} UTC"


def _identity_of(row: Row | None, token_sha256: str) -> Identity | None:
    """The identity of a token's row that `TOKEN_VALID` found, compared in constant time with the
    hash presented: its current secret, or the one a rotation replaced (within its grace)."""
    if row is None:
        return None
    current = hashes_match(row["token_sha256"], token_sha256)
    previous = row["previous_sha256"] is not None and hashes_match(row["previous_sha256"], token_sha256)
    return Identity(row["id"], row["name"], row["role"]) if current or previous else None
