"""The gate's tests use the agent tests' real queue."""

from __future__ import annotations

from tests.agent.fixtures import queue

__all__ = ["queue"]
