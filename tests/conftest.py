"""Test-wide settings: snapshots in colour, whatever the environment says."""

from __future__ import annotations

import os

import pytest

os.environ.pop("NO_COLOR", None)


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (marked `anyio`) run on asyncio, which Textual and the app use."""
    return "asyncio"


@pytest.fixture(autouse=True)
def toasts_stay_for_snapshots(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A picture is taken once the keys have been answered, however long that took: a toast that
    goes after Textual's 5 s must not be in one picture and gone from the next because the machine
    was slower (a loaded machine took longer than that to open a plan and press d)."""
    if "snap_compare" in request.fixturenames:
        from textual.app import App

        monkeypatch.setattr(App, "NOTIFICATION_TIMEOUT", 3600)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the suite's default): half again as many workers as cores. A worker waits on the
    subprocesses it starts and on Textual's frames about a third of the time: on 2 cores, two
    workers kept 1.24 cores busy (438 s), three kept 1.82 busy (381 s)."""
    return max(2, (os.cpu_count() or 1) * 3 // 2)
