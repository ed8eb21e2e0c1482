"""Chrome: the one-line bar at the top of every screen, saying what is on screen and whose it is,
and the footer of keys at the bottom.

The bar shows the queue's (or, in the demo, the file's) record of the proposal: id, revision,
digest, proposer. The strings are sanitized and appended as plain text, never as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.widgets import Footer, Static
from textual.widgets._footer import FooterKey

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


class KeysFooter(Footer):
    """Textual's footer, each key mounted in its final style. A `FooterKey` is born compact and then
    bound to the footer's `compact` (False here), so Textual restyled every key twice as it mounted,
    and again at each change of bindings: about a third of the time to open a review screen. Given
    the footer's value before it mounts, a key is styled once; it looks the same."""

    def compose(self) -> ComposeResult:
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget
