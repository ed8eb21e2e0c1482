"""How a real call is held against the plan call it claims to be: one rule for the executor and verification.

The executor asks before it sends a call; verification asks again afterwards, from the run's report.
Both compare what executes (the arguments, and the request: method, path, query without a server dry
run's own parameter, body, headers, a body's exact text) after resolving each placeholder of the plan
from the real result of the call it names. Leaves compare as JSON does, so `true` is not `1` although
Python's `==` says it is, while `1` and `1.0` are the same number.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import msgspec

from reviewer.plan.dry_run_params import without_dry_run_params
from reviewer.plan.exact_bodies import filled
from reviewer.plan.placeholders import ABSENT, Reference, field_of, placeholders_in, resolve
from reviewer.plan.proposal import Call

MISSING: Final = msgspec.UNSET
"""The side of a `FieldChange` where the field is not there at all (msgspec leaves it out when encoding)."""


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field that differs, by its path in the call (`args.amount_cents`, `request.path`)."""

    path: str
    old: Any
    new: Any
    note: str = ""
    """Why two equal-looking values differ: a placeholder whose text is unchanged but names another call."""


@dataclass(frozen=True, slots=True)
class CallMatch:
    """A real call against its plan call: what differs once placeholders resolve, and what resolved."""

    differences: tuple[FieldChange, ...]
    """Fields of the plan (placeholders resolved: `old`) that the real call (`new`) does not repeat."""
    resolutions: tuple[FieldChange, ...]
    """Each placeholder of the plan and the real value it took."""
    unresolved: frozenset[str] = field(default_factory=frozenset)
    """Placeholders of the plan that no real result of this run produced."""
    literal: bool = False
    """The real call repeats the plan as written, placeholders and all."""

    @property
    def matches(self) -> bool:
        return not self.differences and not self.unresolved


def plain(value: Any) -> Any:
    """A value as JSON sees it: structs, tuples and JSONFloats become dicts, lists and floats."""
    return None if value is None else msgspec.json.decode(msgspec.json.encode(value))


def executed_part(args: Mapping[str, Any] | None, request: Any) -> dict[str, Any]:
    """What a call sends: its arguments and its request (or None), the method upper-cased and a
    server dry run's own query parameter left out."""
    sent = plain(request)
    if isinstance(sent, dict):
        sent = {
            "method": str(sent.get("method", "")).upper(),
            "path": sent.get("path"),
            "query": without_dry_run_params(sent.get("query")) or None,
            "body": sent.get("body"),
            "headers": sent.get("headers") or None,
            "text": "".join(sent["text"]) if isinstance(sent.get("text"), list) else None,
        }
    return {"args": plain(args) or {}, "request": sent}


def match_call(
    planned: Call, real_args: Mapping[str, Any] | None, real_request: Any, results: Mapping[int, Any]
) -> CallMatch:
    """Hold a real call (its arguments and request) against `planned`, whose placeholders take their
    values from `results` (seq -> the real result of that call). A plan call without a request is
    held to its arguments alone: it does not say what the request must be."""
    written = executed_part(planned.args, planned.request)
    real = executed_part(real_args, real_request if planned.request is not None else None)
    if planned.request is None:
        written["request"] = None
    resolutions: list[FieldChange] = []

    def lookup(reference: Reference) -> Any:
        value = field_of(results.get(reference.seq, ABSENT), reference.field)
        if value is not ABSENT:
            text = reference.text()
            resolutions.append(FieldChange(text, text, value, "resolved from the real run"))
        return value

    text = written["request"].get("text") if isinstance(written["request"], dict) else None
    if text is not None and planned.request is not None:
        # Filled as the executor fills it: a JSON string that is only the placeholder takes the value.
        written["request"]["text"] = "".join(filled(planned.request.content_type, [text], lookup))
    resolved = resolve(written, lookup)
    return CallMatch(
        differences=tuple(differences(resolved, real)),
        resolutions=tuple(dict.fromkeys(resolutions)),
        unresolved=frozenset(placeholders_in(resolved)),
        literal=not differences(written, real),
    )


def differences(planned: Any, real: Any, path: str = "") -> list[FieldChange]:
    """Each leaf where `real` differs from `planned`, by its dotted path, in the order of `planned`."""
    found: list[FieldChange] = []
    _walk(planned, real, path, found)
    return found


def _walk(planned: Any, real: Any, path: str, found: list[FieldChange]) -> None:
    if isinstance(planned, dict) and isinstance(real, dict):
        for key, value in planned.items():
            where = f"{path}.{key}" if path else str(key)
            if key not in real:
                found.append(FieldChange(where, value, MISSING, "in the plan, not in the real call"))
            else:
                _walk(value, real[key], where, found)
        for key, value in real.items():
            if key not in planned:
                where = f"{path}.{key}" if path else str(key)
                found.append(FieldChange(where, MISSING, value, "in the real call, not in the plan"))
        return
    if isinstance(planned, list) and isinstance(real, list) and len(planned) == len(real):
        for position, (planned_item, real_item) in enumerate(zip(planned, real, strict=True)):
            _walk(planned_item, real_item, f"{path}[{position}]", found)
        return
    if planned != real or _kind(planned) != _kind(real):
        found.append(FieldChange(path, planned, real))


def _kind(value: Any) -> str:
    """1 and 1.0 are the same JSON number (RFC 8785 writes both as 1); true and 1 are not."""
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, int | float) else type(value).__name__
