"""`reviewer list` and `show` print a line that fits as it is, and wrap the rest with textwrap: the
short cut must give the lines textwrap gives."""

from __future__ import annotations

import textwrap

from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.queue.overview import _wrapped


def wrapped_by_textwrap(text: str, width: int, indent: str) -> list[str]:
    lines = textwrap.wrap(
        text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
    )
    return lines or [indent]


@settings(max_examples=400, deadline=None)
@given(
    text=st.text(alphabet="ab -\t\n\u00a0·€\x1b", max_size=24),
    indent=st.sampled_from(["", "  "]),
    room=st.integers(min_value=4, max_value=20),
)
def test_a_line_is_wrapped_as_textwrap_wraps_it(text: str, indent: str, room: int) -> None:
    width = len(indent) + room
    assert _wrapped(text, width, indent) == wrapped_by_textwrap(text, width, indent)
