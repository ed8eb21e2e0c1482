"""The access log: one line per request, with the caller's name but never its token, and the id
every log line written while the request is served carries (`REQUEST_ID`)."""

from __future__ import annotations

import logging
import secrets
import time
from collections.abc import Callable
from contextvars import ContextVar
from typing import Final

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from reviewer.service.auth import redact_tokens

access_log = logging.getLogger("reviewer.service.access")
LINE = "%s %s %d %s %.1fms"
"""Method, path (token-shaped strings redacted), status, the caller's name, milliseconds taken."""
NOT_MODIFIED: Final = 304
REQUEST_ID: ContextVar[str | None] = ContextVar("request_id", default=None)
"""The request being served, for `--log-format json`: random, so it says nothing about the caller."""


class RequestLog:
    """ASGI middleware: one log line per request, with the caller's name but never its token.

    Only the path is logged (not the query string), with token-shaped strings redacted, and the
    caller's name comes from the authenticated identity, so a token pasted into a URL by mistake
    never reaches the log either. A request answered 304 (a poll that found nothing new: thirty a
    minute for each open app) is logged only with `every_line`; the metrics count it either way.
    """

    def __init__(
        self,
        app: ASGIApp,
        on_response: Callable[[Scope, int], None] | None = None,
        every_line: bool = False,
    ) -> None:
        self.app = app
        self.on_response = on_response
        """Told each request's scope and status once answered: the metrics count it."""
        self.every_line = every_line
        """`serve --access-log all`: a line for each 304 too."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500
        REQUEST_ID.set(secrets.token_hex(8))

        async def send_and_note(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            if self.on_response is not None:
                self.on_response(scope, status)
            if (status != NOT_MODIFIED or self.every_line) and access_log.isEnabledFor(logging.INFO):
                who = scope.get("state", {}).get("who", "-")
                milliseconds = (time.perf_counter() - started) * 1000
                path = redact_tokens(scope["path"])[:200]
                log_line(scope["method"], path, status, who, milliseconds)


def log_line(*fields: object) -> None:
    """`access_log.info(LINE, *fields)` less its walk up the stack for the caller's file and line,
    which cost an idle poll more than the formatting: the caller is always `RequestLog`."""
    record = access_log.makeRecord(access_log.name, logging.INFO, __file__, 0, LINE, fields, None)
    access_log.handle(record)
