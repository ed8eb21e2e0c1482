"""uvicorn's server, asleep while there is nothing to serve: the queue (`reviewer serve`), the gate
`reviewer run` puts before its child, and the sample API.

uvicorn's own loop wakes ten times a second to look whether it should stop and, once a second, to
renew its `date` header. On a small virtual machine each wake costs about half a millisecond: forty
such loops, idle, took 11.5% of two cores from the work beside them, so a queue that waits all night,
or a `reviewer run` waiting for its approval, used 0.6% of a core doing nothing. This server wakes
once a second, for the header, and at once when asked to stop, by a signal or by `should_exit` set
from any thread or task.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import Final

import uvicorn

IDLE_WAKE: Final = 1.0
"""Seconds between the loop's wakes when nothing asks it to stop: the `date` header's resolution."""


class QuietServer(uvicorn.Server):
    idle_wake: float = IDLE_WAKE

    def __init__(self, config: uvicorn.Config) -> None:
        self._loop: asyncio.AbstractEventLoop | None = None
        self._woken: asyncio.Event | None = None
        super().__init__(config)

    @property
    def should_exit(self) -> bool:
        return self._should_exit

    @should_exit.setter
    def should_exit(self, value: bool) -> None:
        """uvicorn's flag, set by its signal handler or by an owner ending the server, and a wake for
        the loop, which would otherwise notice it only at its next tick."""
        self._should_exit = value
        loop, woken = self._loop, self._woken
        if value and loop is not None and woken is not None and not loop.is_closed():
            loop.call_soon_threadsafe(woken.set)  # safe from a signal handler too, as asyncio's runner does

    async def main_loop(self) -> None:
        self._loop, self._woken = asyncio.get_running_loop(), asyncio.Event()
        ticks_a_wake = round(self.idle_wake * 10)  # uvicorn counts its ticks in tenths of a second
        counter = 0
        should_exit = await self.on_tick(counter)
        while not should_exit:
            counter = (counter + ticks_a_wake) % 864000
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._woken.wait(), self.idle_wake)
            self._woken.clear()
            should_exit = await self.on_tick(counter)
