"""The queue's storage: the queue API's operations as transactions, on any SQL database.

`QueueStore` is the face: each operation opens one transaction and calls the module of its
aggregate (`tokens`, `proposals`, `decisions`, `runs`, `idempotency`, `outbox`, `escalations`), whose plain
functions of that transaction read the rows they need, ask `reviewer.service.rules` what the rules
allow, and write that. Each read-then-write runs in one serialized write transaction (the backend's
`write()`), so a refusal never leaves a partial write and the rules hold across threads, processes
and replicas alike. The SQL is written once with `:name` parameters in the subset SQLite and
PostgreSQL share; a backend (`store.sqlite.SQLiteStore`, `store.postgres.PostgresStore`) brings only
its connections, its transactions and its schema, and `store.opener` opens the one `--db` names.

Revisions, decisions, executions, executors' refusals and the trail are append-only (the backends'
triggers refuse UPDATE and DELETE); `proposals` is the one mutable table, an index of each proposal's latest
revision and its state, rewritten in the same transaction as the history.
"""

from __future__ import annotations

import secrets
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from dataclasses import replace
from typing import TYPE_CHECKING, Final

from reviewer.policy.file import Policy
from reviewer.policy.verdict import ChangeRequest, Verdict
from reviewer.queue.messages import (
    Claim,
    ClaimRequest,
    DecisionRequest,
    DecisionState,
    ExecutionReport,
    ProposalPage,
    ProposalRecord,
    RefusalReport,
    State,
    SubmissionAnswer,
)
from reviewer.reading.analysis import Analysis
from reviewer.reading.summary import read_plan
from reviewer.service import rules
from reviewer.service.auth import Identity, Kind, Role
from reviewer.service.errors import DatabaseUnavailable, OutsideTheGroup
from reviewer.service.listing import Chooser, ListFilter
from reviewer.service.store import (
    decisions,
    endings,
    escalations,
    figures,
    idempotency,
    outbox,
    passkeys,
    proposals,
    runs,
    tokens,
    trail,
)
from reviewer.service.store.base import (
    DECISION_CHECK,
    DEFAULT_APPROVAL_TTL,
    DEFAULT_BACKLOG,
    DEFAULT_CLAIM_LEASE,
    DEFAULT_GIVE_UP_AFTER,
    DEFAULT_KEEP_DELIVERIES,
    DEFAULT_PENDING_TTL,
    SCHEMA_VERSION,
    TRAIL_EVENT_CHECK,
    Clock,
    Notifying,
    StoreSettings,
    Transaction,
)
from reviewer.service.store.clock import ForwardClock
from reviewer.service.store.decisions import TRAIL_EVENTS
from reviewer.service.store.figures import Figures
from reviewer.service.store.outages import DatabaseHealth
from reviewer.service.store.outbox import Delivery
from reviewer.service.store.passkeys import PasskeyInfo
from reviewer.service.store.proposals import ListVersion, Submission
from reviewer.service.store.tokens import RegisteredKey, TokenInfo
from reviewer.signing.passkeys import PasskeyAssertion, RegisteredPasskey
from reviewer.signing.sshsig import PublicKey

if TYPE_CHECKING:  # the JOSE library loads only where a queue signs reviewers in through a provider
    from reviewer.service.oidc import ProviderPerson

__all__ = [
    "DECISION_CHECK",
    "DEFAULT_APPROVAL_TTL",
    "DEFAULT_BACKLOG",
    "DEFAULT_CLAIM_LEASE",
    "DEFAULT_GIVE_UP_AFTER",
    "DEFAULT_KEEP_DELIVERIES",
    "DEFAULT_PENDING_TTL",
    "SCHEMA_VERSION",
    "TRAIL_EVENTS",
    "TRAIL_EVENT_CHECK",
    "Clock",
    "Delivery",
    "ListVersion",
    "Notifying",
    "QueueStore",
    "RegisteredKey",
    "StoreSettings",
    "Submission",
    "TokenInfo",
    "Transaction",
]


class QueueStore(ABC):
    """The storage the routes need; a backend supplies `write`, `read` and `close`."""

    def __init__(self, settings: StoreSettings) -> None:
        self.forward_clock = ForwardClock(self._time_source(settings.clock))
        self.clock: Clock = self.forward_clock
        """The queue's time: never earlier than a time it gave or recorded (`store.clock`)."""
        self.pending_ttl = settings.pending_ttl
        self.approval_ttl = settings.approval_ttl
        self.claim_lease = settings.claim_lease
        self.policy = settings.policy or Policy()
        self.policy_signing = settings.policy_signing
        self.policy_evaluator = settings.policy_evaluator
        self.verdicts: dict[tuple[str, int], Verdict] = {}
        """Each revision's verdict under this policy, evaluated once: a revision never changes."""
        self.created = False
        """True when this store created the queue's tables (a new database), for `serve` to say so."""
        self.notifying = settings.notifying
        self.on_event: Callable[[], None] | None = None
        """Called after a write that wrote an event committed: the delivery loop wakes at once."""
        self.on_change: Callable[[frozenset[str] | None], None] | None = None
        """Told the proposals each committed write changed (None: any may have), from the writing
        thread or a listener's: the requests waiting on them wake (`reviewer.service.waits`)."""
        self.emitted = threading.local()
        """Whether this thread's transaction wrote an event, for `_announce_events` after it committed."""
        self._review_link_secret: bytes | None = None
        self.web_origin: str | None = None
        """The review pages' origin (`serve --web-origin`): its events carry each page's link."""
        self.health = DatabaseHealth()
        """Whether writes fail now, and whether the database answers at all (`store.outages`)."""

    def _time_source(self, clock: Clock) -> Clock:
        """Where the queue reads the time: the clock it was given (PostgreSQL's own on the real clock)."""
        return clock

    def _start_clock(self) -> None:
        """After the database opened: the clock never answers earlier than the trail's newest entry
        nor the latest time the queue kept (`keep_time`)."""
        with self.read() as db:
            row = db.one(
                "SELECT (SELECT max(at) FROM trail) AS recorded, (SELECT max(at) FROM queue_clock) AS kept"
            )
        assert row is not None
        for floor in (row["recorded"], row["kept"]):
            if floor is not None:
                self.forward_clock.raise_floor(float(floor))

    def keep_time(self) -> None:
        """Write the queue's time down (`clock.TimeKeeper` does, every few seconds and at shutdown),
        so a restart on a clock set back starts no earlier than a time the queue used; and record
        what the time that passed since ended: the reviewer tokens that expired in it
        (`endings.record_expiries`), as the trail records a revoked one."""
        now = self.clock()
        with self.write() as db:
            kept = db.one("SELECT at FROM queue_clock")
            db.run("UPDATE queue_clock SET at = :now WHERE at < :now", now=now)
            ended = endings.record_expiries(db, kept["at"], now) if kept else []
        for ending in ended:
            ending.log()

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

    def announce(self, changed: set[str]) -> None:
        """After a write transaction committed: `on_change` hears the proposals it changed."""
        if changed and self.on_change is not None:
            self.on_change(frozenset(changed))

    def hear_other_writers(self) -> Callable[[], None] | None:
        """Start telling `on_change` of the changes other processes commit (another replica's), as
        they commit; answers the function that stops it, or None where the database cannot tell
        (SQLite: a waiting request finds them by reading again, `waits.RECHECK_SECONDS`)."""
        return None

    ROW_LOCK: str = ""
    """Appended to the outbox's claiming SELECT: PostgreSQL's `FOR UPDATE SKIP LOCKED`."""

    PROBE_WRITE: str = ""
    """A write that changes nothing the queue reads, for `write_failure` to try again."""

    def write_failure(self) -> str | None:
        """Why writes fail now, None when they succeed: after a write failed for an outage, one
        write of nothing is tried again (its success clears the failure, as any write's does)."""
        if self.health.write_failure is None:
            return None
        try:
            with self.write() as db:
                db.run(self.PROBE_WRITE)
        except DatabaseUnavailable as error:
            return error.cause
        return None

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
    def check_before_serving(self) -> None:
        """Raise `DatabaseUnusable` for a database `serve` must not serve as it is (a damaged file)."""

    @abstractmethod
    def schema_version(self) -> int:
        """The version of the tables the database holds now (a query: raises when it does not answer)."""

    # tokens and reviewers' SSH keys

    def create_token(
        self,
        name: str,
        role: Role,
        token_sha256: str,
        expires_at: float | None = None,
        kind: Kind = "minted",
        person: tuple[str, str] | None = None,
    ) -> None:
        """Mint under `name` (see `rules.check_new_token` for the rules a name follows), valid until
        `expires_at` (seconds since the epoch) or for ever; `kind` break-glass for a reviewer's token
        on a queue that signs reviewers in through the provider; `person` the provider's (issuer,
        subject) of the reviewer it belongs to, so a quorum counts them once."""
        rules.check_token_name(name)
        with self.write() as db:
            tokens.create_token(db, name, role, token_sha256, expires_at, self.clock(), kind, person)

    def list_tokens(self) -> list[TokenInfo]:
        with self.read() as db:
            return tokens.list_tokens(db)

    def rotate_token(
        self, name: str, token_sha256: str, grace: float, expires_at: float | None = None
    ) -> bool:
        """Give the active token of `name` a new secret, keeping its identity (its idempotency keys,
        its claims); the replaced secret is accepted `grace` seconds more. False when `name` has none."""
        now = self.clock()
        with self.write() as db:
            return tokens.rotate_token(db, name, token_sha256, grace, expires_at, now)

    def token_refusal(self, token_sha256: str) -> str | None:
        """Why a token that does not authenticate is refused, when it is ours and merely out of
        date (expired, or replaced by a rotation whose grace ended); None for unknown or revoked."""
        now = self.clock()
        with self.single() as db:
            return tokens.token_refusal(db, token_sha256, now)

    def revoke_token(self, name: str) -> bool:
        """Revoke the active token of `name` (without regard to case); False when there is none. A
        reviewer's end, and each pending approval it withdrew, go in the trail and the log."""
        now = self.clock()
        with self.write() as db:
            active = tokens.active_tokens(db, name)
            revoked = tokens.revoke_token(db, name, now)
            ended = [
                endings.record_ending(db, row["id"], endings.revoked(row["kind"]), now) for row in active
            ]
        for ending in ended:
            if ending is not None:
                ending.log()
        return revoked

    def resolve_token(self, token_sha256: str) -> Identity | None:
        with self.single() as db:
            return tokens.resolve_token(db, token_sha256, self.clock())

    def sign_in(self, person: ProviderPerson) -> Identity:
        """The identity of a person the provider's identity token names: read alone while their
        session is known, written once per renewed session (`tokens.sign_in`). Forbidden when the
        provider no longer counts them a reviewer, after ending their row (so their pending
        approvals are withdrawn) in a transaction of its own; a person outside the group with no
        row to end, or with a token older than their session, is refused on a read alone, so a stream
        of such tokens never holds the write lock nor ends a later session."""
        subject = person.principal
        with self.single() as db:
            known = tokens.provider_person(db, person.issuer, person.subject)
        if person.reviewer:
            if (
                known is not None
                and known["name"] == person.name
                and (known["session_ends_at"] or 0.0) >= person.session_ends_at
            ):
                return Identity(known["id"], known["name"], "reviewer", "provider", subject)
        elif known is None or person.issued_at < known["created_at"]:
            raise self._outside_the_group(person)  # nothing to end: none, or a session it predates
        now = self.clock()
        ending = None
        with self.write() as db:
            token_id = tokens.sign_in(
                db,
                person.issuer,
                person.subject,
                person.name,
                person.reviewer,
                person.issued_at,
                person.session_ends_at,
                now,
            )
            if token_id is None and known is not None:
                ending = endings.record_ending(db, known["id"], endings.OUT_OF_GROUP, now)
        if ending is not None:
            ending.log()
        if token_id is None:
            raise self._outside_the_group(person)
        return Identity(token_id, person.name, "reviewer", "provider", subject)

    @staticmethod
    def _outside_the_group(person: ProviderPerson) -> OutsideTheGroup:
        return OutsideTheGroup(
            f"{person.name} is not in the queue's reviewers group at the identity provider; ask for it there"
        )

    def add_ssh_key(self, name: str, key: PublicKey, comment: str = "") -> None:
        """Register `key` for the reviewer `name`; refused for an agent's name or a key another holds.

        A key is active under one name at a time: one key that signed as two reviewers would let
        one person meet a quorum of two.
        """
        with self.write() as db:
            tokens.add_ssh_key(db, name, key, comment, self.clock())

    def remove_ssh_key(self, name: str, fingerprint: str) -> bool:
        with self.write() as db:
            return tokens.remove_ssh_key(db, name, fingerprint, self.clock())

    def list_ssh_keys(self, name: str | None = None) -> list[RegisteredKey]:
        with self.read() as db:
            return tokens.list_ssh_keys(db, name)

    # passkeys

    def create_passkey_link(self, identity: Identity, link_sha256: str) -> float:
        """Record a one-time enrolment link for the caller's own sign-in; when it expires."""
        with self.write() as db:
            tokens.require_active(db, identity, self.clock)
            return passkeys.create_link(db, identity, link_sha256, self.clock())

    def passkey_link_owner(self, link_sha256: str) -> str:
        """The reviewer a usable enrolment link enrols (404 otherwise)."""
        with self.single() as db:
            return passkeys.link_owner(db, link_sha256, self.clock())[0]

    def passkey_challenge(self, link_sha256: str, challenge: str) -> str:
        """Give an enrolment link's page its registration challenge; the reviewer it enrols."""
        with self.write() as db:
            return passkeys.set_challenge(db, link_sha256, challenge, self.clock())

    def registration_challenge(self, link_sha256: str) -> tuple[str, str | None]:
        with self.single() as db:
            return passkeys.link_owner(db, link_sha256, self.clock())

    def register_passkey(
        self, link_sha256: str, passkey: RegisteredPasskey, sign_count: int, label: str
    ) -> None:
        with self.write() as db:
            passkeys.register(db, link_sha256, passkey, sign_count, label, self.clock())

    def list_passkeys(self, identity: Identity | None) -> list[PasskeyInfo]:
        with self.read() as db:
            return passkeys.list_passkeys(db, identity, self.clock())

    def remove_passkey(self, identity: Identity, credential_id: str) -> bool:
        with self.write() as db:
            tokens.require_active(db, identity, self.clock)
            return passkeys.remove_passkey(db, identity, credential_id, self.clock())

    def registered_passkeys(self, provider_signs_in: bool = False) -> list[RegisteredPasskey]:
        with self.read() as db:
            return passkeys.registered(db, self.clock(), provider_signs_in)

    def review_link_secret(self) -> bytes:
        """The key that signs the review pages' links: made once, kept in the database (every replica
        reads the same), and in memory once read, so a page's GET takes no write lock."""
        if self._review_link_secret is None:
            with self.write() as db:
                self._review_link_secret = bytes.fromhex(
                    passkeys.review_link_secret(db, secrets.token_hex(32))
                )
        return self._review_link_secret

    def decide_by_passkey(
        self,
        proposal_id: str,
        statement: str,
        assertion: PasskeyAssertion,
        reason: str,
        provider_signs_in: bool = False,
    ) -> tuple[bool, DecisionState]:
        """A decision from the review page by the passkey's owner (`decisions.decide_by_passkey`)."""
        now = self.clock()
        with self.write() as db:
            replayed, answer = decisions.decide_by_passkey(
                self, db, proposal_id, statement, assertion, reason, now, provider_signs_in
            )
        if not replayed:
            self._announce_events()
        return replayed, answer

    # proposals

    def submit(self, identity: Identity, submission: Submission) -> tuple[bool, SubmissionAnswer]:
        """Store a revision; answers (False, its record) when this very plan is already stored.

        The plan is read once, before the write lock is taken (it may hold 200,000 calls): one
        analysis for the policy's verdict and the reading stored for the list and the notifications.
        A policy that rejects or approves decides in the same transaction as the revision.
        """
        verdict = None
        asked: tuple[ChangeRequest, ...] = ()
        proposal = submission.proposal
        analysis = None if proposal is None else Analysis(proposal)
        if proposal is not None and not self.policy.trivial:
            with self.read() as db:
                asked = decisions.changes_requested_before(db, submission.proposal_id, submission.revision)
            verdict = decisions.evaluate_policy(self, submission.body, proposal, asked, analysis)
        reading = None if proposal is None else read_plan(proposal, analysis)
        now = self.clock()
        with self.write() as db:
            stored, answer = proposals.submit(self, db, identity, submission, verdict, asked, now, reading)
            if not stored:
                return False, answer
        self._announce_events()
        return True, answer

    def list_version(self) -> ListVersion:
        with self.single() as db:
            return proposals.list_version(db, self.clock())

    def caller_and_list_version(self, token_sha256: str) -> tuple[Identity | None, ListVersion]:
        """`resolve_token` and `list_version` in one statement, for the idle poll: the token is read
        from the database on every poll (a revocation refuses the very next one), at the cost of
        one statement rather than two."""
        with self.single() as db:
            return proposals.caller_and_list_version(db, token_sha256, self.clock())

    LIST_BATCH: Final = 500

    def list_proposals(
        self,
        state: State | None,
        before_seq: int | None,
        limit: int,
        wanted: ListFilter | None = None,
        reviewer: str = "",
    ) -> ProposalPage:
        """Newest first, the rows `wanted` keeps for `reviewer` (`reviewer.service.listing`); the state
        is derived with `rules.state_of`, in one place rather than in each database's SQL dialect."""
        wanted = replace(wanted or ListFilter(), state=state)
        now = self.clock()
        with self.read() as db:
            chooser = Chooser(wanted, self.policy, reviewer, now, proposals.reading_in(db))
            chosen, next_seq = proposals.listed_rows(db, chooser, before_seq, limit, self.LIST_BATCH)
            approvals = proposals.approvals_recorded(db, chosen)
        return proposals.page(chosen, next_seq, now, approvals)

    def get_record(self, identity: Identity, proposal_id: str) -> ProposalRecord:
        now = self.clock()
        with self.read() as db:
            return proposals.get_record(self, db, identity, proposal_id, now)

    def get_revision_body(self, identity: Identity, proposal_id: str, revision: int) -> bytes:
        with self.read() as db:
            return proposals.get_revision_body(db, identity, proposal_id, revision)

    def decision_state(self, identity: Identity, proposal_id: str) -> DecisionState:
        with self.read() as db:
            return proposals.decision_state(self, db, identity, proposal_id)

    # decisions and quorum

    def figures(self, latency_bounds: Sequence[float]) -> Figures:
        """What `/metrics` reports of the queue every replica shares, read in one transaction."""
        now = self.clock()
        with self.read() as db:
            return figures.read(self, db, now, latency_bounds)

    def decide(
        self, identity: Identity, proposal_id: str, request: DecisionRequest, idempotency_key: str
    ) -> tuple[bool, DecisionState]:
        """Record a decision; answers (True, the first answer) for a retry of an earlier request."""
        fingerprint = idempotency.fingerprint(proposal_id, request)
        now = self.clock()
        with self.write() as db:
            replayed, answer = decisions.decide(
                self, db, identity, proposal_id, request, idempotency_key, fingerprint, now
            )
            if replayed or request.decision == "request_changes":
                # A replay wrote nothing. A request for changes returns here too, without waking the
                # delivery loop: its event is sent on the loop's next pass (or the next announcement).
                return replayed, answer
        self._announce_events()
        return False, answer

    def reevaluate_pending(self) -> int:
        """Evaluate every pending proposal under the policy this store was opened with (a restart
        with a changed policy), and record what that decides: a reject or an approval by policy
        (its trail event says it was evaluated again), or a quorum the approvals so far now meet.
        Returns how many proposals it decided."""
        now = self.clock()
        with self.read() as db:
            candidates = decisions.pending_candidates(db, now)
        decided = 0
        for proposal_id, revision in candidates:
            with self.write() as db:
                if decisions.reevaluate(self, db, proposal_id, revision, now):
                    decided += 1
        return decided

    # runs and claims

    def claim(
        self, identity: Identity, proposal_id: str, request: ClaimRequest, idempotency_key: str
    ) -> tuple[bool, Claim]:
        """Take the approval for one run; answers (True, the first answer) for a retry of the same claim.

        Refusals in order: 404 (not this agent's proposal), 412 (not the latest revision and digest),
        409 (not approved now, naming who holds it when it is claimed): `rules.check_claim`.
        """
        fingerprint = idempotency.fingerprint(proposal_id, request)
        now = self.clock()
        with self.write() as db:
            answer = runs.claim_approval(
                self, db, identity, proposal_id, request, idempotency_key, fingerprint, now
            )
        if self.on_event is not None:  # its lease's end is a deadline: `run.unknown` goes out when it passes
            self.on_event()
        return answer

    def check_report_allowed(self, identity: Identity, proposal_id: str, idempotency_key: str | None) -> None:
        """Refuse a report before its body is read: a revoked token (401), a proposal this agent cannot
        see (404), or no claim of this agent's still waiting for its report (409).

        A report may be 64 MB; an agent without an open claim must not make the service read it.
        The claim the body names is checked again once it is read (`rules.check_report`). A retry
        under an Idempotency-Key already answered goes through, to get its first answer again.
        """
        with self.read() as db:
            runs.check_report_allowed(db, identity, proposal_id, idempotency_key, self.clock)

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
        fingerprint = "" if idempotency_key is None else idempotency.fingerprint(proposal_id, report)
        now = self.clock()
        with self.write() as db:
            replayed, answer = runs.record_execution(
                self, db, identity, proposal_id, report, body, idempotency_key, fingerprint, now
            )
            if replayed:
                return True, answer
        self._announce_events()
        return False, answer

    def record_refusal(
        self, identity: Identity, proposal_id: str, report: RefusalReport, idempotency_key: str
    ) -> tuple[bool, DecisionState]:
        """Store an executor's refusal of an approval before its claim; answers (True, the first
        answer) for a retry under its key. Refusals in order: 404 (not this agent's proposal), 412
        (no revision stored with that digest). The proposal's state does not change."""
        fingerprint = idempotency.fingerprint(proposal_id, report)
        now = self.clock()
        with self.write() as db:
            return runs.record_refusal(
                self, db, identity, proposal_id, report, idempotency_key, fingerprint, now
            )

    def list_executions(self, identity: Identity, proposal_id: str) -> bytes:
        """The JSON of `ExecutionHistory`: the reports stored for a proposal, oldest first, as sent.

        Each report's calls and audit log are spliced in as the bytes the agent sent (msgspec `Raw`),
        never decoded into objects: a stored 32 MB report costs about its bytes to read, not gigabytes.
        """
        with self.read() as db:
            rows = runs.execution_rows(db, identity, proposal_id)
        return runs.execution_history(proposal_id, rows)

    # the trail's Merkle log

    def log_earlier_events(self) -> int:
        """Append to the log the trail events an older release wrote without logging them (before
        the log, or as a replica during an upgrade); how many."""
        with self.write() as db:
            return trail.catch_up(db)

    def close_open_proposals(self, reason: str) -> list[str]:
        """`reviewer db reopen`: close every proposal a restored copy left open (`proposals.CLOSE`)."""
        now = self.clock()
        with self.write() as db:
            return proposals.close_open(db, reason, now)

    def trail_head(self, since: int | None = None) -> trail.Head:
        """The log's size and root now, with the consistency proof from `since` entries when that
        is a size the log had (one snapshot, so the proof is of this very root)."""
        with self.read() as db:
            return trail.head(db, since)

    def trail_proof(self, index: int, size: int | None = None) -> trail.Proof | None:
        """Entry `index` and its inclusion proof in the tree of `size` entries (default: all the log
        holds); None when the log holds no such entry or was never that size."""
        with self.read() as db:
            return trail.proof(db, index, size)

    def trail_frontier(self, leaves: int) -> list[bytes]:
        with self.read() as db:
            return trail.frontier(db, leaves)

    def trail_entries(self, start: int, end: int) -> list[tuple[int, bytes, bytes]]:
        with self.read() as db:
            return trail.entries(db, start, end)

    # the notifications' outbox

    def _announce_events(self) -> None:
        """After the transaction that wrote events committed (a refusal rolled back and wrote none)."""
        if getattr(self.emitted, "pending", False):
            self.emitted.pending = False
            if self.on_event is not None:
                self.on_event()

    def sweep_events(self) -> int:
        """Write the events that time alone makes true: reminders and escalation steps of pending
        proposals, claims whose lease ran out without a report, and pending proposals and unclaimed
        approvals that expired. Answers how many were written; any replica may sweep."""
        if not self.notifying.targets:
            return 0
        now = self.clock()
        if self.policy.escalates:
            with self.read() as db:  # the environments of revisions not seen yet, off the write lock
                escalations.due_rows(self, db, now)
        with self.write() as db:
            written = outbox.sweep(self, db, now) + escalations.sweep(self, db, now)
        self._announce_events()
        return written

    def claim_deliveries(self, target: str, limit: int, lease: float) -> list[Delivery]:
        """Take up to `limit` deliveries that are due, for `lease` seconds: another replica (or this
        one's next pass) takes a row again only once the lease ran out, as after a crash mid-send."""
        now = self.clock()
        with self.outbox_write() as db:
            return outbox.claim_deliveries(db, target, limit, lease, now, self.ROW_LOCK)

    def finish_delivery(self, delivery_id: int, error: str | None, retry_at: float | None) -> None:
        """Record an attempt: delivered (`error` None), retried at `retry_at`, or failed for good."""
        now = self.clock()
        with self.outbox_write() as db:
            outbox.finish_delivery(db, delivery_id, error, retry_at, now)

    def prune_outbox(self) -> tuple[int, int]:
        """Delete deliveries finished longer ago than `keep_deliveries`, and give up on each target's
        oldest waiting ones beyond its `backlog`; answers how many of each."""
        now = self.clock()
        with self.outbox_write() as db:
            return outbox.prune(db, self.notifying, now)

    def list_deliveries(self, limit: int = 100) -> list[Delivery]:
        """The newest deliveries first, for `reviewer notify list`."""
        with self.read() as db:
            return outbox.list_deliveries(db, limit)
