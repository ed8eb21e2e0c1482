"""Long polls: a request that asks to `wait` is answered when what it asks about changes, or when its
wait is up, whichever comes first.

An executor waiting for a decision, or a reviewer's app waiting for the list to change, used to ask
every couple of seconds; now it asks once, with `?wait=30`, and the answer comes within milliseconds
of the write that changes it. A waiting request is a coroutine on the event loop, parked on an
`asyncio.Event`, never a thread: a thousand waiters cost a thousand small objects. The store tells
`Waits` which proposals each committed write changed (`QueueStore.on_change`, from the writing
thread); on PostgreSQL, other replicas' writes arrive the same way through `LISTEN`
(`QueueStore.hear_other_writers`). Each wake reads the answer again, off the event loop as every
store call. A waiter also reads again every `RECHECK_SECONDS` and when the answer's own deadline
passes (a pending proposal expires by time alone, which no write announces): the bound on anything
no notification reaches (SQLite written by another process, a notification lost while the listening
connection was away). A server that shuts down answers every waiter at once (`release`).
"""

from __future__ import annotations

import asyncio
import contextlib
import math
from collections.abc import Awaitable, Callable, Iterator
from typing import Final, TypeVar

Answer = TypeVar("Answer")

MAX_WAIT: Final = 60.0
"""The longest a request waits, whatever it asks: under the 60 s a proxy such as nginx waits for an
answer by default (`proxy_read_timeout`)."""
RECHECK_SECONDS: Final = 5.0
"""A waiting request reads its answer again at least this often, even when nothing woke it."""
DEADLINE_MARGIN: Final = 0.01
"""Seconds after an answer's deadline to read it again, so the read finds the deadline passed."""
ANY_PROPOSAL: Final = ""
"""The key of a request waiting for any proposal to change (the list)."""


class Waits:
    """The requests waiting for a change, by proposal (`ANY_PROPOSAL` for the list's)."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.waiting: dict[str, set[asyncio.Event]] = {}
        self.closing = False
        """Set once the server shuts down: no request waits from then on."""
        self.held = 0
        """How many requests wait now: a number, which `/metrics` reads from its own thread."""

    def changed(self, proposal_ids: frozenset[str] | None) -> None:
        """The store's `on_change`, from any thread: wake the requests waiting on these proposals
        and on the list (every request, for None)."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return  # nobody has waited yet
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits any more
            loop.call_soon_threadsafe(self._wake, proposal_ids)

    def _wake(self, proposal_ids: frozenset[str] | None) -> None:
        keys = self.waiting.keys() if proposal_ids is None else {ANY_PROPOSAL, *proposal_ids}
        for key in list(keys):
            for event in self.waiting.get(key, ()):
                event.set()

    def release(self) -> None:
        """The server is shutting down: every waiting request is answered now, and none waits again."""
        self.closing = True
        self._wake(None)

    def count(self) -> int:
        return self.held

    @contextlib.contextmanager
    def watching(self, key: str) -> Iterator[asyncio.Event]:
        """An event set by each change to `key` (a proposal id, or `ANY_PROPOSAL`) while the block runs."""
        self.loop = asyncio.get_running_loop()
        event = asyncio.Event()
        self.waiting.setdefault(key, set()).add(event)
        self.held += 1
        try:
            yield event
        finally:
            self.held -= 1
            events = self.waiting.get(key)
            if events is not None:
                events.discard(event)
                if not events:
                    del self.waiting[key]

    async def hold(
        self,
        key: str,
        wait: float,
        read: Callable[[], Awaitable[Answer]],
        unchanged: Callable[[Answer], bool],
        seconds_to_change: Callable[[Answer], float] = lambda answer: math.inf,
    ) -> Answer:
        """`read()`'s answer once `unchanged` says it changed, or once `wait` seconds passed (at most
        `MAX_WAIT`): read again at each change to `key`, every `RECHECK_SECONDS`, and when
        `seconds_to_change(answer)` (the answer's own deadline) has passed."""
        if wait <= 0 or self.closing:
            return await read()
        loop = asyncio.get_running_loop()
        until = loop.time() + min(wait, MAX_WAIT)
        with self.watching(key) as woken:  # before the first read: a change after it wakes this
            answer = await read()
            while unchanged(answer) and not self.closing:
                left = until - loop.time()
                if left <= 0:
                    break
                # Off the loop: the answer's deadline is read against the store's clock, which on
                # PostgreSQL is the database's and may wait on it. One already passed is rechecked.
                deadline = await asyncio.to_thread(seconds_to_change, answer)
                pause = min(left, RECHECK_SECONDS, deadline + DEADLINE_MARGIN if deadline > 0 else math.inf)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(woken.wait(), pause)
                woken.clear()
                answer = await read()
        return answer
