"""Serving the sample ticket API on loopback: in a background thread (walkthrough, tests) or in front."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn

from reviewer.quiet_server import QuietServer
from reviewer.sample_api.app import TicketStore, create_app

LOOPBACK = "127.0.0.1"


class SampleApiDidNotStart(RuntimeError):
    """uvicorn did not report the sample API as started in time."""


@dataclass(frozen=True)
class RunningSampleApi:
    """A sample API serving on loopback; `store` is its live state (same process), for inspection."""

    base_url: str
    store: TicketStore


def _bound_socket(port: int) -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    # Accepted connections inherit this on Linux; without it each answer waits ~40 ms on delayed ACKs.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.bind((LOOPBACK, port))
    return sock


@contextmanager
def sample_api_in_thread(
    *, port: int = 0, ignore_dry_run: bool = False, write_token: str | None = None
) -> Iterator[RunningSampleApi]:
    """Serve a fresh sample API on loopback (port 0: any free port) until the block ends.

    The socket is bound before uvicorn starts, so the port is known and nobody can take it between
    choosing and serving.
    """
    store = TicketStore(ignore_dry_run=ignore_dry_run)
    sock = _bound_socket(port)
    config = uvicorn.Config(
        create_app(store, write_token=write_token),
        log_level="warning",
        access_log=False,
        lifespan="off",
        ws="none",  # the sample API speaks no WebSocket: uvicorn would import an implementation for nothing
    )
    server = QuietServer(config)
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True, name="sample-api")
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            sock.close()
            raise SampleApiDidNotStart("the sample ticket API did not start within 10 s")
        time.sleep(0.01)
    bound_port = sock.getsockname()[1]
    try:
        yield RunningSampleApi(f"http://{LOOPBACK}:{bound_port}", store)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


def serve_forever(*, port: int, ignore_dry_run: bool = False, write_token: str | None = None) -> None:
    """Serve in the foreground on loopback until interrupted (`reviewer sample-api`)."""
    app = create_app(ignore_dry_run=ignore_dry_run, write_token=write_token)
    QuietServer(uvicorn.Config(app, host=LOOPBACK, port=port, log_level="info", ws="none")).run()
