"""Serving the gate on a loopback port, in this process's own event loop.

uvicorn serves it (it is already what the queue and the sample API run on): it parses HTTP, keeps
connections alive, closes idle ones, and answers 503 beyond a bound on concurrent connections, so a
child that floods the gate costs bounded memory. The socket is bound and listening before the child
starts, so the child can connect at once; uvicorn takes the backlog as it starts.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any, Final

import uvicorn

LOOPBACK: Final = "127.0.0.1"
MAX_CONNECTIONS: Final = 64


class _GateServer(uvicorn.Server):
    """uvicorn without its signal handlers: `reviewer run` ends the gate itself, after the child."""

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        yield


@asynccontextmanager
async def serving(app: Any) -> AsyncIterator[str]:
    """Serve `app` on a free loopback port until the block ends; yields its base URL."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((LOOPBACK, 0))
    sock.listen(MAX_CONNECTIONS)
    config = uvicorn.Config(
        app,
        log_level="warning",
        access_log=False,
        lifespan="off",
        limit_concurrency=MAX_CONNECTIONS,
        timeout_keep_alive=5,
        timeout_graceful_shutdown=2,
        h11_max_incomplete_event_size=64 * 1024,
    )
    server = _GateServer(config)
    task = asyncio.create_task(server.serve(sockets=[sock]), name="reviewer-run-gate")
    try:
        yield f"http://{LOOPBACK}:{sock.getsockname()[1]}"
    finally:
        server.should_exit = True
        with contextlib.suppress(asyncio.CancelledError):
            await task
        sock.close()
