"""Chrome: the one-line bar at the top of every screen, saying what is on screen and whose it is,
and the footer of keys at the bottom.

The bar shows the queue's (or, in the demo, the file's) record of the proposal: id, revision,
digest, proposer. The strings are sanitized and appended as plain text, never as markup.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.screen import Screen
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
    """Textual's footer, its keys composed with it, each in its final style, and composed again only
    when the keys it would show change.

    Textual's footer composes nothing until the screen's bindings are first published, then
    composes its keys, and composes them all again at every publication of the bindings, most of
    which change nothing it shows: a tenth of the queue screen's first frame. A `FooterKey` is born
    compact and then bound to the footer's `compact` (False here), so Textual restyled every key
    twice as it mounted; given the footer's value before it mounts, a key is styled once. It looks
    the same."""

    def __init__(self) -> None:
        super().__init__()
        self.set_reactive(Footer._bindings_ready, True)
        self._composed_keys: tuple[tuple[object, ...], ...] | None = None

    def shown_keys(self) -> tuple[tuple[object, ...], ...]:
        """What `Footer.compose` reads of each binding it shows."""
        return tuple(
            (binding.key, self.app.get_key_display(binding), binding.description, binding.action)
            + (binding.group, enabled, tooltip)
            for _, binding, enabled, tooltip in self.screen.active_bindings.values()
            if binding.show
        )

    def compose(self) -> ComposeResult:
        self._composed_keys = self.shown_keys()
        for widget in super().compose():
            if isinstance(widget, FooterKey):
                widget.set_reactive(FooterKey.compact, self.compact)
            yield widget

    def bindings_changed(self, screen: Screen[object]) -> None:
        if screen is self.screen and self.is_attached and self.shown_keys() == self._composed_keys:
            return
        super().bindings_changed(screen)
