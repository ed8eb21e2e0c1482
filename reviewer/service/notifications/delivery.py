"""The delivery loop: claim due rows of the outbox, send each, record how it went.

One thread per target, so a receiver that hangs delays only its own deliveries, never another
target's nor the queue's requests (a claim is one short transaction, the send happens outside any).
A failed attempt is retried with exponential backoff until the row's deadline, then marked failed
and logged. Nothing lives only in memory: a service killed between an event's commit and its
delivery sends it after the restart, under the same `Reviewer-Delivery` id. The clock is injected
and `deliver_due` is one pass, so tests move time instead of waiting out a backoff.
"""

from __future__ import annotations

import logging
import sqlite3
import threading
import time
from collections.abc import Sequence
from typing import Final

from reviewer.service.errors import DatabaseUnusable
from reviewer.service.notifications.sender import DeliveryFailed, Sender
from reviewer.service.store import Clock, Delivery, QueueStore

FIRST_RETRY: Final = 2.0
LONGEST_RETRY: Final = 300.0
BATCH: Final = 1
"""Rows a thread claims at a time: one, so a lease covers one attempt and no row waits in a batch
behind a hanging receiver while its lease runs out."""
DEFAULT_POLL_INTERVAL: Final = 0.25
"""How often each target's thread looks for due rows (an idle look is one indexed statement); an
event committed by this replica wakes it at once, one committed by another waits for this."""
DEFAULT_SWEEP_INTERVAL: Final = 5.0
"""How often reminders and runs that never reported are looked for; an expiry or a lease that ends
sooner is looked for when it ends (`Deliverer.next_sweep_at`)."""
PAST_DEADLINE: Final = 0.05
"""Seconds the sweep waits past a deadline, so the deadline has passed by the store's clock too."""
PRUNE_INTERVAL: Final = 60.0
"""How often finished deliveries past their retention are deleted, and backlogs trimmed."""

log = logging.getLogger("reviewer.service.notifications")


def retry_delay(attempts: int) -> float:
    """Seconds before the next attempt after `attempts` failed ones: 2, 4, 8 ... up to five minutes."""
    return float(min(FIRST_RETRY * 2 ** max(attempts - 1, 0), LONGEST_RETRY))


def next_attempt(attempts: int, now: float, give_up_at: float) -> float | None:
    """When to try again after `attempts` failures, or None once that would pass the deadline."""
    at = now + retry_delay(attempts)
    return at if at <= give_up_at else None


def is_database_error(error: BaseException) -> bool:
    """Whether `error` is the database's driver saying it cannot answer (down, restarting, refused)."""
    if isinstance(error, sqlite3.Error | DatabaseUnusable):
        return True
    return type(error).__module__.split(".")[0] == "psycopg"


class DatabaseOutage:
    """Says once, naming the database, that it stopped answering the delivery loop, and once that it
    answers again, however many threads and passes meet it meanwhile (no traceback each pass)."""

    def __init__(self, location: str, clock: Clock) -> None:
        self.location = location
        self.clock = clock
        self.since: float | None = None
        self._lock = threading.Lock()

    def failed(self, error: BaseException) -> bool:
        """Note a failure; whether it was the database's (said once), else the caller logs it."""
        if not is_database_error(error):
            return False
        with self._lock:
            if self.since is None:
                self.since = self.clock()
                first_line = (str(error).strip().splitlines() or [""])[0][:300]
                log.warning(
                    "the database %s does not answer (%s: %s); notifications wait for it, nothing is lost",
                    self.location,
                    type(error).__name__,
                    first_line,
                )
        return True

    def answered(self) -> None:
        if self.since is None:
            return
        with self._lock:
            if self.since is None:
                return
            seconds, self.since = self.clock() - self.since, None
        log.info("the database %s answers again after %.0f s; notifications go on", self.location, seconds)


class Deliverer:
    """Delivers the store's outbox to `senders`; `start` and `stop` run it in threads."""

    def __init__(
        self,
        store: QueueStore,
        senders: Sequence[Sender],
        *,
        clock: Clock = time.time,
        attempt_timeout: float = 5.0,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        sweep_interval: float = DEFAULT_SWEEP_INTERVAL,
    ) -> None:
        self.store = store
        self.senders = {sender.name: sender for sender in senders}
        self.clock = clock
        self.lease = attempt_timeout * 2 + 5
        """Longer than an attempt can take; a replica that died mid-attempt leaves the row to another
        (or to itself after a restart) once this passed."""
        self.poll_interval = poll_interval
        self.sweep_interval = sweep_interval
        self._next_sweep = 0.0
        self._next_prune = 0.0
        self._stopping = threading.Event()
        self._wakes = {name: threading.Event() for name in self.senders}
        self._sweep_wake = threading.Event()
        self._threads: list[threading.Thread] = []
        self.outage = DatabaseOutage(store.location, clock)

    def deliver_due(self) -> int:
        """One pass: write the events time made true, then try each due delivery once; how many were tried."""
        self.sweep()
        tried = 0
        for name in self.senders:
            while claimed := self._deliver_batch(name):
                tried += claimed
        return tried

    def sweep(self) -> None:
        now = self.clock()
        if now >= self._next_sweep:
            self._next_sweep = now + self.sweep_interval
            self.store.sweep_events()
        self.prune()

    def prune(self) -> None:
        """Delete what is past its retention and trim each target's backlog, once a `PRUNE_INTERVAL`."""
        now = self.clock()
        if now >= self._next_prune:
            self._next_prune = now + PRUNE_INTERVAL
            _deleted, dropped = self.store.prune_outbox()
            if dropped:
                log.warning("gave up on %d notifications: a target had too many waiting", dropped)

    def _deliver_batch(self, target: str) -> int:
        deliveries = self.store.claim_deliveries(target, BATCH, self.lease)
        for delivery in deliveries:
            self._attempt(delivery)
        return len(deliveries)

    def _attempt(self, delivery: Delivery) -> None:
        try:
            try:
                self.senders[delivery.target].send(delivery)
            except DeliveryFailed:
                raise
            except Exception as error:  # a sender's own bug fails the attempt, not the loop
                log.exception("sending to %s raised", delivery.target)
                raise DeliveryFailed(f"the sender raised {type(error).__name__}") from None
        except DeliveryFailed as failure:
            retry_at = next_attempt(delivery.attempts + 1, self.clock(), delivery.give_up_at)
            self.store.finish_delivery(delivery.id, str(failure), retry_at)
            if retry_at is None:
                log.warning(
                    "gave up on %s of %s to %s after %d attempts: %s",
                    delivery.event,
                    delivery.proposal_id,
                    delivery.target,
                    delivery.attempts + 1,
                    failure,
                )
            return
        self.store.finish_delivery(delivery.id, None, None)

    # the threads

    def start(self) -> None:
        """A thread per target, and one that sweeps (never held up by a receiver that hangs)."""
        self._threads = [
            threading.Thread(target=self._run, args=(name,), name=f"notify {name}", daemon=True)
            for name in self.senders
        ]
        self._threads.append(threading.Thread(target=self._sweep_loop, name="notify sweep", daemon=True))
        self.store.on_event = self.wake
        for thread in self._threads:
            thread.start()

    def wake(self) -> None:
        """An event was committed here: each target's thread looks now, not at its next poll, and the
        sweep asks again when the next deadline passes."""
        for wake in self._wakes.values():
            wake.set()
        self._sweep_wake.set()

    def _run(self, target: str) -> None:
        while not self._stopping.is_set():
            tried = 0
            self._wakes[target].clear()  # before looking: a wake from here on is looked for again
            tried = self.pass_for(target)
            if tried < BATCH:
                self._wakes[target].wait(self.poll_interval)

    def pass_for(self, target: str) -> int:
        """One look for `target`'s due rows, whatever fails: a database that does not answer is said
        once (`outage`), anything else is logged with its traceback; how many were tried."""
        try:
            tried = self._deliver_batch(target)
        except Exception as error:  # a database hiccup must not end notifications for good
            if not self.outage.failed(error):
                log.exception("delivering notifications to %s failed; trying again", target)
            return 0
        self.outage.answered()
        return tried

    def next_sweep_at(self, last_sweep: float) -> float:
        """When the sweep looks again: a sweep interval after `last_sweep`, or sooner when a proposal's
        deadline (its pending time, its approval's, a claim's lease) passes first, so that deadline's
        `proposal.expired` or `run.unknown` goes out when it happens, not up to an interval later."""
        next_deadline = self.store.list_version().next_deadline
        due = last_sweep + self.sweep_interval
        return due if next_deadline is None else min(due, next_deadline + PAST_DEADLINE)

    def _sweep_loop(self) -> None:
        """Sweep when `next_sweep_at` says, asking again whenever an event committed here (a new
        proposal, a decision) may have brought a deadline sooner than the one waited for; a time
        once waited for is never put off by asking again (its deadline no longer counts as next).
        The wake is cleared before the deadlines are read, never between the read and the wait: a
        wake after the read ends the wait at once, and the deadline it brought is read again."""
        last_sweep = self.clock()
        due = last_sweep + self.sweep_interval
        while not self._stopping.is_set():
            self._sweep_wake.clear()
            try:
                if self.clock() >= due:
                    last_sweep = self.clock()
                    self.store.sweep_events()
                    self.prune()
                    due = self.next_sweep_at(last_sweep)
                else:
                    due = min(due, self.next_sweep_at(last_sweep))
            except Exception as error:
                if not self.outage.failed(error):
                    log.exception("looking for reminders and unreported runs failed; trying again")
                due = self.clock() + self.sweep_interval
            self._sweep_wake.wait(max(due - self.clock(), 0.0))

    def stop(self, timeout: float = 10.0) -> None:
        """Stop the threads after their current attempt (bounded by the attempt's timeout)."""
        self._stopping.set()
        self.store.on_event = None
        self.wake()
        for thread in self._threads:
            thread.join(timeout)
        self._threads.clear()
