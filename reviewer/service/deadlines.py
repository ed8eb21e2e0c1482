"""uvicorn's h11 protocol with total deadlines for a request's headers and its body.

uvicorn (h11) has an idle keep-alive timeout but no deadline for a request's headers or body: a
client that sends half a header holds its connection, and a file descriptor, for ever; a few
hundred such clients exhaust the process's descriptors and every real request fails. Hypercorn's
`read_timeout` is per read, so a client that trickles a byte a second never meets it. So the
protocol here subclasses uvicorn's h11 protocol with two total deadlines, measured from the first
moment the server waits for a request: `header_timeout` until the headers are complete, then
`body_timeout` until the body is. A client that misses one gets a 408 and the connection is closed,
whatever the route is doing; the route's `receive()` sees a disconnect.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import resource
from typing import Any, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from reviewer.service.timeouts import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT

log = logging.getLogger("reviewer.service")

TIMEOUT_RESPONSE: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: 87\r\n\r\n"
    b'{"error":"request_timeout","message":"the request was not sent in time; send it again"}'
)


BUSY_RESPONSE: Final = (
    b"HTTP/1.1 503 Service Unavailable\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"retry-after: 1\r\ncontent-length: 79\r\n\r\n"
    b'{"error":"busy","message":"the queue has too many open connections; try again"}'
)


def connection_cap() -> int:
    """How many client connections to hold at once: half the descriptors the process may open.

    The soft limit is first raised to the hard one. The other half is for the database (SQLite
    holds three files per thread), the log and the listening socket: when clients may take every
    descriptor, `accept()` fails with EMFILE, asyncio logs it thousands of times a second, and the
    database cannot open a file either. A connection over the cap is answered 503 and closed at
    once, so it costs a descriptor for a moment, not for the header deadline.
    """
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if hard == resource.RLIM_INFINITY or hard > soft:
        wanted = 65536 if hard == resource.RLIM_INFINITY else hard
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
            soft = wanted
    return max(8, soft // 2)


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with total deadlines for a request's headers and its body, and a cap
    on open connections."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT
    max_connections: int = 512

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._deadline: asyncio.TimerHandle | None = None
        self._waiting_for: str = "headers"

    def _arm(self, waiting_for: str, seconds: float) -> None:
        self._disarm()
        self._waiting_for = waiting_for
        self._deadline = self.loop.call_later(seconds, self._on_deadline)

    def _disarm(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        if len(self.connections) > self.max_connections:
            transport.write(BUSY_RESPONSE)
            transport.close()
            return
        self._arm("headers", self.header_timeout)

    def connection_lost(self, exc: Exception | None) -> None:
        self._disarm()
        super().connection_lost(exc)

    def handle_events(self) -> None:
        super().handle_events()
        self._follow_state()

    def on_response_complete(self) -> None:
        # The next request's headers are due from now (this also bounds an idle keep-alive).
        if not self.transport.is_closing():
            self._arm("headers", self.header_timeout)
        super().on_response_complete()
        self._follow_state()

    def _follow_state(self) -> None:
        """Move the deadline along with the client's side of the h11 state machine."""
        if self.transport.is_closing():
            self._disarm()
            return
        state = self.conn.their_state
        if state is h11.SEND_BODY and self._waiting_for != "body":
            self._arm("body", self.body_timeout)
        elif state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED) and self._waiting_for != "response":
            self._disarm()
            self._waiting_for = "response"

    def _on_deadline(self) -> None:
        self._deadline = None
        if self.transport.is_closing():
            return
        cycle = self.cycle
        if self._waiting_for == "headers" or cycle is None or not cycle.response_started:
            self.transport.write(TIMEOUT_RESPONSE)
        if cycle is not None and not cycle.response_complete:
            cycle.disconnected = True
            cycle.message_event.set()
        log.info("closed a connection that did not send its %s within the deadline", self._waiting_for)
        self.transport.close()


def protocol_with_deadlines(header_timeout: float, body_timeout: float) -> type[DeadlineH11Protocol]:
    """A protocol class carrying the configured deadlines (uvicorn instantiates the class itself)."""
    return type(
        "ConfiguredDeadlineH11Protocol",
        (DeadlineH11Protocol,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout, "max_connections": connection_cap()},
    )


class DescriptorExhaustionLog:
    """An event-loop exception handler that reports running out of file descriptors once a while.

    asyncio's accept loop logs EMFILE with a traceback for every connection it cannot accept,
    up to the listen backlog per tick, and its retries fail again at shutdown: megabytes of log a
    second while a burst of clients holds every descriptor. One line per `interval` says the same.
    """

    def __init__(self, interval: float = 10.0) -> None:
        self.interval = interval
        self.last_reported = -interval

    def __call__(self, loop: asyncio.AbstractEventLoop, context: dict[str, Any]) -> None:
        if context.get("message") == "socket.accept() out of system resource":
            if loop.time() - self.last_reported >= self.interval:
                self.last_reported = loop.time()
                log.warning(
                    "out of file descriptors: new connections wait until stalled ones meet a deadline (%s)",
                    context.get("exception"),
                )
            return
        if "_start_serving" in repr(context.get("handle")) and isinstance(
            context.get("exception"), ValueError
        ):
            return  # asyncio retrying accept() on a listening socket that was closed at shutdown
        loop.default_exception_handler(context)
