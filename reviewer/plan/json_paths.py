"""Reading a JSON value by a path, one way for every part: a dotted field (`entities.0.name`: a call's
result, an audit log's entry, a sandbox's answer) and a local `$ref` (`#/components/schemas/Item`: an
OpenAPI document, a tool's JSON schema)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final


class _Absent:
    def __repr__(self) -> str:
        return "ABSENT"


ABSENT: Final = _Absent()
"""What a path reads where the value holds no such field (a JSON `null` is a value)."""

MAX_REF_DEPTH: Final = 16
"""References followed one after another at the most: a document may refer to itself in a circle."""


def at_path(value: Any, dotted: str) -> Any:
    """`dotted`'s value in `value`, or `ABSENT`. A segment reads a mapping's key, or, when it is a whole
    number, a list's item (`entities.0.name`)."""
    if "." not in dotted and type(value) is dict:  # the common case, once a field of a million lines
        return value.get(dotted, ABSENT)
    for name in dotted.split("."):
        if isinstance(value, Mapping) and name in value:
            value = value[name]
        elif isinstance(value, list | tuple) and name.isdigit() and int(name) < len(value):
            value = value[int(name)]
        else:
            return ABSENT
    return value


def follow_ref(document: Any, value: Any, depth: int = 0) -> Any:
    """`value` with its local `$ref` followed in `document` (a JSON Pointer, `~1` and `~0` unescaped),
    until it is no reference or `depth` reaches `MAX_REF_DEPTH`; None for a reference that leads
    nowhere or outside the document."""
    while isinstance(value, Mapping) and isinstance(value.get("$ref"), str) and depth < MAX_REF_DEPTH:
        reference: str = value["$ref"]
        if not reference.startswith("#/"):
            return None
        target: Any = document
        for part in reference[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            target = target.get(part) if isinstance(target, Mapping) else None
        value, depth = target, depth + 1
    return value
