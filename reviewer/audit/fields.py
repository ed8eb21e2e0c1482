"""Reading fields out of one decoded log entry: dotted names, times, statuses, a URI's path and query.

Shared by every reader, so a time or a status means the same thing in each of them. A value of the
wrong kind raises `BadField`, which the reader turns into a `MalformedLine` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from datetime import datetime
from itertools import accumulate, repeat
from operator import sub
from typing import Any, Final

import msgspec

from reviewer.audit.inputs import MAX_LINE_BYTES, AuditInput
from reviewer.audit.rows import AuditRow, MalformedLine, utc_time
from reviewer.plan.json_paths import ABSENT, at_path


class BadField(ValueError):
    """A field of an entry holds what its reader cannot read (the message names the field)."""


def dig(entry: Mapping[str, Any], dotted: str) -> Any:
    """`entry["a"]["b"]` for `a.b` (`json_paths.at_path`), None where any step is missing."""
    value = at_path(entry, dotted)
    return None if value is ABSENT else value


def text_field(entry: Mapping[str, Any], dotted: str) -> str | None:
    """A string field (a number is written as text); empty, `-` or absent is None."""
    value = dig(entry, dotted)
    if type(value) is str:
        return value if value not in ("", "-") else None
    if value is None:
        return None
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    raise BadField(f"{dotted} is {type(value).__name__}, not text")


def time_field(entry: Mapping[str, Any], dotted: str) -> datetime | None:
    """An ISO 8601 time (`2026-12-02T01:02:03+00:00`, `...Z`) or Unix seconds, as an aware UTC time."""
    value = dig(entry, dotted)
    if value is None or value == "":
        return None
    parsed = utc_time(value)
    if parsed is None:
        raise BadField(f"{dotted} {str(value)[:40]!r} is not a time")
    return parsed


def status_field(entry: Mapping[str, Any], dotted: str) -> int | None:
    """An HTTP status, as a number or as digits."""
    value = dig(entry, dotted)
    if type(value) is int and 100 <= value <= 599:
        return value
    if value is None or value in ("", "-"):
        return None
    if isinstance(value, str) and value.isdigit() and 100 <= int(value) <= 599:
        return int(value)
    raise BadField(f"{dotted} {str(value)[:40]!r} is not an HTTP status")


def split_uri(uri: str) -> tuple[str, str]:
    """A request URI as its path and its raw query."""
    path, _, query = uri.partition("?")
    return path, query


_decode = msgspec.json.Decoder().decode

MAX_NESTING: Final = 64
"""Arrays and objects within each other an entry may hold; a deeper one is a line that could not be
read (no log format nests half as deep; a reader must not recurse as deep as a line asks)."""
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"')
_BRACKET_STEPS = bytes.maketrans(b"[{]}", b"\x02\x02\x00\x00")
_NOT_BRACKETS = bytes(byte for byte in range(256) if byte not in b"[{]}")


def nests_too_deep(data: bytes) -> bool:
    """Whether a JSON text nests arrays and objects past `MAX_NESTING` (brackets inside strings are
    not nesting). Counting brackets settles most lines without a scan."""
    if data.count(b"[") + data.count(b"{") <= MAX_NESTING:
        return False
    brackets = _JSON_STRING.sub(b"", data).translate(_BRACKET_STEPS, _NOT_BRACKETS)
    return max(accumulate(map(sub, brackets, repeat(1))), default=0) > MAX_NESTING


def decoded(where: str, data: bytes, decode: Any = _decode) -> Any:
    """`data` decoded by `decode`, or a `MalformedLine` saying why it cannot be: not JSON, of the
    wrong shape (msgspec's words), or nested past `MAX_NESTING`."""
    if nests_too_deep(data):
        return MalformedLine(where, f"nested deeper than {MAX_NESTING} levels")
    try:
        return decode(data)
    except msgspec.ValidationError as error:
        return MalformedLine(where, str(error))
    except msgspec.DecodeError as error:
        return MalformedLine(where, f"not JSON ({error})")
    except RecursionError:
        return MalformedLine(where, f"nested deeper than {MAX_NESTING} levels")


Entry = tuple[str, Mapping[str, Any]]
"""One decoded entry and where it is (`file:line`, `file[index]`)."""


def rows_from(
    entries: Iterable[Entry | MalformedLine], row: Callable[[str, Mapping[str, Any]], AuditRow]
) -> Iterator[AuditRow | MalformedLine]:
    """Each entry as a row by `row` (where it is, the entry), every reader's loop: an entry that does not
    read as one (`BadField`) is a `MalformedLine` where it stands, and the reading goes on."""
    for item in entries:
        if isinstance(item, MalformedLine):
            yield item
            continue
        where, entry = item
        try:
            yield row(where, entry)
        except BadField as error:
            yield MalformedLine(where, str(error))


def json_entries(source: AuditInput) -> Iterator[Entry | MalformedLine]:
    """Each line of `source` as a JSON object, or a `MalformedLine` saying why it is not one."""
    for item in source.lines():
        if isinstance(item, MalformedLine):
            yield item
        elif item[1].strip():
            yield _entry_of(*item)


def document_entries(source: AuditInput, list_keys: tuple[str, ...]) -> Iterator[Entry | MalformedLine]:
    """The entries of each JSON document of `source`: the list under the first of `list_keys` it holds
    (or the document itself when it is a list); a file of JSON lines is read line by line instead."""
    for item in source.documents():
        if isinstance(item, MalformedLine):
            yield item
            continue
        name, body = item
        document = decoded(name, body)
        if isinstance(document, MalformedLine):  # JSON lines, or a document that cannot be read whole
            for number, line in enumerate(body.splitlines(), start=1):
                if len(line) > MAX_LINE_BYTES:
                    yield MalformedLine(f"{name}:{number}", f"longer than {MAX_LINE_BYTES:,} bytes")
                elif line.strip():
                    yield _entry_of(f"{name}:{number}", line)
            continue
        entries = document
        if isinstance(document, dict):
            entries = next((document[key] for key in list_keys if isinstance(document.get(key), list)), None)
        if not isinstance(entries, list):
            yield MalformedLine(name, f"holds no list under {' or '.join(list_keys)}")
            continue
        for index, entry in enumerate(entries):
            yield _checked_object(f"{name}[{index}]", entry)


def _entry_of(where: str, line: bytes) -> Entry | MalformedLine:
    entry = decoded(where, line)
    return entry if isinstance(entry, MalformedLine) else _checked_object(where, entry)


def _checked_object(where: str, entry: Any) -> Entry | MalformedLine:
    if isinstance(entry, dict):
        return where, entry
    return MalformedLine(where, f"a JSON {type(entry).__name__}, not an object")
