"""Placeholders as the agent library offers them; the grammar itself is `reviewer.plan.placeholders`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from reviewer.plan.placeholders import ABSENT, Reference, placeholder, placeholders_in, references_in, resolve

__all__ = ["placeholder", "placeholders_in", "substitute"]


def substitute(value: Any, known: Mapping[str, Any]) -> Any:
    """Replace each known placeholder (keyed by its text) by its value; unknown ones stay as they are.

    Keys are read with the shared grammar, so `<id from call 01>` in `value` finds the value known
    as `<id from call 1>`. Only the placeholders `value` holds are looked up, so a dry run that has
    produced many values pays for them only where they are used.
    """
    if not known:
        return value
    wanted = references_in(value)
    if not wanted:
        return value
    found = {reference: known[reference.text()] for reference in wanted if reference.text() in known}
    if len(found) < len(wanted):  # a key written another way (`<id from call 01>`)
        by_reference = {
            reference: item for text, item in known.items() if (reference := Reference.parse(text))
        }
        found = {reference: by_reference[reference] for reference in wanted if reference in by_reference}
    return resolve(value, lambda reference: found.get(reference, ABSENT))
