"""Placeholders `<FIELD from call N>`: a value only a real write produces, written as a dependency."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

PLACEHOLDER: Final = re.compile(r"<([A-Za-z_][A-Za-z0-9_.-]*) from call ([1-9][0-9]*)>")


def placeholder(field: str, seq: int) -> str:
    """The placeholder for `field` of the result of call `seq` (the seq the plan gives that call)."""
    return f"<{field} from call {seq}>"


def placeholders_in(value: Any) -> set[str]:
    """Every placeholder anywhere in a JSON-like value (keys included)."""
    found: set[str] = set()
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            found.update(match.group(0) for match in PLACEHOLDER.finditer(item))
        elif isinstance(item, Mapping):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return found


def substitute(value: Any, known: Mapping[str, Any]) -> Any:
    """Replace each known placeholder by its value; unknown ones stay as they are.

    A string that is exactly one placeholder becomes the value itself (an id may be a number); a
    placeholder inside a longer string (a path such as `/v1/tickets/<id from call 1>`) is replaced
    by the value's text.
    """
    if not known:
        return value
    if isinstance(value, str):
        whole = PLACEHOLDER.fullmatch(value)
        if whole is not None:
            return known.get(value, value)
        return PLACEHOLDER.sub(lambda match: str(known.get(match.group(0), match.group(0))), value)
    if isinstance(value, Mapping):
        return {substitute(key, known): substitute(item, known) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [substitute(item, known) for item in value]
    return value
