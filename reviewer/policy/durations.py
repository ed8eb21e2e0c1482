"""Durations as a policy file writes them (`10m`, `1h30m`, `216h`, `2d`) to seconds, and back."""

from __future__ import annotations

import re
from typing import Final

UNITS: Final = {"d": 86400, "h": 3600, "m": 60, "s": 1}
_DURATION: Final = re.compile(r"(?:(\d{1,6})d)?(?:(\d{1,6})h)?(?:(\d{1,6})m)?(?:(\d{1,6})s)?")
EXAMPLES: Final = '"10m", "1h30m", "8h" or "2d"'


class DurationError(ValueError):
    """Text that is not a duration; the message quotes it and shows the form."""


def parse_duration(text: str) -> int:
    """Whole seconds, more than 0, of whole numbers of days, hours, minutes and seconds in that
    order: `1h30m` is 5400, `90m` is 5400 too; `1.5h`, `-10m`, `10` and `m` are refused."""
    match = _DURATION.fullmatch(text)
    if not text or match is None:
        raise DurationError(f"{text!r} is not a duration like {EXAMPLES}")
    seconds = sum(
        int(number) * unit for number, unit in zip(match.groups(), UNITS.values(), strict=True) if number
    )
    if seconds <= 0:
        raise DurationError(f"{text!r}: a duration is more than 0")
    return seconds


def duration_words(seconds: int) -> str:
    """`seconds` as `parse_duration` reads it, largest units first: 5400 is `1h30m`."""
    parts = []
    for unit, size in UNITS.items():
        number, seconds = divmod(seconds, size)
        if number:
            parts.append(f"{number}{unit}")
    return "".join(parts) or "0s"
