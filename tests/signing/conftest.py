"""Fixtures for the signing tests: a folder for throwaway keys, a real ssh-agent per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.signing.ssh import Agent, running_agent


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    """A real ssh-agent on its own socket, killed after the test."""
    with running_agent(tmp_path / "agent.sock") as running:
        yield running
