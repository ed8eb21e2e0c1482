"""The system tests run the real service with the real sample API and, for PostgreSQL, a throwaway
cluster: the fixtures the agent and service tests already use."""

from __future__ import annotations

from tests.agent.fixtures import _sample_api_server, sample_api
from tests.service.conftest import postgres_cluster

__all__ = ["_sample_api_server", "postgres_cluster", "sample_api"]
