"""Fixtures for the signing tests: a folder for throwaway keys, a real ssh-agent per test."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.signing.ssh import agent


@pytest.fixture
def keys(tmp_path: Path) -> Path:
    folder = tmp_path / "keys"
    folder.mkdir(mode=0o700)
    return folder


__all__ = ["agent", "keys"]
