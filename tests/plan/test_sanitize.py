"""Property tests of the sanitizer: nothing hidden survives, nothing is dropped, markup stays literal text."""

from __future__ import annotations

import re
import sys
import unicodedata

from hypothesis import example, given
from hypothesis import strategies as st

from reviewer.plan.sanitize import (
    HIDDEN_RANGES,
    clip,
    has_hidden,
    json_has_hidden,
    safe_text,
    safe_value,
    sanitize,
    steady_width,
    unnormalized,
)

HIDDEN_CATEGORIES = frozenset({"Cc", "Cf", "Zl", "Zp", "Cs"})
DEFAULT_IGNORABLE = """
00AD 034F 061C 115F..1160 17B4..17B5 180B..180D 180E 180F 200B..200F 202A..202E 2060..2064 2065
2066..206F 3164 FE00..FE0F FEFF FFA0 FFF0..FFF8 1BCA0..1BCA3 1D173..1D17A E0000 E0001 E0002..E001F
E0020..E007F E0080..E00FF E0100..E01EF E01F0..E0FFF
"""
"""Default_Ignorable_Code_Point as Unicode's DerivedCoreProperties.txt lists it, copied here by hand
so the test does not read the sanitizer's own table."""


def _code_points(listing: str) -> frozenset[int]:
    points: set[int] = set()
    for entry in listing.split():
        low, _, high = entry.partition("..")
        points.update(range(int(low, 16), int(high or low, 16) + 1))
    return frozenset(points)


IGNORABLE = _code_points(DEFAULT_IGNORABLE)
LAYOUT = "\t\n"
"""Escaped on one line for the layout's sake, but not hiding anything: they do not set `hidden`."""

hostile_characters = st.sampled_from(
    ["\x1b", "\r", "\x07", "\x00", "\x7f", "\x85", "\x9b", "\u200b", "\u202e", "\u2066", "\u2028", "\u2029",
     "\ufeff", "\u00ad", "\U000e0041", "\U000e007f", "\ud800", "\udfff", "\t", "\n", "\u034f", "\u3164",
     "\u115f", "\uffa0", "\ufe0f", "\U000e0100", "\u180b", "\u17b4"]
)  # fmt: skip
any_character = st.characters(exclude_categories=())  # surrogates included
text = st.text(st.one_of(any_character, hostile_characters))
text_without_backslash = st.text(
    st.one_of(st.characters(exclude_categories=(), exclude_characters="\\"), hostile_characters)
)

_ESCAPE = re.compile(r"\\(?:x([0-9a-f]{2})|u([0-9a-f]{4})|U([0-9a-f]{8})|(t)|(n))")


def unescape(display: str) -> str:
    """The inverse of sanitize for text that had no backslash of its own: every backslash is an escape."""

    def original(match: re.Match[str]) -> str:
        hexadecimal = match.group(1) or match.group(2) or match.group(3)
        if hexadecimal:
            return chr(int(hexadecimal, 16))
        return "\t" if match.group(4) else "\n"

    return _ESCAPE.sub(original, display)


def is_hidden(character: str) -> bool:
    return unicodedata.category(character) in HIDDEN_CATEGORIES or ord(character) in IGNORABLE


@given(text)
@example("\x1b[2J\x1b[31mred")
@example("ok\rREJECTED")
def test_no_hidden_character_survives_on_one_line(value: str) -> None:
    assert not any(is_hidden(character) for character in sanitize(value).text)


@given(text)
def test_only_newlines_survive_in_multiline_text(value: str) -> None:
    survivors = {character for character in sanitize(value, multiline=True).text if is_hidden(character)}
    assert survivors <= {"\n"}


@given(text_without_backslash)
@example("a\u202eb\u200bc\U000e0041\x1b\x85\t\n")
def test_nothing_is_dropped_escapes_round_trip(value: str) -> None:
    assert unescape(sanitize(value).text) == value
    assert unescape(sanitize(value, multiline=True).text) == value


@given(text_without_backslash)
def test_one_escape_per_hidden_character(value: str) -> None:
    display = sanitize(value).text
    assert display.count("\\") == sum(is_hidden(character) for character in value)


@given(text)
def test_hidden_flag_is_set_exactly_when_something_hides(value: str) -> None:
    expected = any(is_hidden(character) and character not in LAYOUT for character in value)
    assert sanitize(value).hidden is expected
    assert has_hidden(value) is expected


@given(text)
def test_text_without_hidden_characters_is_unchanged(value: str) -> None:
    clean = "".join(character for character in value if not is_hidden(character))
    assert sanitize(clean) == (clean, False)


def test_every_control_format_separator_surrogate_and_default_ignorable_is_caught() -> None:
    """Iterates all of `unicodedata`: a code point missing from the sanitizer's table fails here."""
    all_hidden = [
        chr(code)
        for code in range(sys.maxunicode + 1)
        if unicodedata.category(chr(code)) in HIDDEN_CATEGORIES or code in IGNORABLE
    ]
    missed = [
        f"U+{ord(character):04X}"
        for character in all_hidden
        if character not in LAYOUT and not has_hidden(character)
    ]
    assert missed == []
    display = sanitize("".join(all_hidden)).text
    assert not any(is_hidden(character) for character in display)
    assert display.count("\\") == len(all_hidden)


def test_nothing_else_is_escaped() -> None:
    """Every assigned character outside those categories passes untouched (the table may name code
    points that this Python's Unicode version has not assigned yet; those are the only extra ones)."""
    others = "".join(
        chr(code)
        for code in range(sys.maxunicode + 1)
        if code != 0x5C
        and code not in IGNORABLE
        and unicodedata.category(chr(code)) not in HIDDEN_CATEGORIES | {"Cn"}
    )
    assert sanitize(others) == (others, False)
    for low, high in HIDDEN_RANGES:
        for code in range(low, high + 1):
            category = unicodedata.category(chr(code))
            assert category in HIDDEN_CATEGORIES | {"Cn"} or code in IGNORABLE, f"U+{code:04X}"


def test_the_comment_that_read_t1_now_says_what_it_hid() -> None:
    """A comment shown as "t1" carried variation selectors, a CGJ and Hangul fillers."""
    comment = "t1" + "\ufe0f\u034f\u3164\u115f\uffa0\U000e0100" * 8
    result = sanitize(comment)
    assert result.hidden
    assert result.text.startswith("t1\\ufe0f\\u034f\\u3164")
    assert result.text.count("\\") == 48


@given(text)
def test_raw_json_scan_agrees_with_the_sanitizer(value: str) -> None:
    """The fast scan over encoded JSON finds exactly what the sanitizer flags, ignorables included."""
    import json

    try:
        encoded = json.dumps(value, ensure_ascii=False).encode()
    except UnicodeEncodeError:
        return  # a lone surrogate cannot be encoded; callers treat that as hidden
    assert json_has_hidden(encoded) is sanitize(value).hidden


def test_text_not_in_nfc_is_told_apart() -> None:
    assert unnormalized("cafe\u0301") and not unnormalized("café") and not unnormalized("plain")


@given(text)
def test_a_cell_never_holds_a_character_of_uncertain_width(value: str) -> None:
    shown = steady_width(safe_text(value))
    assert not any(unicodedata.combining(character) for character in shown)
    assert "\ufdfd" not in shown and "\u2e3b" not in shown


def test_known_escapes_are_readable() -> None:
    assert safe_text("\x1b[2J") == "\\x1b[2J"
    assert safe_text("a\u202eb") == "a\\u202eb"
    assert safe_text("\U000e0041") == "\\U000e0041"
    assert safe_text("\x85") == "\\x85"
    assert safe_text("a\tb\nc") == "a\\tb\\nc"
    assert sanitize("a\tb\nc").hidden is False


def test_multiline_keeps_line_breaks_but_never_a_carriage_return() -> None:
    assert sanitize("approved\rREJECTED\nnext", multiline=True) == ("approved\\x0dREJECTED\nnext", True)


MARKUP = [
    "[@click=app.approve]Approve[/]",
    "[bold red]URGENT[/bold red]",
    "[$accent]closed[/]",
    "[link=https://evil.example]docs[/link]",
    "[RED]",
    "\\[escaped]",
]


def test_markup_is_literal_text_not_the_sanitizers_business() -> None:
    """Sanitize is not a markup escaper: widgets take the result as Text/Content, never as markup."""
    for markup in MARKUP:
        assert sanitize(markup) == (markup, False)


def test_markup_mixed_with_escape_codes_keeps_the_markup_and_escapes_the_codes() -> None:
    assert sanitize("[bold]\x1b[31mred[/]") == ("[bold]\\x1b[31mred[/]", True)


@given(st.text(), st.integers(min_value=20, max_value=400))
@example("x" * 1_000_000, 300)
@example("x" * 1_000, 20)
def test_clip_marks_exactly_what_it_cut(value: str, limit: int) -> None:
    clipped = clip(value, limit)
    if len(value) <= limit:
        assert clipped == value
        return
    assert len(clipped) <= limit
    marker = re.search(r"… \(\+([\d,]+) chars\)$", clipped)
    assert marker is not None
    kept = clipped[: marker.start()]
    assert value.startswith(kept)
    assert int(marker.group(1).replace(",", "")) == len(value) - len(kept)


def test_safe_value_is_one_clipped_sanitized_line() -> None:
    value = {"note": "line one\nline two\x1b[2J", "big": "x" * 10_000}
    result = safe_value(value, 120)
    assert "\n" not in result.text and "\x1b" not in result.text
    assert len(result.text) <= 120
    assert result.hidden is True
    assert safe_value("plain", 120) == ("plain", False)
