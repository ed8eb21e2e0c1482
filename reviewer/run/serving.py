"""Serving the gate, in this process's own event loop: on the listener the sandbox's relay
(`reviewer.sandbox.relay`) hands out of the child's own network, where no other process can connect; or,
where COMMAND shares the machine's network (`--no-sandbox`, another user, `--share-network`), on a
loopback port behind a secret.

uvicorn serves it (it is already what the queue and the sample API run on): it parses HTTP, keeps
connections alive, closes idle ones, and answers 503 beyond a bound on concurrent connections, so a
child that floods the gate costs bounded memory. The socket is bound and listening before the child
starts, so the child can connect at once; uvicorn takes the backlog as it starts.

A service COMMAND reaches on its own loopback is an `InnerService`: its port there, and how it is
served on the listener handed out.

Any local user can connect to a loopback port, so the gate answers only its own child: the URL it
gives the child starts with a secret made for this run (`http://127.0.0.1:PORT/SECRET`, to which the
child adds the API's paths), and any request whose path does not start with it is answered 403 before
the gate reads it; nothing of it reaches the API or the plan.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import secrets
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Final

import uvicorn

from reviewer.quiet_server import QuietServer
from reviewer.sandbox.handover import InnerService

LOOPBACK: Final = "127.0.0.1"
MAX_CONNECTIONS: Final = 64
_REFUSED: Final = b'{"detail":"reviewer run: this gate answers only the command it runs"}'


class OnlyItsChild:
    """The gate's app behind the run's secret: a request under `/SECRET` reaches it with the secret
    taken off its path; any other is refused with 403."""

    def __init__(self, app: Any, secret: str) -> None:
        self.app = app
        self.prefix = f"/{secret}".encode("ascii")

    def inner_path(self, path: str) -> str | None:
        """The path the gate sees, or None when `path` does not start with the secret."""
        raw = path.encode("utf-8", "surrogateescape")
        head, rest = raw[: len(self.prefix)], raw[len(self.prefix) :]
        if not hmac.compare_digest(head, self.prefix) or rest[:1] not in (b"", b"/"):
            return None
        return path[len(self.prefix) :] or "/"

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        inner = self.inner_path(scope.get("path", "")) if scope["type"] == "http" else None
        if inner is None:
            if scope["type"] == "http":
                await send(
                    {
                        "type": "http.response.start",
                        "status": 403,
                        "headers": [
                            (b"content-type", b"application/json"),
                            (b"content-length", str(len(_REFUSED)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": _REFUSED})
            return
        inner_scope = {**scope, "path": inner}
        raw = scope.get("raw_path")
        if isinstance(raw, bytes) and raw.startswith(self.prefix):
            inner_scope["raw_path"] = raw[len(self.prefix) :] or b"/"  # the path as the child encoded it
        else:
            inner_scope.pop("raw_path", None)
        await self.app(inner_scope, receive, send)


class _GateServer(QuietServer):
    """uvicorn (asleep while idle) without its signal handlers: `reviewer run` ends the gate itself,
    after the child."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def _served(app: Any, sock: socket.socket) -> AsyncIterator[None]:
    """uvicorn serving `app` on the bound, listening `sock` until the block ends."""
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",  # the gate speaks no WebSocket: uvicorn would import an implementation for nothing
        limit_concurrency=MAX_CONNECTIONS,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=2,
        h11_max_incomplete_event_size=64 * 1024,
    )
    server = _GateServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="reviewer-run-gate")
    try:
        yield
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sock.close()


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port until the block ends; yields its base URL, which holds the
    secret only its holder may use the gate with."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((LOOPBACK, 0))
    sock.listen(MAX_CONNECTIONS)
    secret = secrets.token_urlsafe(32)
    async with _served(OnlyItsChild(app, secret), sock):
        yield f"http://{LOOPBACK}:{sock.getsockname()[1]}/{secret}"


def gate_service(app: Any, port: int) -> InnerService:
    """The gate, served on COMMAND's own loopback at `port`: no secret in its URL, none needed."""
    return InnerService(port, lambda listener: _served(app, listener))
