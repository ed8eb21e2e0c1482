"""Untrusted text to display text: the one boundary every string from a proposal crosses.

A model wrote every string in a proposal. Sent to a terminal as it is, an ESC sequence can move the
cursor and overwrite the line a reviewer reads, a bidi override can reverse what an argument
appears to say, and a zero-width or tag character can hide words. So each such character becomes a
visible escape (`\\x1b`, `\\u202e`, `\\U000e0041`) and the result says it found hidden characters.
Nothing is dropped: every character of the input is either kept or written as its escape.

Markup is a separate danger, handled where text meets a widget: sanitized text reaches Textual
only inside `rich.text.Text` / `textual.content.Content` objects, never parsed as markup.
"""

from __future__ import annotations

import re
from typing import Any, NamedTuple

from reviewer.proposal import dumps

# Every code point of the general categories Cc (controls, C0 and C1), Cf (format: bidi controls,
# zero-width characters, soft hyphen, tag characters), Zl and Zp (line and paragraph separators)
# and Cs (lone surrogates). tests/test_sanitize.py checks this list against `unicodedata`.
_HIDDEN_RANGES = (
    (0x0000, 0x001F),
    (0x007F, 0x009F),
    (0x00AD, 0x00AD),
    (0x0600, 0x0605),
    (0x061C, 0x061C),
    (0x06DD, 0x06DD),
    (0x070F, 0x070F),
    (0x0890, 0x0891),
    (0x08E2, 0x08E2),
    (0x180E, 0x180E),
    (0x200B, 0x200F),
    (0x2028, 0x202E),
    (0x2060, 0x2064),
    (0x2066, 0x206F),
    (0xD800, 0xDFFF),
    (0xFEFF, 0xFEFF),
    (0xFFF9, 0xFFFB),
    (0x110BD, 0x110BD),
    (0x110CD, 0x110CD),
    (0x13430, 0x1343F),
    (0x1BCA0, 0x1BCA3),
    (0x1D173, 0x1D17A),
    (0xE0001, 0xE0001),
    (0xE0020, 0xE007F),
)
HIDDEN_RANGES = _HIDDEN_RANGES
"""The hidden characters as inclusive code point ranges, for scanners of encoded text (analysis)."""
_LAYOUT = {"\t": "\\t", "\n": "\\n"}
"""Tab and newline are not hiding anything, but inside one line they would break the layout."""


def _character_class(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(
        re.escape(chr(low)) if low == high else f"{re.escape(chr(low))}-{re.escape(chr(high))}"
        for low, high in ranges
    )


_HIDDEN = re.compile(f"[{_character_class(_HIDDEN_RANGES)}]")
_HIDDEN_EXCEPT_NEWLINE = re.compile(
    f"[{_character_class(((0x0000, 0x0009), (0x000B, 0x001F), *_HIDDEN_RANGES[1:]))}]"
)


class Sanitized(NamedTuple):
    text: str
    hidden: bool
    """True when the input carried control, bidi, zero-width or other invisible characters."""


def escape_character(character: str) -> str:
    code = ord(character)
    if code <= 0xFF:
        return f"\\x{code:02x}"
    if code <= 0xFFFF:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def _escape_match(match: re.Match[str]) -> str:
    character = match.group()
    return _LAYOUT.get(character) or escape_character(character)


def sanitize(text: str, *, multiline: bool = False) -> Sanitized:
    """Make `text` safe to show: hidden characters become visible escapes, and say so.

    With `multiline`, newlines are kept as line breaks (a carriage return never is: it would let
    the next characters overwrite the line).
    """
    pattern = _HIDDEN_EXCEPT_NEWLINE if multiline else _HIDDEN
    if pattern.search(text) is None:
        return Sanitized(text, False)
    hidden = any(character not in _LAYOUT for character in pattern.findall(text))
    return Sanitized(pattern.sub(_escape_match, text), hidden)


def safe_text(text: str, *, multiline: bool = False) -> str:
    return sanitize(text, multiline=multiline).text


def has_hidden(text: str) -> bool:
    return sanitize(text).hidden


def clip(text: str, limit: int) -> str:
    """At most `limit` characters, saying how many were left out (a 10 MB string stays readable)."""
    if len(text) <= limit:
        return text
    marker = f"… (+{len(text) - limit:,} chars)"
    return text[: max(limit - len(marker), 0)] + marker


def compact_json(value: Any) -> str:
    """A JSON value on one line, for a table cell; still untrusted until sanitized."""
    if isinstance(value, str):
        return value
    return dumps(value).decode()


def safe_value(value: Any, limit: int) -> Sanitized:
    """Any proposal value as clipped, sanitized one-line text (clipped first: cheap on huge strings)."""
    return sanitize(clip(compact_json(value), limit))
