"""Chrome: the one-line bar at the top of every screen, saying what is on screen and whose it is.

It shows the queue's (or, in the demo, the file's) record of the proposal: id, revision, digest,
proposer. The strings are sanitized and appended as plain text, never as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.widgets import Static

from reviewer.plan.sanitize import clip, safe_text, steady_width


class Chrome(Static):
    """Title bar: `reviewer │ part │ part …`, each part plain text with an optional style."""

    DEFAULT_CSS = """
    Chrome {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    def show(self, mode: str, *parts: tuple[str, str] | str) -> None:
        """`mode` (demo, or who is signed in live) comes first, so a narrow terminal never cuts it."""
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append(" reviewer", "bold")
        text.append(" │ ", "muted")
        text.append(safe_text(clip(mode, 40)), "italic")
        for part in parts:
            value, style = (part, "") if isinstance(part, str) else part
            text.append(" │ ", "muted")
            text.append(steady_width(safe_text(clip(value, 80))), style)
        self.update(text)
