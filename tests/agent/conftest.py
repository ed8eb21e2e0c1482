"""Fixtures for the agent tests: one real sample ticket API on loopback, reset before each test."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reviewer.sample_api.server import RunningSampleApi, sample_api_in_thread


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
