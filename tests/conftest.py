"""Test-wide settings: snapshots in colour, whatever the environment says."""

from __future__ import annotations

import os

import pytest

os.environ.pop("NO_COLOR", None)


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (marked `anyio`) run on asyncio, which Textual and the app use."""
    return "asyncio"
