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
import logging
from typing import Any, Final

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from reviewer.service.server import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT

log = logging.getLogger("reviewer.service")

TIMEOUT_RESPONSE: Final = (
    b"HTTP/1.1 408 Request Timeout\r\ncontent-type: application/json\r\nconnection: close\r\n"
    b"content-length: 87\r\n\r\n"
    b'{"error":"request_timeout","message":"the request was not sent in time; send it again"}'
)


class DeadlineH11Protocol(H11Protocol):
    """uvicorn's h11 protocol with total deadlines for a request's headers and its body."""

    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT

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
        response_started = cycle is not None and cycle.response_started and not cycle.response_complete
        if not response_started:
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
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )
