"""The app's one colour scheme: a Textual theme, the named Rich styles the panes use, and the filter
that shows the screen in the colours the terminal really has.

Every text colour here was chosen for a contrast of at least 4.5:1 (WCAG) against every background
a row can have (normal, cursor, added, changed, removed) in truecolor, in 256 colours and in the 16
colours of a dark xterm palette; tests/tui/test_contrast.py measures it from the rendered segments.
Danger is never carried by colour alone: it is bold, and without colour (NO_COLOR) it is reversed,
so it stays the strongest text on the screen instead of the dimmest grey.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.color import ColorSystem
from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from rich.theme import Theme as RichTheme
from textual.color import Color
from textual.filter import LineFilter
from textual.theme import Theme

DANGER = "#ff6e6e"
WARNING = "#ffd75f"
SUCCESS = "#5fff87"
MUTED = "#b0b0b0"
FOREGROUND = "#e6e6e6"
ACCENT = "#7fb7ff"
ALARM_BACKGROUND = "#8a1c1c"

THEME = Theme(
    name="reviewer",
    primary="#4f7fc4",
    secondary="#7fb7ff",
    accent=ACCENT,
    warning=WARNING,
    error=DANGER,
    success=SUCCESS,
    foreground=FOREGROUND,
    background="#121212",
    surface="#1c1c1c",
    panel="#1e2328",
    dark=True,
    variables={
        # Row backgrounds dark enough that every text colour keeps 4.5:1 on them, and that fall to
        # black in 16 colours (where the marks in the first column tell the rows apart).
        "row-cursor": "#1c2633",
        "row-added": "#132a1c",
        "row-changed": "#2c2610",
        "row-removed": "#331616",
        "row-outcome": "#1a1f2a",
        "alarm-background": ALARM_BACKGROUND,
        "text-muted": MUTED,
        "footer-key-foreground": ACCENT,
        "footer-description-foreground": FOREGROUND,
        "footer-background": "#1e2328",
        "footer-item-background": "#1e2328",
        "block-cursor-background": "#1c2633",
        "block-cursor-foreground": FOREGROUND,
        "block-cursor-text-style": "bold",
        "scrollbar": "#3a4350",
    },
)

COLOUR_STYLES = {
    "danger": f"bold {DANGER}",
    "danger.banner": f"bold #ffffff on {ALARM_BACKGROUND}",
    "warn": WARNING,
    "warn.strong": f"bold {WARNING}",
    "ok": SUCCESS,
    "ok.strong": f"bold {SUCCESS}",
    "muted": MUTED,
    "note": f"italic {MUTED}",
    "old": DANGER,
    "new": SUCCESS,
    "info": ACCENT,
}
"""What each role looks like in colour; the panes name roles, never colours."""

NO_COLOR_STYLES = {
    "danger": "bold reverse",
    "danger.banner": "bold reverse",
    "warn": "bold",
    "warn.strong": "bold underline",
    "ok": "none",
    "ok.strong": "bold",
    "muted": "none",
    "note": "italic",
    "old": "strike",
    "new": "bold",
    "info": "none",
}
"""Without colour: danger reversed, warnings bold, and nothing dimmed (dim is the first thing a tired
reader or a washed-out terminal loses)."""


def role_text(words: str, role: str) -> Text:
    """`words` in the style of `role`, as a span. Textual reads a `Text`'s own style (the second
    argument of `Text(words, style)`) as one of its styles, where a role's name means nothing, and
    drew those words unstyled; a span's style it looks up in the roles."""
    return Text.assemble((words, role))


def rich_theme(no_color: bool) -> RichTheme:
    return RichTheme(NO_COLOR_STYLES if no_color else COLOUR_STYLES, inherit=True)


class TerminalColours(LineFilter):
    """Shows the segments in the colours a 256- or 16-colour terminal will give them (the nearest of
    its palette), so what tests measure and snapshots show is what the reviewer sees there."""

    def __init__(self, system: ColorSystem, enabled: bool = True) -> None:
        super().__init__(enabled=enabled)
        self.system = system
        self._styles: dict[Style, Style] = {}

    def _downgraded(self, style: Style) -> Style:
        cached = self._styles.get(style)
        if cached is None:
            color = style.color.downgrade(self.system) if style.color else None
            bgcolor = style.bgcolor.downgrade(self.system) if style.bgcolor else None
            cached = self._styles[style] = style + Style.from_color(color, bgcolor)
        return cached

    def apply(self, segments: list[Segment], background: Color) -> list[Segment]:
        return [
            Segment(text, self._downgraded(style) if style else style, control)
            for text, style, control in segments
        ]


def terminal_filters(system: ColorSystem | None) -> Sequence[LineFilter]:
    """The filter for a terminal of fewer colours than truecolor; none for truecolor."""
    if system in (ColorSystem.STANDARD, ColorSystem.EIGHT_BIT, ColorSystem.WINDOWS):
        return [TerminalColours(ColorSystem.STANDARD if system is ColorSystem.WINDOWS else system)]
    return []


COLOR_SYSTEMS = {
    "standard": ColorSystem.STANDARD,
    "256": ColorSystem.EIGHT_BIT,
    "truecolor": ColorSystem.TRUECOLOR,
    "windows": ColorSystem.WINDOWS,
}
"""Rich's names of the colour systems (as TEXTUAL_COLOR_SYSTEM spells them)."""
