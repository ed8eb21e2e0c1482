"""Helpers for live review: the running queue and its tokens, and a pilot that waits for the screen."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any

from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from reviewer.queue.client import QueueClient
from reviewer.queue.config import Secret
from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from tests.queue_harness import Service


@dataclass
class Queue:
    """A running service and the tokens of two reviewers and an agent."""

    service: Service
    tokens: dict[str, str]

    @property
    def url(self) -> str:
        return self.service.url

    def agent(self) -> QueueClient:
        return QueueClient(self.url, self.tokens["agent"])

    def reviewer(self, name: str = "alice") -> QueueClient:
        return QueueClient(self.url, self.tokens[name])

    def app(self, name: str = "alice", **options: Any) -> ReviewerApp:
        """The app on this queue as `name`. Its polls are answered at once unless a test gives
        `list_wait`: a scenario that polls with `poll_now` sees the queue only when it asks."""
        options.setdefault("list_wait", 0.0)
        options.setdefault("poll_interval", 0.3)
        options.setdefault("retry_base", 0.2)
        options.setdefault("max_backoff", 1.0)
        return ReviewerApp(QueueSource(self.url, Secret(self.tokens[name]), **options))


def run(scenario: Callable[[], Coroutine[Any, Any, None]]) -> None:
    asyncio.run(scenario())


async def until(pilot: Pilot[Any], predicate: Callable[[], object], what: str, timeout: float = 8.0) -> float:
    """Seconds until `predicate()` holds, letting the app run meanwhile; fails after `timeout`."""
    start = time.monotonic()
    while not predicate():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        await pilot.pause(0.02)
    return time.monotonic() - start


def shown_text(app: Any, selector: str) -> str:
    """The plain text a Static of the current screen (or the queue screen) shows."""
    for screen in (app.screen, app.queue_screen):
        for static in screen.query(selector).results(Static):
            return str(static.render())
    return ""


def status(app: ReviewerApp) -> str:
    return shown_text(app, "#status") if app.queue_screen.is_mounted else ""


async def open_proposal(pilot: Pilot[Any], app: ReviewerApp, proposal_id: str) -> None:
    """Move the queue's cursor to `proposal_id`, press enter, and wait for its review screen and for
    its checks and digest, which a decision names (the queue answers them in a worker of their own)."""
    table = app.queue_screen.query_one("#queue", DataTable)
    table.move_cursor(row=table.get_row_index(proposal_id))
    await pilot.press("enter")
    item = app.items[proposal_id]
    await until(pilot, lambda: getattr(app.screen, "item", None) is item, "its review")
    revision = app.screen.revision  # type: ignore[attr-defined]
    await until(
        pilot, lambda: revision in item.verified or revision in item.problems, "its checks and digest"
    )


async def decide_from_keyboard(pilot: Pilot[Any], *keys: str) -> None:
    """Press the decision key and answer the confirmation (`a`, `y`; or `x`, a reason, `enter`)."""
    for key in keys:
        await pilot.press(key)
        await pilot.pause()
