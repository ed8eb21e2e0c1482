"""Table cells keep their width exactly, whatever the text in them."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st
from rich.cells import cell_len

from reviewer.tui.widgets.cells import fit

any_text = st.text(st.characters(exclude_categories=()))


@given(any_text, st.integers(min_value=1, max_value=40))
@example("e\u0301\u0301\u0301" * 5 + "\ufdfd\u2e3b\U0001242b", 12)
@example("\u8868" * 30, 7)
@example("\u8868" * 30, 1)
def test_a_fitted_cell_is_exactly_its_width(value: str, cells: int) -> None:
    assert cell_len(fit(value, cells)) == cells
    assert cell_len(fit(value, cells, right=True)) == cells


def test_combining_marks_and_overwide_glyphs_are_written_as_escapes_in_a_cell() -> None:
    assert fit("e\u0301\ufdfd", 20).rstrip() == "e\\u0301\\ufdfd"
