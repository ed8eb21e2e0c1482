"""Helpers for the terminal app's tests: where the samples are, and how to wait for the loader."""

from __future__ import annotations

from pathlib import Path

from reviewer.tui.screens.review import ReviewScreen

SAMPLES = Path(__file__).resolve().parents[2] / "sample_proposals"


async def wait_until_loaded(pilot) -> None:  # type: ignore[no-untyped-def]
    """Let the loader (and any pane worker) finish, then let the screen repaint."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def open_review(pilot) -> ReviewScreen:  # type: ignore[no-untyped-def]
    """Once the queue is loaded, open the proposal under the cursor and wait for its review."""
    await wait_until_loaded(pilot)
    await pilot.press("enter")
    await wait_until_loaded(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, ReviewScreen)
    return screen
