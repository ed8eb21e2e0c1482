"""The agent tests' real services, shared with the adapters' tests: the sample ticket API (reset
before each test) and a real `reviewer serve` process, with the `Queue` it yields."""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewer.sample_api.server import RunningSampleApi, sample_api_in_thread
from tests.queue_harness import mint_tokens, wait_until_serving
from tests.service.ports import free_port


@pytest.fixture(scope="session")
def _sample_api_server() -> Iterator[RunningSampleApi]:
    with sample_api_in_thread() as running:
        yield running


@pytest.fixture
def sample_api(_sample_api_server: RunningSampleApi) -> RunningSampleApi:
    """The sample API as the scenario starts: t1, t2, t3 open, nothing logged, the dry-run flag honoured."""
    store = _sample_api_server.store
    with store.lock:
        store.reset()
        store.ignore_dry_run = False
    return _sample_api_server


@dataclass(frozen=True)
class Queue:
    """A real `reviewer serve` process on loopback, with one agent token and one reviewer token."""

    url: str
    db: Path
    agent_token: str
    reviewer_token: str


def _reviewer(*args: str) -> list[str]:
    return [sys.executable, "-m", "reviewer", *args]


@pytest.fixture(scope="session")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    directory = tmp_path_factory.mktemp("queue")
    db = directory / "queue.sqlite3"
    port = free_port()
    log = (directory / "serve.log").open("wb")
    process = subprocess.Popen(
        _reviewer("serve", "--db", str(db), "--port", str(port)), stdout=log, stderr=log
    )
    url = f"http://127.0.0.1:{port}"
    try:
        wait_until_serving(url, process, lambda: (directory / "serve.log").read_text(errors="replace"))
    except RuntimeError:
        process.kill()
        raise
    # Tokens after the first start: `serve` creates the database, token commands refuse a missing one.
    tokens = mint_tokens(db, {"test-agent": "agent", "test-reviewer": "reviewer"})
    try:
        yield Queue(url, db, tokens["test-agent"], tokens["test-reviewer"])
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(10)
        log.close()
