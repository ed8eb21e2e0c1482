"""The audit tests share the agent tests' real services: the sample API and a real queue."""

from __future__ import annotations

from tests.agent.fixtures import _sample_api_server, queue, sample_api

__all__ = ["_sample_api_server", "queue", "sample_api"]
