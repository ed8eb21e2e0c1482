"""The status line of live review: who the queue says you are, when it last answered, why it does not."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

from rich.text import Text

from reviewer.tui.model.sources import shown
from reviewer.tui.palette import role_text

if TYPE_CHECKING:  # the demo imports this module too: it should not wait for the API's models
    from reviewer.queue.messages import Whoami


@dataclass
class Link:
    """What the status line says about the queue: who we are, when it last answered, why it does not."""

    identity: Whoami | None = None
    answered_at: float | None = None
    retry_at: float | None = None
    problem: str = ""
    stopped: str = ""


def status_text(link: Link, now: float, queue_url: str) -> Text:
    """The line above the footer. `now` comes from the app's clock, so a snapshot shows fixed figures."""
    if link.stopped:
        return role_text(link.stopped, "danger")
    if link.retry_at is not None:
        text = role_text(
            f"{link.problem}, retrying in {max(0, math.ceil(link.retry_at - now))} s (r: now)", "warn.strong"
        )
        text.append(f" · {queue_url}", "muted")
        if link.answered_at is not None:
            text.append(f" · last answer {int(now - link.answered_at)} s ago", "muted")
        return text
    if link.identity is None:
        return Text(f"connecting to {queue_url}…", "italic")
    text = Text(f"signed in as {shown(link.identity.name)} ({link.identity.role})")
    if link.answered_at is not None:
        text.append(f" · queue answered {int(now - link.answered_at)} s ago", "muted")
    return text
