"""A webhook receiver on loopback for the notification tests: it records what arrives and can be told
to be down, answer 500, redirect, hang or answer 10 MB."""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

from tests.service.ports import free_port
from tests.serving import serve_in_thread, stop_serving

Mode = Literal["ok", "fail", "redirect", "hang", "huge"]
HUGE_BYTES = 10 * 1024 * 1024
SECRET = "a-secret-only-the-receiver-knows"


@dataclass(frozen=True)
class Arrival:
    path: str
    headers: dict[str, str]
    body: bytes
    answered: int

    @property
    def document(self) -> Any:
        return json.loads(self.body)

    @property
    def event(self) -> str:
        return self.headers["reviewer-event"]

    @property
    def delivery(self) -> str:
        return self.headers["reviewer-delivery"]


@dataclass
class Receiver:
    """`url` takes POSTs; `arrivals` lists each with the status it was answered with."""

    port: int = field(default_factory=free_port)
    mode: Mode = "ok"
    arrivals: list[Arrival] = field(default_factory=list)
    cut_writes: int = 0
    """Answers the sender closed before reading them (the 10 MB one)."""
    hanging: threading.Event = field(default_factory=threading.Event)
    release: threading.Event = field(default_factory=threading.Event)
    changed: threading.Condition = field(default_factory=threading.Condition)
    _server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hook"

    def start(self) -> Receiver:
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length", "0"))
                body = self.rfile.read(length)
                mode = receiver.mode
                if mode == "hang":
                    receiver.hanging.set()
                    receiver.release.wait(30)
                    return
                status = {"ok": 200, "fail": 500, "redirect": 302, "huge": 200}[mode]
                receiver._record(
                    Arrival(self.path, {k.lower(): v for k, v in self.headers.items()}, body, status)
                )
                self.send_response(status)
                if mode == "redirect":
                    self.send_header("Location", f"http://127.0.0.1:{receiver.port}/elsewhere")
                if mode == "huge":
                    self.send_header("Content-Length", str(HUGE_BYTES))
                    self.end_headers()
                    try:
                        for _ in range(HUGE_BYTES // 65536):
                            self.wfile.write(b"x" * 65536)
                    except OSError:
                        with receiver.changed:
                            receiver.cut_writes += 1
                    return
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def do_GET(self) -> None:
                receiver._record(Arrival(self.path, dict(self.headers.items()), b"", 404))
                self.send_response(404)
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        serve_in_thread(self._server)
        return self

    def _record(self, arrival: Arrival) -> None:
        with self.changed:
            self.arrivals.append(arrival)
            self.changed.notify_all()

    def stop(self) -> None:
        """Down: the port refuses connections until `start` again."""
        self.release.set()
        if self._server is not None:
            stop_serving(self._server)
            self._server = None

    def accepted(self) -> list[Arrival]:
        return [arrival for arrival in self.arrivals if 200 <= arrival.answered < 300]

    def wait_for(self, count: int, timeout: float = 20) -> list[Arrival]:
        """The accepted arrivals once there are `count` of them (an event awaited, not a sleep)."""
        with self.changed:
            if not self.changed.wait_for(lambda: len(self.accepted()) >= count, timeout):
                raise AssertionError(f"{len(self.accepted())} of {count} deliveries arrived: {self.arrivals}")
            return self.accepted()


def notify_options(receiver: Receiver, folder: Path) -> tuple[str, ...]:
    """`serve`'s options to notify `receiver`, signing with `SECRET` from a file only its owner reads."""
    secret = folder / "notify-secret"
    secret.write_text(SECRET + "\n")
    secret.chmod(0o600)
    return ("--notify", receiver.url, "--notify-secret-file", str(secret))
