"""Chrome: the one-line bar at the top of every screen, saying what is on screen and whose it is,
and the footer of keys at the bottom.

The bar shows the queue's (or, in the demo, the file's) record of the proposal: id, revision,
digest, proposer. The strings are sanitized and appended as plain text, never as markup.
"""

from __future__ import annotations

from typing import ClassVar

from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Static

from reviewer.plan.sanitize import clip, safe_text, steady_width

NARROW = 80
"""Under this many columns the chrome drops its name and puts who is signed in last, and a part with a
short form (the digest's 12 hex digits) takes it: a phone's SSH app keeps the id, revision and state."""


Part = tuple[str, str] | str | tuple[str, str, str]
"""A part of the bar: its text, or (text, style), or (text, style, short text for a narrow terminal)."""


NARROW_ID_CELLS = 24
"""A proposal id's cells on a narrow terminal: a generated id whole, a longer one's start (which
`reviewer show` and `review` accept)."""


def id_part(proposal_id: str) -> Part:
    """A proposal's id, bold; under `NARROW` columns its first characters and `…`, so the revision
    and the state after it stay on a phone's screen (an agent may name a proposal in 128 characters)."""
    if len(proposal_id) <= NARROW_ID_CELLS:
        return (proposal_id, "bold")
    return (proposal_id, "bold", proposal_id[: NARROW_ID_CELLS - 1] + "…")


class Chrome(Static):
    """Title bar: `reviewer │ mode │ part │ part …`, each part plain text with an optional style."""

    DEFAULT_CSS = """
    Chrome {
        dock: top;
        height: 1;
        background: $panel;
        color: $foreground;
    }
    """

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        self._mode = ""
        self._parts: tuple[Part, ...] = ()

    def show(self, mode: str, *parts: Part) -> None:
        """`mode` (demo, or who is signed in live) comes first where there is room; the parts in their
        order, so a narrow terminal cuts the last ones."""
        self._mode, self._parts = mode, parts
        self.refresh()

    def on_resize(self) -> None:
        self.refresh()

    def render(self) -> Text:
        narrow = self.size.width < NARROW
        text = Text(no_wrap=True, overflow="ellipsis", end="")
        mode = (safe_text(clip(self._mode, 40)), "italic")
        shown: list[tuple[str, str]] = []
        for part in self._parts:
            value, style, short = (
                (part, "", part) if isinstance(part, str) else (*part[:2], part[2 % len(part)])
            )
            shown.append((steady_width(safe_text(clip(short if narrow else value, 80))), style))
        if narrow:
            shown.append(mode)
        else:
            text.append(" reviewer", "bold")
            shown.insert(0, mode)
        for index, (value, style) in enumerate(shown):
            text.append(" │ " if index or not narrow else " ", "muted")
            text.append(value, style)
        return text


HELP_ACTION = "help"
"""The app's help key (`?`): the footer's first key when they do not all fit."""


class KeysFooter(Widget):
    """The line of keys at the bottom: each binding the screen shows, as Textual's `Footer` draws it
    (` key ` bold in the key colour, then `description `; dim when disabled, lit under the mouse; a
    click presses the key), drawn by one widget.

    Textual's footer is a container of one widget per key, composed again at every publication of
    the screen's bindings: styling, laying out and painting them was a tenth of the queue screen's
    first frame and a fifth of a review screen's. The picture is the same."""

    ALLOW_SELECT = False
    COMPONENT_CLASSES: ClassVar[set[str]] = {
        "keys-footer--item",
        "keys-footer--hover",
        "keys-footer--disabled",
        "keys-footer--key",
        "keys-footer--description",
    }
    DEFAULT_CSS = """
    KeysFooter {
        dock: bottom;
        height: 1;
        text-wrap: nowrap;
        color: $footer-foreground;
        background: $footer-background;
        .keys-footer--item {
            background: $footer-item-background;
        }
        .keys-footer--hover {
            color: $footer-key-foreground;
            background: $block-hover-background;
        }
        .keys-footer--disabled {
            text-style: dim;
        }
        .keys-footer--key {
            color: $footer-key-foreground;
            background: $footer-key-background;
            text-style: bold;
        }
        .keys-footer--description {
            color: $footer-description-foreground;
            background: $footer-description-background;
        }
    }
    """

    def __init__(self) -> None:
        super().__init__()
        self._hovered: int | None = None
        self._spans: list[tuple[int, int, str, bool]] = []
        """Each key drawn: its first cell, the cell after it, the key pressed, whether enabled."""

    def on_mount(self) -> None:
        self.screen.bindings_updated_signal.subscribe(self, self._bindings_changed)

    def on_unmount(self) -> None:
        self.screen.bindings_updated_signal.unsubscribe(self)

    def _bindings_changed(self, screen: Screen[object]) -> None:
        self.refresh()

    def shown_bindings(self) -> list[tuple[Binding, bool]]:
        """What `Footer` shows: the screen's active bindings that are shown, the first of each action."""
        shown: dict[str, tuple[Binding, bool]] = {}
        for _, binding, enabled, _ in self.screen.active_bindings.values():
            if binding.show:
                shown.setdefault(binding.action, (binding, enabled))
        return list(shown.values())

    def ordered_bindings(self) -> list[tuple[Binding, bool]]:
        """`shown_bindings`, with the help key first when they do not all fit: on a narrow terminal
        the key that lists every other one stays in sight."""
        bindings = self.shown_bindings()
        needed = sum(
            len(self.app.get_key_display(binding)) + len(binding.description) + 3 for binding, _ in bindings
        )
        if needed <= self.size.width:
            return bindings
        return sorted(bindings, key=lambda shown: shown[0].action != HELP_ACTION)

    def render(self) -> Text:
        item = self.get_component_rich_style("keys-footer--item")
        key_style = self.get_component_rich_style("keys-footer--key")
        description_style = self.get_component_rich_style("keys-footer--description")
        line = Text(no_wrap=True, overflow="crop", end="")
        spans: list[tuple[int, int, str, bool]] = []
        for index, (binding, enabled) in enumerate(self.ordered_bindings()):
            base, key, description = item, key_style, description_style
            if index == self._hovered:  # the key's parts over the lit background, as a FooterKey's
                base = self.get_component_rich_style("keys-footer--hover")
                key = base + self.get_component_rich_style("keys-footer--key", partial=True)
                description = base + self.get_component_rich_style("keys-footer--description", partial=True)
            if not enabled:
                base += self.get_component_rich_style("keys-footer--disabled", partial=True)
            label = Text.assemble(
                (f" {self.app.get_key_display(binding)} ", key),
                (f"{binding.description} ", description),
            )
            label.stylize_before(base)
            start = line.cell_len
            line.append_text(label)
            spans.append((start, line.cell_len, binding.key, enabled))
        self._spans = spans
        return line

    def _key_at(self, x: int) -> int | None:
        return next((index for index, (start, end, _, _) in enumerate(self._spans) if start <= x < end), None)

    def on_mouse_move(self, event: events.MouseMove) -> None:
        hovered = self._key_at(event.x)
        if hovered != self._hovered:
            self._hovered = hovered
            self.refresh()

    def on_leave(self, event: events.Leave) -> None:
        if self._hovered is not None:
            self._hovered = None
            self.refresh()

    def on_mouse_down(self, event: events.MouseDown) -> None:
        index = self._key_at(event.x)
        if index is None:
            return
        _, _, key, enabled = self._spans[index]
        if enabled:
            self.app.simulate_key(key)
        else:
            self.app.bell()
