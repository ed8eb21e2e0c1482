"""The agent tests' real services, shared with the adapters' tests: the sample ticket API (reset
before each test) and a real `reviewer serve` process, with the `Queue` it yields."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewer.sample_api.server import RunningSampleApi, sample_api_in_thread
from tests.queue_harness import Service


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


@pytest.fixture(scope="session")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    directory = tmp_path_factory.mktemp("queue")
    db = directory / "queue.sqlite3"
    service = Service(db=db, log_path=directory / "serve.log")
    service.start()
    # Tokens after the first start: `serve` creates the database, token commands refuse a missing one.
    tokens = service.tokens({"test-agent": "agent", "test-reviewer": "reviewer"})
    try:
        yield Queue(service.url, db, tokens["test-agent"], tokens["test-reviewer"])
    finally:
        service.stop()
