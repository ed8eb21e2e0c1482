"""A recorded call's answer in the shape of the answer schema: placeholders, and what the request carried.

A write that is only recorded has no real answer, yet the agent (and an MCP host's client, which
validates structured content against the tool's output schema) expects one in the tool's shape. The
answer holds nothing the gate cannot stand behind: a field the request carried as a plain value (a
title, a count) keeps that value; any other field that can hold text is a placeholder for what the real
call produces, inside objects and arrays alike (`<items.0.id from call 3>`: an array or object the
request sent under the same name is not the one the call answers, which holds what it created); any
other field is left out. Only a field the schema requires and
that can hold neither is given its type's empty value (`0`, `false`), as the schema leaves no choice.
Local references (`{"$ref": "#/$defs/Item"}`, what pydantic writes for nested models) are followed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from reviewer.plan.json_paths import follow_ref
from reviewer.plan.placeholders import placeholder

_MAX_DEPTH: Final = 16
"""References and nesting followed; deeper, a field is left out rather than walked forever."""
_EMPTY: Final[Mapping[str, Any]] = {"integer": 0, "number": 0, "boolean": False, "array": [], "object": {}}


class _Absent:
    """A field no honest value can fill."""


ABSENT: Final = _Absent()


@dataclass(frozen=True)
class Shaped:
    """A recorded call's answer, and the paths of the fields that hold a stand-in (the empty value a
    required field takes when no placeholder fits): values the schema forces, not results."""

    answer: dict[str, Any] | None
    stand_ins: tuple[str, ...] = ()


def shaped_answer(schema: Any, carried: Mapping[str, Any], seq: int) -> dict[str, Any] | None:
    """The answer of recorded call `seq` in the shape of `schema` (an object schema), or None when the
    schema does not describe an object. `carried` is what the request sent (its body or arguments)."""
    return shape(schema, carried, seq).answer


def shape(schema: Any, carried: Mapping[str, Any], seq: int) -> Shaped:
    """`shaped_answer`, with the fields that hold stand-ins named."""
    shaper = _Shaper(schema if isinstance(schema, Mapping) else {}, seq)
    resolved = shaper.resolve(schema, 0)
    if not isinstance(resolved, Mapping) or not isinstance(resolved.get("properties"), Mapping):
        return Shaped(None)
    answer = shaper.object(resolved, "", 0, carried)
    return Shaped(answer, tuple(shaper.stand_ins))


class _Shaper:
    def __init__(self, root: Mapping[str, Any], seq: int) -> None:
        self.root = root
        self.seq = seq
        self.stand_ins: list[str] = []

    def resolve(self, schema: Any, depth: int) -> Any:
        """`schema` with a local `$ref` followed (`json_paths.follow_ref`)."""
        return follow_ref(self.root, schema, depth)

    def value(self, schema: Any, path: str, depth: int) -> Any:
        schema = self.resolve(schema, depth)
        if depth >= _MAX_DEPTH:
            return ABSENT
        if not isinstance(schema, Mapping) or not schema:
            return placeholder(path, self.seq)  # any value is valid: a placeholder says the most
        if "const" in schema or "enum" in schema:
            return ABSENT  # a placeholder would not be one of the allowed values
        kinds = schema.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
        if not kinds:
            options = schema.get("anyOf") or schema.get("oneOf")
            if isinstance(options, list):
                for option in options:
                    found = self.value(option, path, depth + 1)
                    if found is not ABSENT:
                        return found
                return ABSENT
            if isinstance(schema.get("properties"), Mapping):
                return self.object(schema, path, depth, {})
            return placeholder(path, self.seq)
        if "string" in kinds:
            return placeholder(path, self.seq)
        if "object" in kinds:
            return self.object(schema, path, depth, {})
        if "array" in kinds:
            item = self.value(schema.get("items"), f"{path}.0", depth + 1)
            return [] if item is ABSENT else [item]
        if "null" in kinds:
            return None
        return ABSENT

    def object(
        self, schema: Mapping[str, Any], path: str, depth: int, carried: Mapping[str, Any]
    ) -> dict[str, Any]:
        properties = schema.get("properties")
        required = schema.get("required")
        required_names = set(required) if isinstance(required, list) else set()
        shaped: dict[str, Any] = {}
        for name, field_schema in properties.items() if isinstance(properties, Mapping) else ():
            if name in carried and not isinstance(carried[name], Mapping | list):
                shaped[name] = carried[name]
                continue
            where = f"{path}.{name}" if path else name
            found = self.value(field_schema, where, depth + 1)
            if found is ABSENT and name in required_names:
                found = self.empty(field_schema, depth + 1)
                if found is not ABSENT:
                    self.stand_ins.append(where)
            if found is not ABSENT:
                shaped[name] = found
        return shaped

    def empty(self, schema: Any, depth: int) -> Any:
        """The one value a required field that holds no placeholder can take: its const, its first
        allowed value, or its type's empty value."""
        schema = self.resolve(schema, depth)
        if not isinstance(schema, Mapping):
            return ABSENT
        if "const" in schema:
            return schema["const"]
        if isinstance(schema.get("enum"), list) and schema["enum"]:
            return schema["enum"][0]
        kinds = schema.get("type")
        kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
        return next((_EMPTY[kind] for kind in kinds if kind in _EMPTY), ABSENT)
