"""Placeholders: resolving replaces exactly the known ones, wherever they sit, and nothing else."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reviewer.agent import placeholder, placeholders_in, substitute

fields = st.sampled_from(["id", "uid", "name"])
seqs = st.integers(min_value=1, max_value=50)
placeholders = st.builds(placeholder, fields, seqs)
leaves = st.one_of(st.text(max_size=8), st.integers(), st.none(), placeholders)
json_values = st.recursive(
    leaves,
    lambda children: st.one_of(
        st.lists(children, max_size=4), st.dictionaries(st.text(max_size=5), children, max_size=4)
    ),
    max_leaves=20,
)
real_ids = st.text(alphabet="abcdefghijk-0123456789", min_size=1, max_size=8)


@given(json_values, st.dictionaries(placeholders, real_ids, max_size=5))
def test_resolving_leaves_no_known_placeholder_and_keeps_the_unknown(
    value: Any, known: dict[str, str]
) -> None:
    resolved = substitute(value, known)
    remaining = placeholders_in(resolved)
    assert not remaining & set(known)
    assert remaining == placeholders_in(value) - set(known)


@given(json_values)
def test_resolving_with_nothing_known_changes_nothing(value: Any) -> None:
    assert substitute(value, {}) == value


def test_a_placeholder_inside_a_path_is_replaced_by_the_value_text() -> None:
    assert substitute("/v1/tickets/<id from call 1>", {"<id from call 1>": "tk-4"}) == "/v1/tickets/tk-4"
    assert substitute("<id from call 2>", {"<id from call 2>": 42}) == 42
