"""Connections that never finish their headers or body are closed by the deadline, while real
requests keep being answered: raw sockets against the real service."""

from __future__ import annotations

import contextlib
import resource
import select
import socket
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.queue_harness import STARTUP_TIMEOUT, Service, make_actors

HEADER_TIMEOUT = 1.0
BODY_TIMEOUT = 2.0
WAIT_FOR_CLOSE = 15.0
"""How long a test waits for the server to close a stalled socket: a bound far above the deadline."""


@pytest.fixture
def strict_service(tmp_path: Path) -> Iterator[Service]:
    service = Service(
        db=tmp_path / "q.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--header-timeout", str(HEADER_TIMEOUT), "--body-timeout", str(BODY_TIMEOUT)),
    )
    service.start()
    yield service
    if service.process is not None:
        service.stop()


def stalled(service: Service, sent: bytes) -> socket.socket:
    connection = socket.create_connection(("127.0.0.1", service.port))
    if sent:
        connection.sendall(sent)
    return connection


def answer_until_closed(connection: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    connection.settimeout(WAIT_FOR_CLOSE)
    received = b""
    while chunk := connection.recv(4096):
        received += chunk
    connection.close()
    return received


PARTIAL_HEADERS = b"GET /v1/whoami HTTP/1.1\r\nHost: queue\r\nX-Slow: "


def partial_body(token: str) -> bytes:
    return (
        b"POST /v1/proposals HTTP/1.1\r\nHost: queue\r\nContent-Type: application/json\r\n"
        b"Authorization: Bearer " + token.encode() + b'\r\nContent-Length: 100000\r\n\r\n{"format": '
    )


def whoami(token: str) -> bytes:
    return f"GET /v1/whoami HTTP/1.1\r\nHost: q\r\nAuthorization: Bearer {token}\r\n\r\n".encode()


@pytest.mark.slow
def test_stalled_headers_and_bodies_are_closed_while_real_requests_are_answered(
    strict_service: Service,
) -> None:
    actors = make_actors(strict_service)
    silent = [stalled(strict_service, b"") for _ in range(20)]
    half_headers = [stalled(strict_service, PARTIAL_HEADERS) for _ in range(20)]
    half_bodies = [stalled(strict_service, partial_body(actors.tokens["agent"])) for _ in range(20)]
    trickler = stalled(strict_service, b"G")
    stop = threading.Event()

    def trickle() -> None:
        """One byte of header every 0.2 s: a per-read timeout would never fire."""
        for byte in b"ET /v1/whoami HTTP/1.1\r\nX-Trickle: " + b"a" * 1000:
            if stop.wait(0.2):
                return
            try:
                if select.select([trickler], [], [], 0)[0]:
                    return  # the server answered (its 408): a byte sent after its close would reset it
                trickler.send(bytes([byte]))
            except (OSError, ValueError):  # closed: by the server, or by the test once it read the answer
                return

    thread = threading.Thread(target=trickle)
    thread.start()
    try:
        for _ in range(10):
            assert actors.alice.get("/v1/whoami").status_code == 200
        for connection in silent + half_headers:
            assert b"408 Request Timeout" in answer_until_closed(connection)
        # The trickler may have sent a byte just before the server's close: closing with that byte
        # unread, the kernel resets the connection, and the reset can drop the 408 before it is
        # read (TCP, not the service; it failed twice in whole-suite runs). Closed either way.
        with contextlib.suppress(ConnectionResetError):
            assert b"408 Request Timeout" in answer_until_closed(trickler)
        for connection in half_bodies:
            assert b"408 Request Timeout" in answer_until_closed(connection)
        assert actors.alice.get("/v1/whoami").json() == {
            "name": "alice",
            "role": "reviewer",
            "identity": "token:alice",
        }
    finally:
        stop.set()
        thread.join()
        actors.close()
    log = strict_service.log()
    assert "did not send its headers within the deadline" in log
    assert "did not send its body within the deadline" in log
    assert "Traceback" not in log


@pytest.mark.slow
def test_a_keep_alive_connection_gets_the_header_deadline_again_for_its_next_request(
    strict_service: Service,
) -> None:
    actors = make_actors(strict_service)
    try:
        connection = stalled(strict_service, whoami(actors.tokens["alice"]))
        connection.settimeout(WAIT_FOR_CLOSE)
        first = connection.recv(4096)
        assert first.startswith(b"HTTP/1.1 200")
        connection.sendall(b"GET /v1/whoami HTTP/1.1\r\nHost: q\r\n")
        assert b"408 Request Timeout" in answer_until_closed(connection)
    finally:
        actors.close()


def _low_descriptor_limit() -> None:
    resource.setrlimit(resource.RLIMIT_NOFILE, (128, 128))


@pytest.mark.slow
def test_more_stalled_connections_than_descriptors_do_not_lock_real_clients_out(tmp_path: Path) -> None:
    """140 half-headers against a 128-descriptor limit: connections over the cap are answered 503 at
    once, the stalled ones are closed at the header deadline, then a real request succeeds; the log
    does not fill with EMFILE errors."""
    service = Service(
        db=tmp_path / "q.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--header-timeout", str(HEADER_TIMEOUT)),
    )
    service.start()
    token = service.token("alice", "reviewer")
    service.stop()
    log = service.log_path.open("ab")
    service.process = subprocess.Popen(
        ["prlimit", "--nofile=128:128", "--", *service_command(service)], stdout=log, stderr=log
    )
    try:
        wait_until_listening(service)
        stalls = []
        for _ in range(140):
            try:
                stalls.append(stalled(service, PARTIAL_HEADERS))
            except OSError:
                break
        answered: int | None = None
        seen: set[int | None] = set()
        deadline = time.monotonic() + WAIT_FOR_CLOSE
        with httpx.Client(
            base_url=service.url, headers={"Authorization": f"Bearer {token}"}, timeout=5
        ) as alice:
            while answered != 200 and time.monotonic() < deadline:
                try:
                    answered = alice.get("/v1/whoami").status_code
                except httpx.TransportError:
                    answered = None
                if answered != 200:
                    seen.add(answered)
                    time.sleep(0.2)
        assert answered == 200
        assert seen <= {503}, "while stalled clients held the cap, a real one was told 503, not left hanging"
        for connection in stalls:
            connection.close()
    finally:
        service.stop()
    log_text = service.log()
    assert log_text.count("socket.accept() out of system resource") == 0
    assert log_text.count("out of file descriptors") <= 3
    assert "Traceback" not in log_text


def service_command(service: Service) -> list[str]:
    from tests.queue_harness import reviewer_command

    return reviewer_command(
        "serve", "--db", str(service.db), "--port", str(service.port), *service.serve_args
    )


def wait_until_listening(service: Service) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", service.port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.05)
    raise RuntimeError(service.log())
