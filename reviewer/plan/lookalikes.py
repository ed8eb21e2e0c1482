"""Look-alike letters, from one table: a name's confusable skeleton, and whether a name a reviewer
reads as a word could be another name in disguise.

The one data source is `reviewer/plan/confusables.txt`, generated from Unicode's confusables.txt
(UTS #39) by `tools/confusables_table.py` in that file's format, and read the first time a name
needs it (about 2 ms). Every
part that asks "does this pass for something else" asks here: the review screen's look-alike mark
and alarm (`lookalike_identifier`), the base URL's host alarm (`reviewer.plan.hosts`), and the
policy's environment and reviewer names (`skeleton`, under `reviewer.policy.names.folded`).
"""

from __future__ import annotations

import os
import unicodedata
from functools import cache
from typing import Final


def read_confusables(text: str) -> tuple[str, dict[str, dict[str, str]]]:
    """The version and the mappings of a file in confusables.txt's format (`0430 ; 0061 ; MA # ...`),
    character to prototype, by the kind in the third field."""
    version = ""
    tables: dict[str, dict[str, str]] = {}
    for line in text.lstrip("\ufeff").splitlines():
        if line.startswith("# Version:"):
            version = line.split(":", 1)[1].strip()
        data = line.split("#", 1)[0]
        if not data.strip():
            continue
        source, target, kind = data.split(";")
        prototype = "".join(chr(int(code, 16)) for code in target.split())
        tables.setdefault(kind.strip(), {})[chr(int(source, 16))] = prototype
    return version, tables


@cache
def _tables() -> tuple[dict[str, str], dict[str, str]]:
    """The look-alike table and its capitals (`MA` and `CAPITAL` lines), read on first use (a few
    milliseconds; `importlib.resources` alone would cost more to import)."""
    with open(os.path.join(os.path.dirname(__file__), "confusables.txt"), encoding="utf-8") as file:
        _version, tables = read_confusables(file.read())
    return tables.get("MA", {}), tables.get("CAPITAL", {})


def _invisible(character: str) -> bool:
    """Format characters (zero-width space and joiners, bidi controls, the BOM) and variation
    selectors: Default_Ignorable_Code_Point, near enough, with what a terminal draws as nothing."""
    return (
        unicodedata.category(character) in ("Cf", "Mn")
        and not unicodedata.combining(character)
        or (0xFE00 <= ord(character) <= 0xFE0F or 0xE0100 <= ord(character) <= 0xE01EF)
    )


def skeleton(name: str) -> str:
    """The confusable skeleton of `name` (UTS #39, section 4), case, width and surrounding spaces
    folded: each character is replaced by the prototype it passes for after NFKC and case folding
    (a capital that passes for a Latin capital, Greek `Ν`, before folding), invisible characters
    removed, so `prоduction` (Cyrillic о), `PRОDUCTION`, `ｐｒｏｄｕｃｔｉｏｎ`
    and `produ\\u200bction` share the skeleton of `production`.

    Folding and mapping repeat until nothing changes (a prototype may be upper case, `B`; a fold
    may make a new look-alike), so the skeleton of a skeleton is itself.
    """
    text = name
    for _ in range(_MAX_ROUNDS):
        folded = _fold_and_map(text)
        if folded == text:
            break
        text = folded
    return text


_MAX_ROUNDS: Final = 4


def _fold_and_map(text: str) -> str:
    prototypes, capitals = _tables()
    compatible = unicodedata.normalize("NFKC", text)
    folded = "".join(capitals.get(character, character) for character in compatible).casefold().strip()
    decomposed = unicodedata.normalize("NFD", folded)
    visible = "".join(character for character in decomposed if not _invisible(character))
    mapped = "".join(prototypes.get(character, character) for character in visible)
    return unicodedata.normalize("NFD", mapped)


_SCRIPT_FAMILIES: Final = {"HIRAGANA": "CJK", "KATAKANA": "CJK", "HANGUL": "CJK", "CJK": "CJK"}
"""Scripts one language writes together (Japanese, Korean): mixing these is not a disguise."""


def _script(character: str) -> str | None:
    """The script of a letter, from the first word of its Unicode name; None for anything else
    (digits, punctuation, marks are common to every script)."""
    if not unicodedata.category(character).startswith("L"):
        return None
    word = unicodedata.name(character, "UNKNOWN").split(" ", 1)[0]
    return _SCRIPT_FAMILIES.get(word, word)


@cache
def passes_for_latin(letter: str) -> bool:
    """Whether a letter of another script reads as plain Latin letters: its skeleton is ASCII
    letters (Cyrillic `а` and `Т`, Greek `ο`, Armenian `օ`, Cherokee `Ꭺ`)."""
    if _script(letter) in (None, "LATIN"):
        return False
    prototype = skeleton(letter)
    return prototype.isascii() and prototype.isalpha()


def lookalike_identifier(identifier: str) -> bool:
    """Whether a name a reviewer reads as a word could be another name in disguise: its letters come
    from more than one script, or every letter of it passes for a Latin one (`сrеаtе` in Cyrillic),
    or it holds compatibility forms (fullwidth, mathematical letters), or it is not NFC."""
    if identifier.isascii():
        return False
    if not unicodedata.is_normalized("NFC", identifier) or not unicodedata.is_normalized("NFKC", identifier):
        return True
    scripts = {script for script in map(_script, identifier) if script is not None}
    if len(scripts) > 1:
        return True
    letters = [character for character in identifier if unicodedata.category(character).startswith("L")]
    return bool(letters) and scripts != {"LATIN"} and all(passes_for_latin(letter) for letter in letters)
