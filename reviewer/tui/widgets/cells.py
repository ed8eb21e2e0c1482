"""Untrusted text cut to a table cell: sanitized, then truncated by terminal cells with an ellipsis."""

from __future__ import annotations

from rich.text import Text

from reviewer.sanitize import clip, safe_text


def fit(value: str, cells: int, *, right: bool = False) -> str:
    """`value` made safe and exactly `cells` cells wide (wide characters counted)."""
    text = Text(safe_text(clip(value, cells * 4)), no_wrap=True, end="")
    text.truncate(cells, overflow="ellipsis", pad=True)
    if right:
        return text.plain.strip().rjust(cells)
    return text.plain


def cell(value: str, cells: int, style: str = "") -> Text:
    return Text(fit(value, cells).rstrip(), style, no_wrap=True)
