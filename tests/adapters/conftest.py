"""The adapters' tests use the agent tests' real queue and real sample API, and load the examples."""

from __future__ import annotations

from tests.agent.fixtures import _sample_api_server, queue, sample_api

__all__ = ["_sample_api_server", "queue", "sample_api"]
