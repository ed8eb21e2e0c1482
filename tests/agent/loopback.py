"""A real HTTP server on loopback whose answers a test decides: a redirect, a dropped connection, silence."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from tests.serving import serve_in_thread, stop_serving

Answer = Callable[["LoopbackServer", BaseHTTPRequestHandler], None]


def created(server: LoopbackServer, handler: BaseHTTPRequestHandler) -> None:
    """201 with an id: an ordinary create."""
    body = json.dumps({"id": "elsewhere-1"}).encode()
    handler.send_response(201)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(body)))
    handler.end_headers()
    handler.wfile.write(body)


@dataclass
class LoopbackServer:
    """Records every request it receives (method, path, headers, body), then runs `answer`."""

    answer: Answer = created
    seen: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    url: str = ""
    released: threading.Event = field(default_factory=threading.Event)
    """Set when the test ends: an answer that holds the request open waits for it."""
    received: threading.Event = field(default_factory=threading.Event)

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                body = self.rfile.read(int(self.headers.get("content-length") or 0))
                server.seen.append((self.command, self.path, dict(self.headers), body))
                server.received.set()
                server.answer(server, self)

            do_POST = do_PATCH = do_PUT = do_DELETE = do_GET = _answer

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads `seen`."""

        return Handler


@contextmanager
def loopback_servers(count: int) -> Iterator[list[LoopbackServer]]:
    """`count` servers on loopback ports, serving until the block ends."""
    started: list[ThreadingHTTPServer] = []
    servers = [LoopbackServer() for _ in range(count)]
    try:
        for server in servers:
            http = ThreadingHTTPServer(("127.0.0.1", 0), server.handler())
            http.daemon_threads = True
            server.url = f"http://127.0.0.1:{http.server_address[1]}"
            serve_in_thread(http)
            started.append(http)
        yield servers
    finally:
        for server in servers:
            server.released.set()
        for http in started:
            stop_serving(http)
