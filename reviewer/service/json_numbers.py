"""JSON numbers a body may not carry because reading them would change them: refused, never rounded.

A double holds every integer only up to 2^53; `9007199254740993.0` would be stored as ...992,
`1e-400` as 0, and `1e400` does not fit at all (msgspec calls it invalid JSON, which sends the
sender looking in the wrong place). The proposal format already refuses integers beyond +-2^53
(RFC 8785 cannot write them); this refuses the float literals that would be altered, with a
message naming the number. A cheap scan of the bytes finds the few bodies that hold a literal
with an exponent or 16 digits in a row; only those are decoded again to look at each literal.
"""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Final

import msgspec

from reviewer.service.errors import Invalid

LIMIT: Final = 2**53
_SUSPECT: Final = re.compile(rb"[0-9][eE]|[0-9]{16}")


class _Altered(Exception):
    pass


def _checked_float(literal: str) -> float:
    exact = Decimal(literal)
    if abs(exact) > LIMIT:
        raise _Altered(
            f"the number {literal[:40]} is beyond +-2^53, where it would be rounded or not fit; "
            "send it as a string"
        )
    value = float(literal)
    if value == 0 and exact != 0:
        raise _Altered(f"the number {literal[:40]} is too small: it would be read as 0; send it as a string")
    return value


_DECODER: Final = msgspec.json.Decoder(float_hook=_checked_float)


def refuse_altered_numbers(raw: bytes | bytearray) -> None:
    """Raise `Invalid` (422) for a float literal that reading would round, overflow or flush to zero."""
    if _SUSPECT.search(raw) is None:
        return
    try:
        _DECODER.decode(raw)
    except _Altered as error:
        raise Invalid(str(error)) from None
    except (msgspec.DecodeError, RecursionError):
        return  # not JSON, or too deep: the parser that follows says which, in its own words
