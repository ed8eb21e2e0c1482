"""Untrusted text to display text: the one boundary every string from a proposal crosses.

A model wrote every string in a proposal. Sent to a terminal as it is, an ESC sequence can move the
cursor and overwrite the line a reviewer reads, a bidi override can reverse what an argument
appears to say, and a zero-width, tag, variation-selector or filler character can hide words. So
each such character (every control, format and separator character, and every other default-ignorable
code point) becomes a visible escape (`\\x1b`, `\\u202e`, `\\U000e0041`) and the result says it
found hidden characters. Nothing is dropped: every character is either kept or written as its escape.

Two dangers are not invisible characters, so they are flagged rather than escaped: an identifier a
reviewer reads as a word (a tool name, an argument key, a path) that mixes scripts or is written in
letters that pass for Latin ones (`dеlete_ticket` with a Cyrillic е: `reviewer.plan.lookalikes`),
and text that is not in NFC (an `é` built from `e` and a combining accent compares unequal to the
one typed).

A table cell must keep its width exactly, whatever the text: `steady_width` writes the characters a
terminal may draw at another width than the one counted (combining marks, the few glyphs far wider
than their cell) as escapes in cells, so no border is pushed out of line.

Markup is a separate danger, handled where text meets a widget: sanitized text reaches Textual
only inside `rich.text.Text` / `textual.content.Content` objects, never parsed as markup.
"""

from __future__ import annotations

import re
import unicodedata
from functools import cache
from typing import Any, Final, NamedTuple

from reviewer.plan.proposal import dumps

# Every code point of the general categories Cc (controls, C0 and C1), Cf (format: bidi controls,
# zero-width characters, soft hyphen, tag characters), Zl and Zp (line and paragraph separators)
# and Cs (lone surrogates). tests/plan/test_sanitize.py checks this list against `unicodedata`.
_CATEGORY_RANGES = (
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
# The rest of Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): characters a
# terminal draws as nothing though they are letters or marks by category: the combining grapheme
# joiner, the Hangul fillers, Khmer inherent vowels, Mongolian variation selectors, the variation
# selectors (and their supplement), and the code points reserved as default-ignorable.
_DEFAULT_IGNORABLE_RANGES = (
    (0x034F, 0x034F),
    (0x115F, 0x1160),
    (0x17B4, 0x17B5),
    (0x180B, 0x180F),
    (0x2065, 0x2065),
    (0x3164, 0x3164),
    (0xFE00, 0xFE0F),
    (0xFFA0, 0xFFA0),
    (0xFFF0, 0xFFF8),
    (0xE0000, 0xE0FFF),
)


def _merged(ranges: tuple[tuple[int, int], ...]) -> tuple[tuple[int, int], ...]:
    merged: list[tuple[int, int]] = []
    for low, high in sorted(ranges):
        if merged and low <= merged[-1][1] + 1:
            merged[-1] = (merged[-1][0], max(high, merged[-1][1]))
        else:
            merged.append((low, high))
    return tuple(merged)


_HIDDEN_RANGES = _merged(_CATEGORY_RANGES + _DEFAULT_IGNORABLE_RANGES)
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
    """True when the input carried control, bidi, zero-width or other default-ignorable characters."""


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
    # The marker takes room from the text, so it must count its own room too: grow the count
    # until it matches what is really cut (it only grows, so this ends within a few rounds).
    cut = len(text) - limit
    while True:
        marker = f"… (+{cut:,} chars)"
        kept = max(limit - len(marker), 0)
        if len(text) - kept == cut:
            return text[:kept] + marker
        cut = len(text) - kept


def compact_json(value: Any) -> str:
    """A JSON value on one line, for a table cell; still untrusted until sanitized."""
    if isinstance(value, str):
        return value
    return dumps(value).decode()


def safe_value(value: Any, limit: int) -> Sanitized:
    """Any proposal value as clipped, sanitized one-line text (clipped first: cheap on huge strings).

    Inside a JSON-encoded value a control character is already an escape (`\\u001b`): harmless to
    show, but still a hidden character the reviewer must be told about.
    """
    text = clip(compact_json(value), limit)
    sanitized = sanitize(text)
    if sanitized.hidden or isinstance(value, str):
        return sanitized
    return Sanitized(sanitized.text, json_has_hidden(text.encode("utf-8", "surrogatepass")))


# Hidden characters in JSON text. C0 controls never appear raw in JSON: they are escapes (\b \f \r
# \u00XX; \t and \n are layout, not hidden). Every other hidden character appears raw, as UTF-8.
_ESCAPED_CONTROL: Final = re.compile(rb"\\(?:[bfr]|u000[0-8bBcCdDeEfF]|u001[0-9a-fA-F])")


@cache
def _raw_hidden_alternatives() -> dict[int, bytes]:
    """One pattern's source per UTF-8 lead byte: each starts with a literal byte, so `re` scans at
    memchr speed, and a lead byte absent from a text costs no pattern at all (`_raw_hidden_pattern`).

    Built from `_HIDDEN_RANGES`, the one definition of a hidden character. Lone surrogates cannot be
    encoded as UTF-8 at all (encoding fails, which callers treat as hidden) and C0 controls are
    escapes in JSON, so both are left out here. Encodings that differ only in their last byte share
    one alternative with a byte class, so the 4,096 tag and variation-selector code points cost 64.
    """
    endings: dict[bytes, list[int]] = {}
    for low, high in _HIDDEN_RANGES:
        for code in range(max(low, 0x20), high + 1):
            if 0xD800 <= code <= 0xDFFF:
                continue
            encoded = chr(code).encode()
            endings.setdefault(encoded[:-1], []).append(encoded[-1])
    alternatives: dict[int, list[bytes]] = {}
    for prefix, last_bytes in endings.items():
        if not prefix:  # a one-byte character: its own lead byte
            for byte in last_bytes:
                alternatives.setdefault(byte, []).append(b"\\x%02x" % byte)
            continue
        escaped_prefix = b"".join(b"\\x%02x" % byte for byte in prefix)
        byte_class = b"".join(b"\\x%02x" % byte for byte in sorted(last_bytes))
        alternatives.setdefault(prefix[0], []).append(escaped_prefix + b"[" + byte_class + b"]")
    return {lead: b"|".join(items) for lead, items in alternatives.items()}


@cache
def _raw_hidden_pattern(lead: int) -> re.Pattern[bytes]:
    """The hidden characters whose UTF-8 starts with `lead`, compiled on the first text holding it
    (all of them take longer to compile than a shell command's requests: an ASCII plan needs none)."""
    return re.compile(_raw_hidden_alternatives()[lead])


def prepare_hidden_patterns() -> None:
    """Build the patterns `json_has_hidden` scans with (about 20 ms) ahead of their first use, off
    the path that needs them: the first rows of a plan opened would otherwise wait for them."""
    for lead in _raw_hidden_alternatives():
        _raw_hidden_pattern(lead)


def json_has_hidden(encoded: bytes) -> bool:
    """Whether JSON text (as `proposal.dumps` writes it) holds a string with a hidden character.

    The same answer as `has_hidden` on every string (and key) inside, without decoding:
    a 25 MB plan is scanned in tens of milliseconds. An escape counts only when the backslash that
    starts it is not itself escaped, i.e. an even number of backslashes precedes it.
    """
    for lead in _raw_hidden_alternatives():
        if lead in encoded and _raw_hidden_pattern(lead).search(encoded):
            return True
    for match in _ESCAPED_CONTROL.finditer(encoded):
        start = backslash = match.start()
        while backslash > 0 and encoded[backslash - 1] == 0x5C:
            backslash -= 1
        if (start - backslash) % 2 == 0:
            return True
    return False


# --- unnormalized text ----------------------------------------------------------------------------


def unnormalized(text: str) -> bool:
    """Whether `text` is not in NFC: two strings that look the same may then compare unequal."""
    return not text.isascii() and not unicodedata.is_normalized("NFC", text)


# --- exact widths in cells ------------------------------------------------------------------------

_OVERWIDE: Final = frozenset("\ufdfd\u2e3b\u2e3a\ua9c5\u102a\u0bf5\u0bf8\u0bfa\u2031\u0f3a\u0f3b")
"""Glyphs counted one cell wide but drawn over several (the Arabic ligature ﷽, the three-em dash ⸻,
Tamil and Tibetan signs): in a cell their ink covers the next column and the border after it."""
_OVERWIDE_BLOCKS: Final = ((0x12000, 0x1254F), (0x13000, 0x1345F))
"""Cuneiform and Egyptian hieroglyphs: drawn far wider than the one cell a terminal gives them."""


def _unsteady(character: str) -> bool:
    code = ord(character)
    if character in _OVERWIDE or any(low <= code <= high for low, high in _OVERWIDE_BLOCKS):
        return True
    return unicodedata.combining(character) != 0 or unicodedata.category(character) in ("Mn", "Me")


def steady_width(text: str) -> str:
    """`text` (already sanitized) for a fixed-width cell: combining marks and overwide glyphs become
    escapes, so every character left takes exactly the cells counted for it and a cell never pushes
    the column border. Only for cells: the detail pane shows the same text whole."""
    if text.isascii():
        return text
    return "".join(escape_character(character) if _unsteady(character) else character for character in text)
