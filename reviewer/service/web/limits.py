"""Rate limits on the page's enrolment and decision routes: a fixed number of requests a minute from
one client address, answered 429 with `Retry-After` beyond it. In memory, per replica: the bound is
on guessing and on load, and every decision is bound by its assertion anyway."""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Final

from reviewer.service.errors import Unavailable

WINDOW: Final = 60.0
MAX_CLIENTS: Final = 10_000
"""Addresses remembered at most; the oldest are forgotten first."""


class TooManyRequests(Unavailable):
    """Answered with `Retry-After`, as an outage is."""

    status = 429
    code = "too_many_requests"

    def __init__(self, message: str, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after


class RateLimit:
    """At most `per_minute` requests in each minute from one address, for one group of routes."""

    def __init__(self, per_minute: int, clock: Callable[[], float]) -> None:
        self.per_minute = per_minute
        self.clock = clock
        self.windows: OrderedDict[str, tuple[float, int]] = OrderedDict()
        self.lock = threading.Lock()

    def check(self, client: str) -> None:
        now = self.clock()
        with self.lock:
            start, used = self.windows.pop(client, (now, 0))
            if now - start >= WINDOW:
                start, used = now, 0
            self.windows[client] = (start, used + 1)
            while len(self.windows) > MAX_CLIENTS:
                self.windows.popitem(last=False)
        if used >= self.per_minute:
            retry = max(1, math.ceil(start + WINDOW - now))
            raise TooManyRequests(
                f"more than {self.per_minute} requests a minute from this address; try again in {retry} s",
                retry,
            )
