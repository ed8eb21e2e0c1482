"""The tests' own service harness keeps its promises: the service a test talks to is the one it
started, even when another process holds its port."""

from __future__ import annotations

from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from tests.queue_harness import Service
from tests.service.ports import free_port
from tests.serving import serving_in_thread


class Impostor(BaseHTTPRequestHandler):
    """Answers every request as the queue would answer an anonymous one, so only its body tells."""

    def do_GET(self) -> None:
        body = b'{"error": "unauthorized", "message": "impostor"}'
        self.send_response(401)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def taken_port() -> Iterator[int]:
    """A loopback port on which another HTTP server already answers."""
    with serving_in_thread(ThreadingHTTPServer(("127.0.0.1", free_port()), Impostor)) as server:
        yield server.server_address[1]


def test_a_first_start_on_a_taken_port_moves_to_another_and_serves_there(
    tmp_path: Path, taken_port: int
) -> None:
    """The impostor answers on the port before the service has even started: the harness waits for its
    own process to say it listens, sees it refused the port, and starts it again on another."""
    service = Service(db=tmp_path / "queue.sqlite3", log_path=tmp_path / "service.log", port=taken_port)
    service.start()
    try:
        assert service.port != taken_port
        assert "Address already in use" in service.log()
        with service.client(service.token("alice", "reviewer")) as client:
            assert client.get("/v1/whoami").json()["name"] == "alice"
    finally:
        service.stop()


def test_a_restart_keeps_its_port_and_says_when_it_is_taken(tmp_path: Path) -> None:
    """Clients know a restarted service by its port: a restart never moves, it fails, naming why."""
    service = Service(db=tmp_path / "queue.sqlite3", log_path=tmp_path / "service.log")
    service.start()
    port = service.port
    service.stop()
    server = ThreadingHTTPServer(("127.0.0.1", port), Impostor)
    try:
        with pytest.raises(RuntimeError, match="Address already in use"):
            service.start()
        assert service.port == port
    finally:
        server.server_close()
