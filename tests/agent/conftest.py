"""Fixtures for the agent tests: the real sample ticket API (reset before each test), a real queue."""

from __future__ import annotations

from tests.agent.fixtures import _sample_api_server, queue, sample_api

__all__ = ["_sample_api_server", "queue", "sample_api"]
