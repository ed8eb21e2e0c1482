"""Placeholders: resolving replaces exactly the known ones, wherever they sit, and nothing else; every
path the grammar accepts (array indexes included) resolves, and one naming no earlier call is refused."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewer.agent import (
    HttpRequest,
    UnresolvablePlaceholder,
    dry_run,
    placeholder,
    placeholders_in,
    substitute,
    write_tool,
)
from reviewer.plan.placeholders import ABSENT, PLACEHOLDER, Reference, field_of, from_results, resolve

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


# --- array indexes and placeholders that could never resolve ---------------------------------

indexes = st.integers(min_value=0, max_value=20)
names = st.from_regex(r"[A-Za-z_][A-Za-z0-9_-]{0,6}", fullmatch=True)


@given(st.lists(st.one_of(names, indexes.map(str)), max_size=4), names, seqs)
def test_every_path_the_grammar_accepts_resolves_from_a_result_of_that_shape(
    tail: list[str], head: str, seq: int
) -> None:
    """Build a result holding a value at the path: the placeholder naming it resolves to that value."""
    path = [head, *tail]
    reference = Reference.parse(placeholder(".".join(path), seq))
    assert reference is not None and reference.field == ".".join(path)
    result: Any = "the value"
    for segment in reversed(path):
        result = [None] * int(segment) + [result] if segment.isdigit() else {segment: result}
    assert field_of(result, reference.field) == "the value"
    assert resolve({"x": reference.text()}, from_results({seq: result})) == {"x": "the value"}


@pytest.mark.parametrize(
    "text",
    ["<a..b from call 1>", "<a. from call 1>", "<a.01 from call 1>", "<a.-1 from call 1>", "<0 from call 1>"],
)
def test_a_path_with_an_empty_segment_or_an_odd_index_is_text_not_a_placeholder(text: str) -> None:
    assert PLACEHOLDER.search(text) is None and placeholders_in({"x": text}) == set()


def test_an_index_past_the_end_or_into_a_mapping_is_absent() -> None:
    result = {"entities": [{"name": "Ada"}], "by_id": {"0": "zero"}}
    assert field_of(result, "entities.0.name") == "Ada"
    assert field_of(result, "entities.1.name") is ABSENT
    assert field_of(result, "by_id.0") == "zero"  # a mapping's key that looks like an index
    assert field_of(result, "entities.name") is ABSENT


@write_tool(effect="update")
def rename(id: str, title: str) -> HttpRequest:
    return HttpRequest("PATCH", f"/v1/tickets/{id}", body={"title": title})


@pytest.mark.parametrize("seq", [0, 1, 2, 7])
def test_the_dry_run_refuses_a_placeholder_naming_no_earlier_call(seq: int) -> None:
    """Call 1 naming call 1, 2 or 7 (this or a later call), or call 0 (earlier, but no call of the
    plan): no real run could resolve it, so it is refused before it is recorded, and the plan keeps
    no gap where it would have been."""

    async def scenario() -> Any:
        async with dry_run("record") as recording:
            with pytest.raises(UnresolvablePlaceholder, match=f"<id from call {seq}> names no earlier"):
                await rename(id=placeholder("id", seq), title="x")
            await rename(id="t1", title="x")
        return recording

    recording = asyncio.run(scenario())
    assert [call.seq for call in recording.calls] == [1]
