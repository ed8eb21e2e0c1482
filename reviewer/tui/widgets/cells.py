"""Untrusted text cut to a table cell: sanitized, made steady in width, then truncated by terminal
cells with an ellipsis, so a cell is always exactly as wide as its column."""

from __future__ import annotations

from rich.cells import cell_len
from rich.text import Text

from reviewer.plan.sanitize import clip, safe_text, steady_width

CURSOR_GLYPH = "▶"
"""Marks the cursor's row in every table, so it shows where colour does not (16 colours, NO_COLOR)."""


def fit(value: str, cells: int, *, right: bool = False) -> str:
    """`value` made safe and exactly `cells` cells wide (wide characters counted)."""
    text = Text(steady_width(safe_text(clip(value, cells * 4))), no_wrap=True, end="")
    text.truncate(cells, overflow="ellipsis", pad=True)
    if right:
        stripped = text.plain.strip()
        return " " * (cells - cell_len(stripped)) + stripped
    return text.plain


def cell(value: str, cells: int, style: str = "") -> Text:
    return Text(fit(value, cells).rstrip(), style, no_wrap=True)


def fit_end(value: str, cells: int) -> str:
    """`value` made safe and at most `cells` cells wide, cut at its start: `…` then its end, where
    paths differ (`/v1/tickets/t1`, `…/t2`)."""
    text = steady_width(safe_text(value[-4_096:]))
    if cell_len(text) <= cells:
        return text
    kept = ""
    for character in reversed(text):
        if cell_len(character + kept) > cells - 1:
            break
        kept = character + kept
    return "…" + kept


def cut(text: Text, cells: int) -> Text:
    """A styled `text` at most `cells` wide, ending `…` when it was cut (never cut silently)."""
    shown = text.copy()
    shown.no_wrap = True
    shown.truncate(cells, overflow="ellipsis")
    return shown
