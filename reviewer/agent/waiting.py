"""Waiting through a queue that is away: a restart, an upgrade, a proxy answering 502 meanwhile.

An agent that waits for a decision outlives the queue's process: the decision is in the queue's
database, and the queue comes back to it. `Patience` runs one queue request again with backoff while
the queue does not answer (or answers that it failed), for as long as the caller's deadline allows,
and says once that the queue is away and once that it is back. A queue that hangs (its database
paused, a proxy holding the connection) fails no request for a long while: the client's own timeout
and retries take most of a minute. So a request still unanswered after `silence` seconds is said
too, once per outage, and the wait goes on. Only requests that are safe to send
again go through it: reads, and writes under a key the queue stores them by (a submission is stored
by its revision, a claim and a report by their Idempotency-Key), so none is made twice.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Final, TypeVar

from reviewer.queue.refusals import QueueServerError, QueueUnreachable, UntrustedCertificate

log = logging.getLogger("reviewer.agent")

Result = TypeVar("Result")
Say = Callable[[str], None]

MAX_BACKOFF: Final = 30.0
"""The longest pause between two tries: a queue back after an upgrade is found within this."""
DEFAULT_SILENCE: Final = 10.0
"""Seconds a request may go unanswered before the wait says so: the client's timeout for one try."""


def is_away(error: BaseException) -> bool:
    """Whether an error means the queue is not there now (no answer, or a 5xx of its own or a proxy's),
    rather than a refusal that sending again cannot change. An untrusted certificate stays as it is."""
    if isinstance(error, UntrustedCertificate):
        return False
    return isinstance(error, QueueUnreachable | QueueServerError)


def _log_warning(text: str) -> None:
    log.warning("%s", text)


@dataclass
class Patience:
    """Backoff through the queue's absence, one instance per agent so it says each outage once.

    `clock` and `sleep` are the monotonic clock and the pause (a test gives its own); `say` gets the
    two lines an outage makes (a logger's warning by default); `first_pause` is the first backoff;
    `silence` the seconds a request may go unanswered before the wait says the queue is silent (a
    test gives a fraction of a second)."""

    say: Say = _log_warning
    clock: Callable[[], float] = time.monotonic
    sleep: Callable[[float], Awaitable[object]] = asyncio.sleep
    first_pause: float = 0.5
    silence: float = DEFAULT_SILENCE
    away_since: float | None = field(default=None, init=False)

    async def call(
        self,
        request: Callable[[], Awaitable[Result]],
        *,
        until: float,
        what: str,
        where: str,
        held: float = 0.0,
    ) -> Result:
        """`request()`, sent again while the queue is away until the monotonic time `until`; the last
        error is raised once that passes. `what` names the request and `where` the queue in the lines;
        `held` the seconds the queue may rightly hold it (a long poll's wait) before it is silent."""
        pause = self.first_pause
        while True:
            try:
                answer = await self._heard(request, what, where, held)
            except Exception as error:
                if not is_away(error):
                    self._came_back(where)  # a refusal is an answer: the queue is there
                    raise
                self._went_away(error, what, where)
                remaining = until - self.clock()
                if remaining <= 0:
                    error.add_note(f"the queue at {where} stayed away until the wait's deadline")
                    raise
                await self.sleep(min(pause, remaining))
                pause = min(pause * 2, MAX_BACKOFF)
                continue
            self._came_back(where)
            return answer

    async def _heard(
        self, request: Callable[[], Awaitable[Result]], what: str, where: str, held: float
    ) -> Result:
        """`request()`'s answer; one still awaited `silence` seconds after the `held` seconds the queue
        may take starts an outage, said once."""
        if self.away_since is not None:  # an outage already said: waited through as it is
            return await request()
        sent = asyncio.ensure_future(request())
        try:
            await asyncio.wait({sent}, timeout=held + self.silence)
            if not sent.done():
                self.away_since = self.clock()
                silent = f"the queue at {where} has not answered for {held + self.silence:g} s while {what}"
                self.say(f"{silent}; still waiting")
            return await sent
        finally:
            sent.cancel()  # left only when this wait is cancelled: the request goes with it

    def _went_away(self, error: Exception, what: str, where: str) -> None:
        if self.away_since is not None:
            return
        self.away_since = self.clock()
        self.say(
            f"the queue at {where} is away ({type(error).__name__}) while {what}; trying again with "
            "backoff, nothing is sent twice"
        )

    def _came_back(self, where: str) -> None:
        if self.away_since is None:
            return
        seconds = self.clock() - self.away_since
        self.away_since = None
        self.say(f"the queue at {where} is back after {seconds:.0f} s")
