"""Fixtures for the signing tests: a folder for throwaway keys, a real ssh-agent per test."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.signing.ssh import Agent


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    return folder


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    """A real ssh-agent on its own socket, killed after the test."""
    socket_path = tmp_path / "agent.sock"
    started = subprocess.run(
        ["ssh-agent", "-s", "-a", str(socket_path)], check=True, capture_output=True, text=True
    )
    pid = int(started.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        yield Agent(str(socket_path), pid)
    finally:
        os.kill(pid, signal.SIGTERM)
