"""Placeholders as the agent library offers them; the grammar itself is `reviewer.plan.placeholders`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reviewer.plan.placeholders import ABSENT, Reference, placeholder, placeholders_in, resolve

__all__ = ["placeholder", "placeholders_in", "substitute"]


def substitute(value: Any, known: Mapping[str, Any]) -> Any:
    """Replace each known placeholder (keyed by its text) by its value; unknown ones stay as they are.

    Keys are read with the shared grammar, so `<id from call 01>` in `value` finds the value known
    as `<id from call 1>`.
    """
    if not known:
        return value
    by_reference = {reference: item for text, item in known.items() if (reference := Reference.parse(text))}
    return resolve(value, lambda reference: by_reference.get(reference, ABSENT))
