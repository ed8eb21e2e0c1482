"""The database's bad day, as the queue meets it: which failures are outages, what this replica
remembers of them, and the bound on a transaction the database does not answer.

An outage (the database down, hung, out of space, locked past its timeout, out of connections) is
not a crash of the queue: every request meeting one is answered `503` with `Retry-After`
(`DatabaseUnavailable`), its cause logged in one line, and the connection kept. Each backend says
which of its driver's errors are outages (`Outage`); `DatabaseHealth.guarded` turns them into that
answer around every transaction, remembers whether writes fail (for `/readyz`), and, for a moment
after the database did not answer at all, refuses at once rather than let every request wait out
its own timeout. `Watchdog` bounds a transaction from outside: a database that accepted the query
and then stopped answering (a paused server, a partition) is cut off by the backend's `on_expiry`.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Final

from reviewer.service.errors import DatabaseUnavailable, ServiceError

RETRY_AFTER: Final = 2
"""Seconds a client is told to wait after an outage (`Retry-After`)."""
HOLDOFF: Final = 2.0
"""Seconds after the database did not answer at all during which requests are refused at once."""
LOG_EVERY: Final = 30.0
"""An outage that lasts is logged again at most this often (with how many requests it refused)."""

logger = logging.getLogger("reviewer.service.store")


@dataclass(frozen=True)
class Outage:
    """What a backend makes of a driver's error that is an outage."""

    cause: str
    """One line for the operator and the client, without the database's password."""
    unreachable: bool = False
    """The database did not answer at all (refused, hung, cut off): others are refused at once, a moment."""


OutageOf = Callable[[BaseException], Outage | None]
"""A backend's reading of an error: the outage it is, or None for a bug (answered 500, as before)."""


class DatabaseHealth:
    """What this replica knows of its database: whether writes fail now, and when it last did not answer."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self.serving = False
        """Set when the store serves requests (`create_app`): outages are logged from then on (a
        command, or a store being opened, says its one line itself)."""
        self.write_failure: str | None = None
        """The cause of the last write that failed for an outage, until a write succeeds."""
        self._unreachable_until = 0.0
        self._unreachable_cause = ""
        self._logged_cause: str | None = None
        self._logged_at = 0.0
        self._refused_since_logged = 0

    @contextmanager
    def guarded(self, outage_of: OutageOf, *, writing: bool) -> Iterator[None]:
        """Run one transaction: an outage inside it leaves as `DatabaseUnavailable`; a write that
        commits clears the replica's write failure."""
        self._refuse_while_unreachable()
        try:
            yield
        except ServiceError:
            raise
        except Exception as error:
            outage = outage_of(error)
            if outage is None:
                raise
            self._failed(outage, writing)
            raise DatabaseUnavailable(outage.cause, RETRY_AFTER) from None
        if writing and self.write_failure is not None:
            with self._lock:
                self.write_failure = None
            logger.warning("the queue's database takes writes again")

    def _refuse_while_unreachable(self) -> None:
        if self._monotonic() < self._unreachable_until:
            self._count_refusal(self._unreachable_cause)
            raise DatabaseUnavailable(self._unreachable_cause, RETRY_AFTER)

    def _failed(self, outage: Outage, writing: bool) -> None:
        with self._lock:
            if writing:
                self.write_failure = outage.cause
            if outage.unreachable:
                self._unreachable_until = self._monotonic() + HOLDOFF
                self._unreachable_cause = outage.cause
        self._count_refusal(outage.cause)

    def _count_refusal(self, cause: str) -> None:
        """One log line when the cause changes, then at most one per `LOG_EVERY` while it lasts."""
        if not self.serving:
            return
        now = self._monotonic()
        with self._lock:
            self._refused_since_logged += 1
            if cause == self._logged_cause and now - self._logged_at < LOG_EVERY:
                return
            refused, self._refused_since_logged = self._refused_since_logged, 0
            self._logged_cause, self._logged_at = cause, now
        logger.warning(
            "the queue's database is unavailable: %s (%d request(s) answered 503 since the last such line)",
            cause,
            refused,
        )


@dataclass(order=True)
class _Bound:
    deadline: float
    order: int
    on_expiry: Callable[[], None] = field(compare=False)
    done: bool = field(default=False, compare=False)
    fired: bool = field(default=False, compare=False)


class Watchdog:
    """One thread that calls a block's `on_expiry` when the block outlasts its bound.

    The backend's `on_expiry` cuts the connection the block waits on, so the block fails at once
    with the driver's error instead of waiting for a database that may never answer."""

    def __init__(self, monotonic: Callable[[], float] = time.monotonic) -> None:
        self._monotonic = monotonic
        self._heap: list[_Bound] = []
        self._order = itertools.count()
        self._changed = threading.Condition()
        self._thread: threading.Thread | None = None

    @contextmanager
    def bound(self, seconds: float, on_expiry: Callable[[], None]) -> Iterator[_Bound]:
        """`on_expiry` is called (from the watchdog's thread) if the block has not ended `seconds`
        from now; the bound answers whether it fired."""
        entry = _Bound(self._monotonic() + seconds, next(self._order), on_expiry)
        with self._changed:
            earliest = not self._heap or entry < self._heap[0]
            heapq.heappush(self._heap, entry)
            if self._thread is None:
                self._thread = threading.Thread(target=self._watch, name="reviewer-watchdog", daemon=True)
                self._thread.start()
            elif earliest:
                self._changed.notify()
        try:
            yield entry
        finally:
            with self._changed:
                entry.done = True  # left in the heap; dropped when it comes up

    def _watch(self) -> None:
        while True:
            with self._changed:
                while self._heap and self._heap[0].done:
                    heapq.heappop(self._heap)
                if not self._heap:
                    self._changed.wait()
                    continue
                wait = self._heap[0].deadline - self._monotonic()
                if wait > 0:
                    self._changed.wait(wait)
                    continue
                expired = heapq.heappop(self._heap)
                expired.fired = True
            try:
                expired.on_expiry()
            except Exception:  # a connection already gone: nothing left to cut
                logger.debug("cutting a transaction past its bound failed", exc_info=True)
