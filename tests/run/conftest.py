"""Fixtures for `reviewer run`: the sample API and a queue, each started once a module
(`tests.run.harness` holds what they start and what the tests drive)."""

from __future__ import annotations

import signal
from collections.abc import Iterator

import pytest

from tests.queue_harness import start_service
from tests.run.harness import Queue, SampleApi, start_sample_api


@pytest.fixture(scope="module")
def _sample_api_process(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SampleApi]:
    api = start_sample_api(tmp_path_factory.mktemp("sample-api") / "api.log")
    yield api
    api.process.send_signal(signal.SIGTERM)
    api.process.wait(10)


@pytest.fixture
def sample_api(_sample_api_process: SampleApi) -> SampleApi:
    """The sample API as the scenario starts: t1, t2, t3 open, nothing audited or logged."""
    _sample_api_process.reset()
    return _sample_api_process


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    service = start_service(tmp_path_factory.mktemp("queue"))
    reviewer = service.client(service.token("alice", "reviewer"))
    yield Queue(service, service.token("run-agent", "agent"), reviewer)
    reviewer.close()
    service.stop()
