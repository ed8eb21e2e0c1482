"""What every part of the store shares: the schema's version and constraints, how long each state
lasts, the settings a store is opened with, one open `Transaction`, and the `StoreState` the
aggregates' functions read (the store itself, which they never import)."""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final, Generic, Protocol, TypeVar

from reviewer.policy.bounded import PolicyEvaluator
from reviewer.policy.file import Policy
from reviewer.policy.verdict import Verdict
from reviewer.service.rules import Row
from reviewer.service.signed_decisions import PolicySigning

SCHEMA_VERSION: Final = 12
"""The version of the tables a database holds: 2 added claims, 3 reviewers' SSH keys and signed
decisions in the trail, 4 the notifications' outbox, 5 metrics tokens, token expiry and rotation,
6 requests for changes, 7 reviewers signed in by the team's provider and break-glass tokens, 8 the
trail's Merkle log and auditor tokens, 9 executors' refusals of approvals and the queue's clock, 10
reviewers' passkeys for the review pages, 11 the ends of reviewers' sign-ins and the approvals they
withdrew in the trail, 12 each proposal's reading stored for the list. An older database is
brought up to date by numbered steps (`reviewer.service.store.migrations`), a newer one refused."""
DECISION_CHECK: Final = "decision IN ('approve', 'reject', 'request_changes')"
TRAIL_EVENT_CHECK: Final = (
    "event IN ('submitted', 'approved', 'rejected', 'changes_requested', 'claimed', 'executed', "
    "'sign_in_ended', 'withdrawn')"
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
    """Targets that get only some events (a pager: `run.unknown`, or one escalation step:
    `proposal.escalated:2`), by name; the others get all."""
    remind_after: float | None = None
    give_up_after: float = DEFAULT_GIVE_UP_AFTER
    keep_deliveries: float = DEFAULT_KEEP_DELIVERIES
    """Seconds a finished delivery is kept; an event that time makes true (a reminder, an unknown
    outcome) is written only while it is younger than this, so a pruned one is never written again."""
    backlog: int = DEFAULT_BACKLOG


@dataclass(frozen=True)
class StoreSettings:
    """What every backend is opened with: the clock, how long each state lasts, the approval policy
    and how it is evaluated and signed, what the outbox is written for."""

    clock: Clock
    pending_ttl: float
    approval_ttl: float
    claim_lease: float = DEFAULT_CLAIM_LEASE
    policy: Policy | None = None
    policy_signing: PolicySigning | None = None
    """The queue's own key, to sign what the policy approves where signatures are required."""
    policy_evaluator: PolicyEvaluator | None = None
    """`serve`'s: evaluates in worker processes under a deadline, so the event loop serves meanwhile;
    without it (tests, one-off commands) the policy is evaluated in the calling thread."""
    notifying: Notifying = field(default_factory=Notifying)
    """`serve --notify`'s targets: without targets, no event is written."""


class Transaction(Protocol):
    """One open transaction: statements with `:name` parameters, rows readable by column name."""

    changed: set[str]
    """The proposals this transaction changed: once it commits, the store announces them, and the
    requests waiting on them wake (`QueueStore.on_change`)."""

    def one(self, sql: str, **params: Any) -> Row | None: ...
    def all(self, sql: str, **params: Any) -> list[Row]: ...
    def run(self, sql: str, **params: Any) -> int: ...


class StoreState(Protocol):
    """What the aggregates' functions read of the store they run in (`QueueStore` is one)."""

    clock: Clock
    pending_ttl: float
    approval_ttl: float
    claim_lease: float
    policy: Policy
    policy_signing: PolicySigning | None
    policy_evaluator: PolicyEvaluator | None
    verdicts: dict[tuple[str, int], Verdict]
    notifying: Notifying
    emitted: threading.local
    web_origin: str | None


class _Closable(Protocol):
    def close(self) -> None: ...


Connection = TypeVar("Connection", bound=_Closable)


class ThreadConnections(Generic[Connection]):
    """A backend's connections, one per thread (sqlite3 requires it, psycopg's are not shared
    between threads' transactions). A thread's connection lives as long as the thread: the server's
    worker threads come and go (anyio ends one idle for ten seconds), so each new one closes the
    connections of threads that ended, and a broken connection replaced is closed; the store's
    `close` closes them all."""

    def __init__(self) -> None:
        self.local = threading.local()
        """This thread's `connection` (and whatever else a backend keeps with it)."""
        self._every: dict[threading.Thread, Connection] = {}
        self._lock = threading.Lock()

    def current(self) -> Connection | None:
        connection: Connection | None = getattr(self.local, "connection", None)
        return connection

    def keep(self, connection: Connection) -> Connection:
        """`connection` as this thread's from now on."""
        thread = threading.current_thread()
        with self._lock:
            ended = [owner for owner in self._every if owner is not thread and not owner.is_alive()]
            closing = [self._every.pop(owner) for owner in ended]
            replaced = self._every.get(thread)
            if replaced is not None and replaced is not connection:
                closing.append(replaced)
            self._every[thread] = connection
        for old in closing:
            with contextlib.suppress(Exception):  # a broken one may fail to close: it is dropped anyway
                old.close()
        self.local.connection = connection
        return connection

    def discard(self) -> None:
        """Close this thread's connection: the next `current` is None, and a new one is opened."""
        thread = threading.current_thread()
        with self._lock:
            connection = self._every.pop(thread, None)
        if hasattr(self.local, "connection"):
            del self.local.connection
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()

    def __len__(self) -> int:
        """How many connections are open."""
        return len(self._every)

    def close(self) -> None:
        with self._lock:
            every = list(self._every.values())
            self._every.clear()
        for connection in every:
            connection.close()
        self.local = threading.local()
