"""The system tests run the real service with the real sample API and, for PostgreSQL, a throwaway
cluster, and a real ssh-agent: the fixtures the agent, service and signing tests already use."""

from __future__ import annotations

from tests.agent.fixtures import _sample_api_server, sample_api
from tests.service.postgres import postgres_cluster
from tests.signing.ssh import agent

__all__ = ["_sample_api_server", "agent", "postgres_cluster", "sample_api"]
