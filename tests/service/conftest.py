"""Fixtures that run the real queue service: `python -m reviewer serve` on a free loopback port
(`tests.queue_harness`)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.queue_harness import Actors, Service, make_actors, start_service
from tests.service.postgres import postgres_cluster


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "slow: takes seconds (races, crashes, fuzzing); still in the default run"
    )


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Service]:
    """A service shared by a module's tests; each test uses its own proposal ids."""
    running = start_service(tmp_path_factory.mktemp("queue"))
    yield running
    if running.process is not None:
        running.stop()


@pytest.fixture(scope="module")
def actors(service: Service) -> Iterator[Actors]:
    made = make_actors(service)
    yield made
    made.close()


__all__ = ["actors", "postgres_cluster", "service"]
