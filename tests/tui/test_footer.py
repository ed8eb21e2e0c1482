"""The footer of keys is drawn by one widget: it shows what Textual's `Footer` shows, cell for cell
and style for style (a disabled key dim, the key under the mouse lit), and a click presses its key."""

from __future__ import annotations

from typing import ClassVar

import pytest
from rich.segment import Segment
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingType
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer, Static

from reviewer.tui.palette import THEME
from reviewer.tui.widgets.chrome import KeysFooter
from tests.tui.contrast import screen_segments

pytestmark = pytest.mark.anyio


class KeysScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("enter", "open", "Open"),
        Binding("up,k", "move", "Up"),
        Binding("a", "approve", "Approve"),
        Binding("h", "hidden", "Hidden", show=False),
        Binding("d", "drift", "Drift"),
        Binding("x", "reject", "Reject everything that was proposed"),
    ]

    def __init__(self, footer: Widget) -> None:
        super().__init__()
        self.footer = footer
        self.approved = 0

    def compose(self) -> ComposeResult:
        yield Static("body")
        yield self.footer

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        return None if action == "drift" else True  # None: shown, disabled

    def action_approve(self) -> None:
        self.approved += 1


class KeysApp(App[None]):
    ENABLE_COMMAND_PALETTE = False  # as the reviewer's app: no palette key at the footer's right

    def __init__(self, footer: Widget) -> None:
        super().__init__()
        self.register_theme(THEME)
        self.theme = THEME.name
        self.keys_screen = KeysScreen(footer)

    def on_mount(self) -> None:
        self.push_screen(self.keys_screen)


async def footer_line(footer: Widget, width: int, hover_x: int | None = None) -> list[Segment]:
    app = KeysApp(footer)
    async with app.run_test(size=(width, 5)) as pilot:
        await pilot.pause()
        for _ in range(50):  # Textual's own Footer may draw its keys a frame later on a busy machine
            if "".join(text for text, _, _ in screen_segments(app)[-1]).strip():
                break
            await pilot.pause()
        if hover_x is not None:
            await pilot.hover(offset=(hover_x, 4))
            await pilot.pause()
        return [Segment(text, style) for text, style, _ in screen_segments(app)[-1]]


def merged(line: list[Segment]) -> list[tuple[str, str]]:
    """Runs of one style, whatever the segments were cut into."""
    runs: list[tuple[str, str]] = []
    for text, style, _ in Segment.simplify(line):
        runs.append((text, str(style)))
    return runs


@pytest.mark.parametrize("width", [100, 30])
async def test_the_keys_are_drawn_as_textuals_footer_draws_them(width: int) -> None:
    """Wide enough for every key, and cut at the edge (the description that does not fit is cut)."""
    ours = merged(await footer_line(KeysFooter(), width))
    theirs = merged(await footer_line(Footer(), width))
    assert "".join(text for text, _ in ours).startswith(" ⏎ Open  ↑ Up  a Approve ")
    assert ours == theirs


@pytest.mark.parametrize("x", [1, 10, 28])
async def test_the_key_under_the_mouse_is_lit_as_textuals_footer_lights_it(x: int) -> None:
    ours = merged(await footer_line(KeysFooter(), 100, hover_x=x))
    theirs = merged(await footer_line(Footer(), 100, hover_x=x))
    assert ours == theirs
    assert ours != merged(await footer_line(KeysFooter(), 100))


async def test_a_click_presses_the_key_and_a_disabled_key_does_nothing() -> None:
    app = KeysApp(KeysFooter())
    async with app.run_test(size=(100, 5)) as pilot:
        await pilot.pause()
        line = "".join(text for text, _, _ in screen_segments(app)[-1])
        assert await pilot.click(offset=(line.index("Approve"), 4))
        await pilot.pause()
        assert app.keys_screen.approved == 1
        assert await pilot.click(offset=(line.index("Drift"), 4))  # disabled: a bell, no action
        assert await pilot.click(offset=(99, 4))  # past the keys
        await pilot.pause()
        assert app.keys_screen.approved == 1
