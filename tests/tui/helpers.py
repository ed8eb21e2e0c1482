"""Helpers for the terminal app's tests: where the samples are, and how to wait for the loader."""

from __future__ import annotations

from pathlib import Path

SAMPLES = Path(__file__).resolve().parents[2] / "sample_proposals"


async def wait_until_loaded(pilot) -> None:  # type: ignore[no-untyped-def]
    """Let the loader (and any pane worker) finish, then let the screen repaint."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
