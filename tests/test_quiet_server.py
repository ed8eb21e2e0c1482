"""The servers' loop (`reviewer.quiet_server`) sleeps while idle and still stops at once."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import httpx
import uvicorn

from reviewer.quiet_server import QuietServer


async def hello(scope: dict[str, Any], receive: Any, send: Any) -> None:
    await send({"type": "http.response.start", "status": 200, "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"hello"})


class CountedServer(QuietServer):
    """Counts the loop's wakes (each ends in `on_tick`)."""

    wakes = 0

    async def on_tick(self, counter: int) -> bool:
        self.wakes += 1
        return await super().on_tick(counter)


@contextmanager
def serving(server: QuietServer) -> Iterator[tuple[str, threading.Thread]]:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [listener]}, daemon=True)
    thread.start()
    while not server.started:
        assert thread.is_alive(), "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}", thread
    finally:
        server.should_exit = True
        thread.join(timeout=60)
        listener.close()


def config() -> uvicorn.Config:
    return uvicorn.Config(hello, log_level="warning", lifespan="off", ws="none")


def test_an_idle_server_wakes_about_once_a_second_and_still_answers_and_dates_its_answers() -> None:
    """uvicorn's loop wakes ten times a second; over two idle seconds this one wakes about twice
    (a loaded machine wakes it less, never more), and it serves as before, a `date` header included."""
    server = CountedServer(config())
    with serving(server) as (url, _):
        started, first = time.monotonic(), server.wakes
        time.sleep(2)
        idle = time.monotonic() - started
        assert server.wakes - first <= idle / server.idle_wake + 1
        answer = httpx.get(url)
        assert answer.text == "hello" and "date" in answer.headers


def test_a_stop_from_another_thread_ends_a_wait_however_long() -> None:
    """With a wake only every hour, `should_exit` set elsewhere still ends the loop: the stop wakes
    it rather than waiting for the hour."""
    server = CountedServer(config())
    server.idle_wake = 3600
    with serving(server) as (_, thread):
        server.should_exit = True
        thread.join(timeout=60)
        assert not thread.is_alive(), "the loop slept through the stop"
