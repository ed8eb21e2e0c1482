"""Fixtures for live review: the real queue service on loopback, with two reviewers and an agent."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.queue_harness import start_service
from tests.tui.live.helpers import Queue


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    service = start_service(tmp_path_factory.mktemp("live-queue"))
    tokens = {
        name: service.token(name, role)
        for name, role in (("alice", "reviewer"), ("bob", "reviewer"), ("agent", "agent"))
    }
    yield Queue(service, tokens)
    if service.process is not None:
        service.stop()
