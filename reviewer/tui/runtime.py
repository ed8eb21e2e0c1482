"""How the app tunes the interpreter and its garbage collector while it runs: threads handed the
interpreter more often (`SWITCH_INTERVAL`), and the screen's claims (`Foreground`), which make the
loader's completion wait and pause the collector until the screen's answer is painted."""

from __future__ import annotations

import gc
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Final

SWITCH_INTERVAL: Final = 0.001
"""Seconds a thread keeps the interpreter while another waits for it, while the app runs (Python's
default is 0.005). The terminal's writer thread waited that long for each frame the event loop had
just drawn, and the event loop as long behind the loader's thread: a fifth of opening a large plan
while its checks run."""

LONGEST_YIELD: Final = 0.25
"""Seconds the completion waits for the screen at most, at one pause: it is never starved."""

LONGEST_CLAIM: Final = 2.0
"""Seconds after the last claim when claims still held are ignored (a screen closed before it was
painted never releases its claim): the completion then runs at full speed again."""


@contextmanager
def interpreter_handed_over_often() -> Iterator[None]:
    """Hand the interpreter between threads every `SWITCH_INTERVAL` inside; the previous interval
    returns after."""
    previous = sys.getswitchinterval()
    sys.setswitchinterval(SWITCH_INTERVAL)
    try:
        yield
    finally:
        sys.setswitchinterval(previous)


class Foreground:
    """The screen's claims on the interpreter. Python runs one thread at a time, so a completion
    checking 100,000 calls would take half of every frame a key asks for; while the screen holds a
    claim (from a key until its answer is painted, from a screen's push until its first frame, while
    a view's own worker computes what it shows) the completion waits at its next pause, which comes
    every few milliseconds of its work. Claims count: the completion goes on once every one is
    released. Claimed and released on the event loop only.

    The cyclic garbage collector waits too, from the first claim until the last is released: its
    collections, run in whichever thread allocates, took a tenth of the main thread's time while a
    large plan opened (more with the plan's objects traversed). A pause ends once it is
    `LONGEST_CLAIM` old (`expire`, which the app calls four times as often), and a collector
    already stopped by someone else is left as it is."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._claims = 0
        self._claimed_at = -LONGEST_CLAIM
        self._free = threading.Event()
        self._free.set()
        self._collector_paused_at: float | None = None

    def claim(self) -> None:
        self._claimed_at = self._clock()
        self._claims += 1
        self._free.clear()
        if self._claims == 1 and gc.isenabled():
            gc.disable()
            self._collector_paused_at = self._claimed_at

    def release(self) -> None:
        self._claims = max(0, self._claims - 1)
        if not self._claims:
            self._free.set()
            self._resume_collector()

    def expire(self) -> None:
        """The collector runs again once paused for `LONGEST_CLAIM`: claims held that long (keys
        pressed without end, a screen closed unpainted) no longer keep it waiting."""
        paused_at = self._collector_paused_at
        if paused_at is not None and self._clock() - paused_at >= LONGEST_CLAIM:
            self._resume_collector()

    def close(self) -> None:
        """The app is closing: the collector runs again, whatever claims are left."""
        self._resume_collector()

    def _resume_collector(self) -> None:
        if self._collector_paused_at is not None:
            self._collector_paused_at = None
            gc.enable()

    @property
    def claimed(self) -> bool:
        return self._claims > 0

    def wait(self) -> None:
        """The completion's pause: return at once, or when the screen is done (at most
        `LONGEST_YIELD`, and not at all for claims older than `LONGEST_CLAIM`)."""
        if self._clock() - self._claimed_at < LONGEST_CLAIM:
            self._free.wait(LONGEST_YIELD)
