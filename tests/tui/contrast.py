"""Contrast of every character on a running app's screen, computed from the segments it renders.

WCAG 2 contrast between each character's foreground and background, after reverse and dim, with
colours resolved the way the terminal will show them: truecolor as is, 256 and 16 colours through
the app's own filter (the nearest palette entry), palette entries in a dark xterm palette.

The app's 256- and 16-colour filters only map each segment's colours: one truecolor app's screen,
passed through them here, is the screen the app shows in those modes, so one app is measured in all
three (`tests/tui/test_contrast.py` checks the two ways agree).
"""

from __future__ import annotations

import io
from dataclasses import dataclass

from rich.color import Color
from rich.console import Console
from rich.segment import Segment
from rich.style import Style
from rich.terminal_theme import TerminalTheme
from textual.app import App

from reviewer.tui.palette import COLOR_SYSTEMS, terminal_filters

XTERM_DARK = TerminalTheme(
    (0, 0, 0),
    (229, 229, 229),
    [
        (0, 0, 0), (205, 0, 0), (0, 205, 0), (205, 205, 0), (0, 0, 238), (205, 0, 205), (0, 205, 205),
        (229, 229, 229),
    ],
    [
        (127, 127, 127), (255, 0, 0), (0, 255, 0), (255, 255, 0), (92, 92, 255), (255, 0, 255),
        (0, 255, 255), (255, 255, 255),
    ],
)  # fmt: skip
"""xterm's default palette on a black background: the terminal an on-call engineer's SSH most often
lands in. Colours named by number resolve through it."""

NOT_TEXT = frozenset(
    [chr(code) for code in range(0x2500, 0x25A0)]  # box drawing and blocks: borders, scrollbars
    + [" ", "\u00a0"]
)
WCAG_TEXT = 4.5


@dataclass(frozen=True)
class LowContrast:
    row: int
    text: str
    ratio: float
    style: str


def luminance(color: tuple[int, int, int]) -> float:
    def channel(value: int) -> float:
        scaled = value / 255
        return scaled / 12.92 if scaled <= 0.03928 else ((scaled + 0.055) / 1.055) ** 2.4

    red, green, blue = color
    return 0.2126 * channel(red) + 0.7152 * channel(green) + 0.0722 * channel(blue)


def contrast(first: tuple[int, int, int], second: tuple[int, int, int]) -> float:
    lighter, darker = sorted((luminance(first), luminance(second)), reverse=True)
    return (lighter + 0.05) / (darker + 0.05)


def _rgb(color: Color | None, foreground: bool) -> tuple[int, int, int]:
    if color is None or color.is_default:
        return XTERM_DARK.foreground_color if foreground else XTERM_DARK.background_color  # type: ignore[return-value]
    triplet = color.get_truecolor(XTERM_DARK, foreground=foreground)
    return (triplet.red, triplet.green, triplet.blue)


def colours_of(style: Style) -> tuple[tuple[int, int, int], tuple[int, int, int]]:
    """(foreground, background) as the terminal paints them."""
    foreground, background = _rgb(style.color, True), _rgb(style.bgcolor, False)
    if style.reverse:
        foreground, background = background, foreground
    if style.dim:
        foreground = tuple((f + b) // 2 for f, b in zip(foreground, background, strict=True))  # type: ignore[assignment]
    return foreground, background


def screen_segments(app: App[object], shown_in: str | None = None) -> list[list[Segment]]:
    """The screen (with the screens under a dialog) as rows of styled segments, the app's filters
    applied, then, if `shown_in` names a colour system ("256", "standard"), that terminal's."""
    width, height = app.size
    console = Console(width=width, height=height, file=io.StringIO(), force_terminal=True,
                      color_system="truecolor", legacy_windows=False, safe_box=False)  # fmt: skip
    update = app.screen._compositor.render_update(full=True, screen_stack=app._background_screens)
    segments = [segment for segment in console.render(update) if not segment.control]
    lines = list(Segment.split_lines(segments))
    for terminal in terminal_filters(COLOR_SYSTEMS[shown_in]) if shown_in else ():
        lines = [terminal.apply(line, app.screen.background_colors[1]) for line in lines]
    return lines


def low_contrast(
    app: App[object], minimum: float = WCAG_TEXT, shown_in: str | None = None
) -> list[LowContrast]:
    """Every run of text whose contrast is below `minimum` (in the terminal `shown_in` names)."""
    found: list[LowContrast] = []
    for row, line in enumerate(screen_segments(app, shown_in)):
        for text, style, _ in line:
            letters = "".join(character for character in text if character not in NOT_TEXT)
            if not letters or style is None:
                continue
            ratio = contrast(*colours_of(style))
            if ratio < minimum:
                found.append(LowContrast(row, letters, round(ratio, 2), str(style)))
    return found


def styles_of(app: App[object], word: str) -> list[Style]:
    """The style of each segment on screen that holds `word`."""
    return [
        style
        for line in screen_segments(app)
        for text, style, _ in line
        if style is not None and word in text
    ]
