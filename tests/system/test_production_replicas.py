"""The documented production set-up (test_production_setup.py says what it runs and asserts) on
PostgreSQL: two replicas of one queue, the agents submitting to one, alice deciding on the other."""

from __future__ import annotations

import pytest

from tests.system.test_production_setup import provider, receivers, runs_each_kind_of_agent_to_executed

__all__ = ["provider", "receivers"]


def test_the_documented_production_setup_runs_each_kind_of_agent_to_executed_on_two_replicas(
    request: pytest.FixtureRequest,
) -> None:
    runs_each_kind_of_agent_to_executed("postgresql", request)
