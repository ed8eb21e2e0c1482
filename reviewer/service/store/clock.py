"""The queue's time: one that only moves forward, read on PostgreSQL from the database's clock.

Expiry (a pending proposal gone stale, an approval not run in time) is decided by comparing "now"
with a stored deadline. If "now" could step back (an NTP correction, an operator setting the date, a
replica whose clock runs behind), an expired approval would be claimable again, and two replicas
would answer one question two ways. So the store never reads a process's clock as is:

- `ForwardClock` never answers earlier than a time it already gave, nor earlier than the latest
  time the queue recorded (its trail's newest entry, and the time `TimeKeeper` writes down every
  few seconds and at shutdown, both read when the store opens, so a restart on a clock set back
  changes nothing). A step back is logged once; the queue's time then stands still until the clock
  catches up.
- `DatabaseTime` (PostgreSQL, on the real clock) reads the database's clock, which every replica
  shares, and between two readings advances by this process's monotonic clock, which no step of the
  system clock moves: replicas agree to within the time of one round trip.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from typing import Final

from reviewer.service.store.base import Clock

STEP_LOGGED: Final = 1.0
"""Seconds a clock must step back before it is logged (smaller steps are scheduling noise)."""
RESAMPLE_EVERY: Final = 30.0
"""Seconds between two readings of the database's clock."""

logger = logging.getLogger("reviewer.service.store")


class ForwardClock:
    """`source`, never earlier than a time already given or the floor it was raised to."""

    def __init__(self, source: Clock) -> None:
        self.source = source
        self._latest = float("-inf")
        self._lock = threading.Lock()
        self._stepped_back = False

    def raise_floor(self, recorded: float) -> None:
        """Never answer earlier than `recorded`, a time the queue already wrote down."""
        with self._lock:
            self._latest = max(self._latest, recorded)

    def __call__(self) -> float:
        now = self.source()
        with self._lock:
            if now >= self._latest:
                self._latest = now
                self._stepped_back = False
                return now
            latest, behind = self._latest, self._latest - now
            announce = behind >= STEP_LOGGED and not self._stepped_back
            if announce:
                self._stepped_back = True
        if announce:
            logger.warning(
                "the clock is %.1f s behind a time the queue already used: the queue's time stays at "
                "%.3f until the clock catches up (no expiry or decision moves back)",
                behind,
                latest,
            )
        return latest


class DatabaseTime:
    """The database's clock, read every `RESAMPLE_EVERY` seconds with `read_database_clock`, and
    advanced in between by `monotonic`. A reading that fails (the database is down) keeps the last
    one; with none yet, the failure is raised (the request meets the outage anyway)."""

    def __init__(
        self,
        read_database_clock: Callable[[], float],
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._read = read_database_clock
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._base: tuple[float, float] | None = None
        """(the database's time, the monotonic time it was read at)."""

    def __call__(self) -> float:
        base = self._base
        elapsed = 0.0 if base is None else self._monotonic() - base[1]
        if base is None or elapsed >= RESAMPLE_EVERY:
            try:
                base = self._sample()
            except Exception:
                if base is None:
                    raise
            else:
                elapsed = 0.0
        return base[0] + elapsed

    def _sample(self) -> tuple[float, float]:
        before = self._monotonic()
        read = self._read()
        after = self._monotonic()
        base = (read, (before + after) / 2)  # the reading was taken half way through the round trip
        with self._lock:
            self._base = base
        return base


KEEP_EVERY: Final = 5.0
"""Seconds between two writes of the queue's time (one statement under the write lock)."""


class TimeKeeper:
    """A thread that calls `keep` (`QueueStore.keep_time`) every `KEEP_EVERY` seconds and once more
    when stopped; a failure (the database away) is tried again at the next turn."""

    def __init__(self, keep: Callable[[], None], every: float = KEEP_EVERY) -> None:
        self._keep = keep
        self._every = every
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="reviewer-time-keeper", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        self._thread.join()
        self._keep_quietly()

    def _run(self) -> None:
        while not self._stopping.wait(self._every):
            self._keep_quietly()

    def _keep_quietly(self) -> None:
        try:
            self._keep()
        except Exception:  # an outage is logged by the store's health; the next turn tries again
            logger.debug("keeping the queue's time failed", exc_info=True)
