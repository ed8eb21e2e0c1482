"""Placeholders `<FIELD from call N>`: the one grammar the analysis, drift, verification and executor share.

A placeholder stands for a value only a real write produces (most often an `id`): call N of the
plan produces it, and a later call uses it. N is read as a number, so `<id from call 01>` names call
1 for every reader: the screen shows it as call 1's value and the executor sends call 1's value. FIELD
may be a dotted path into the result (`<owner.id from call 3>`), whose segments are names or array
indexes (`<entities.0.name from call 1>`: the first entity's name). ASCII digits only: `<id from call ٣>`
is text that looks like a placeholder, not one; so is `<a..b from call 1>`, whose path has an empty
segment. What the grammar accepts, `field_of` can read from any JSON result, so a plan never holds a
placeholder that the real run could not resolve by its form alone; and `unresolvable_in` finds the
ones that name no earlier call of the plan, which the dry run and the queue refuse.

A placeholder cannot travel as it is through a program's HTTP client: its `<`, `>` and spaces are
percent-encoded into a path, plus-encoded into a query or form, and come back written otherwise. So
what a client is handed is its minted form (`rvw--id--from-call-1--`), made only of letters, digits,
`-` and `_`, which no client changes; `as_minted` writes a value's placeholders that way and
`from_minted` reads them back (once the transport's own encoding is undone), and the plan keeps the
readable form for the review.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass
from typing import Any, Final

from reviewer.plan import json_paths

_NAME: Final = r"[A-Za-z_][A-Za-z0-9_-]*"
_INDEX: Final = r"(?:0|[1-9][0-9]{0,8})"
PLACEHOLDER: Final[re.Pattern[str]] = re.compile(
    rf"<({_NAME}(?:\.(?:{_NAME}|{_INDEX}))*) from call ([0-9]{{1,16}})>", re.ASCII
)
"""`<FIELD from call N>`: FIELD a name, then any number of `.name` or `.index` (an index is a decimal
without leading zeros, below 10^9)."""
PLACEHOLDER_BYTES: Final[re.Pattern[bytes]] = re.compile(PLACEHOLDER.pattern.encode(), re.ASCII)
"""The same grammar over JSON bytes: none of its characters is ever escaped in JSON, so a match in
encoded arguments is exactly a match in one of their strings (a match cannot span a quote)."""
MARK: Final = " from call "
"""Text without this holds no placeholder: the cheap test before a regular expression runs."""

_MINTED_UNIT: Final = r"(?:[A-Za-z0-9]|_[_h])+"
MINTED: Final[re.Pattern[str]] = re.compile(
    rf"rvw--({_MINTED_UNIT}(?:-{_MINTED_UNIT})*)--from-call-([0-9]{{1,16}})--", re.ASCII
)
"""A placeholder's minted form: `rvw--FIELD--from-call-N--`, FIELD written with `.` as `-`, `_` as `__`
and `-` as `_h` (so FIELD holds no `--`, and the form ends where it says). Read back only where the
placeholder it stands for is one the grammar accepts."""
MINTED_MARK: Final = "--from-call-"
"""Text without this holds no minted placeholder."""
_MINTED_ESCAPES: Final = {"_": "__", "-": "_h", ".": "-"}
_MINTED_UNESCAPE: Final = re.compile(r"_[_h]|-")


ABSENT: Final = json_paths.ABSENT
"""What a placeholder resolves to when the call it names produced no such field (or did not run)."""


@dataclass(frozen=True, order=True, slots=True)
class Reference:
    """What a placeholder names: a field of the result of the call whose seq is `seq`."""

    field: str
    seq: int

    @classmethod
    def of(cls, match: re.Match[str]) -> Reference:
        return cls(match.group(1), int(match.group(2)))

    @classmethod
    def parse(cls, text: str) -> Reference | None:
        """The reference of a string that is exactly one placeholder, else None."""
        whole = PLACEHOLDER.fullmatch(text)
        return None if whole is None else cls.of(whole)

    def text(self) -> str:
        return placeholder(self.field, self.seq)

    def minted(self) -> str:
        """The placeholder's minted form, what a client is handed (see the module)."""
        field = "".join(_MINTED_ESCAPES.get(character, character) for character in self.field)
        return f"rvw--{field}--from-call-{self.seq}--"


def placeholder(field: str, seq: int) -> str:
    """The placeholder for `field` of the result of call `seq` (the seq the plan gives that call)."""
    return f"<{field} from call {seq}>"


def _strings(value: Any) -> list[str]:
    found: list[str] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            if MARK in item:
                found.append(item)
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def placeholders_in(value: Any) -> set[str]:
    """Every placeholder's text anywhere in a JSON-like value (keys included)."""
    return {match.group(0) for text in _strings(value) for match in PLACEHOLDER.finditer(text)}


def references_in(value: Any) -> set[Reference]:
    """What every placeholder anywhere in a JSON-like value names (keys included)."""
    return {Reference.of(match) for text in _strings(value) for match in PLACEHOLDER.finditer(text)}


def field_of(result: Any, field: str) -> Any:
    """`field` (a dotted path) of a call's result, or ABSENT (`json_paths.at_path`)."""
    return json_paths.at_path(result, field)


def unresolvable_in(value: Any, seq: int, earlier: Collection[int]) -> list[Reference]:
    """The placeholders in call `seq`'s `value` that no real run can resolve: they name this call, a
    later one, or a seq that is not among the plan's `earlier` calls. Sorted, each once."""
    return sorted(
        reference
        for reference in references_in(value)
        if reference.seq >= seq or reference.seq not in earlier
    )


def resolve(value: Any, lookup: Callable[[Reference], Any]) -> Any:
    """`value` with each placeholder that `lookup` knows replaced; the ones it answers ABSENT for stay.

    A string that is exactly one placeholder becomes the value itself (an id may be a number); a
    placeholder inside a longer string (a path such as `/v1/tickets/<id from call 1>`) is replaced by
    the value's text.
    """
    if isinstance(value, str):
        if MARK not in value:
            return value
        whole = PLACEHOLDER.fullmatch(value)
        if whole is not None:
            found = lookup(Reference.of(whole))
            return value if found is ABSENT else found

        def in_text(match: re.Match[str]) -> str:
            found = lookup(Reference.of(match))
            return match.group(0) if found is ABSENT else str(found)

        return PLACEHOLDER.sub(in_text, value)
    if isinstance(value, Mapping):
        return {resolve(key, lookup): resolve(item, lookup) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [resolve(item, lookup) for item in value]
    return value


def from_results(results: Mapping[int, Any]) -> Callable[[Reference], Any]:
    """A lookup that reads each placeholder from the result of the call it names (seq -> result)."""
    return lambda reference: field_of(results.get(reference.seq, ABSENT), reference.field)


def _minted_reference(match: re.Match[str]) -> Reference | None:
    """What a minted form names, when the placeholder it spells is one the grammar accepts."""
    field = _MINTED_UNESCAPE.sub(lambda found: {"__": "_", "_h": "-", "-": "."}[found[0]], match.group(1))
    return Reference.parse(placeholder(field, int(match.group(2))))


def as_minted(value: Any) -> Any:
    """`value` as a client is handed it: each placeholder, anywhere in it (keys too), in its minted form."""
    return _rewrite(value, MARK, PLACEHOLDER, lambda match: Reference.of(match).minted())


def from_minted(value: Any) -> Any:
    """`value` as the plan holds it: each minted form, anywhere in it (keys too), read back as the
    placeholder it stands for; one that spells no placeholder the grammar accepts stays as it is."""

    def readable(match: re.Match[str]) -> str:
        reference = _minted_reference(match)
        return match.group(0) if reference is None else reference.text()

    return _rewrite(value, MINTED_MARK, MINTED, readable)


def _rewrite(value: Any, mark: str, pattern: re.Pattern[str], replace: Callable[[re.Match[str]], str]) -> Any:
    if isinstance(value, str):
        return pattern.sub(replace, value) if mark in value else value
    if isinstance(value, Mapping):
        return {
            _rewrite(key, mark, pattern, replace): _rewrite(item, mark, pattern, replace)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        return [_rewrite(item, mark, pattern, replace) for item in value]
    return value
