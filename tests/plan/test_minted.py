"""Minted values found by value: what is recorded as a placeholder resolves back to exactly what the
call carried, and what cannot be named safely is reported, never silently passed on."""

from __future__ import annotations

from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from reviewer.plan.bodies import bytes_body
from reviewer.plan.minted import (
    InputValues,
    MintedIndex,
    Use,
    hard_coded,
    kind_of,
    minted_fields,
    with_placeholders,
)
from reviewer.plan.placeholders import Reference, field_of, placeholders_in, resolve
from reviewer.plan.proposal import Call, Outcome

MINTED = {"id": "tk-1042", "owner": {"id": "usr-7f3a9"}, "items": [{"id": "it-0001"}, {"id": "it-0002"}]}
"""A dry-run create's answer, with ids at the top, nested, and in a list."""


def index_of(result: Any, seq: int = 1) -> MintedIndex:
    index = MintedIndex()
    index.add(minted_fields(result, seq, set()))
    return index


def answer_lookup(result: Any, seq: int = 1) -> Any:
    return lambda reference: field_of(result, reference.field) if reference.seq == seq else None


ids = st.sampled_from(["tk-1042", "usr-7f3a9", "it-0001", "it-0002"])
ordinary = st.one_of(
    st.text(alphabet="abcxyz ", max_size=6), st.integers(min_value=0, max_value=999), st.booleans(), st.none()
)
values = st.recursive(
    st.one_of(ids, ordinary),
    lambda children: st.one_of(
        st.lists(children, max_size=4),
        st.dictionaries(st.sampled_from(["a", "b", "c"]), children, max_size=3),
    ),
    max_leaves=15,
)


@given(values)
def test_what_is_recorded_resolves_back_to_what_the_call_carried(value: Any) -> None:
    index = index_of(MINTED)
    recorded, uses = index.scan(value, "body")
    assert all(use.problem is None for use in uses)
    assert resolve(recorded, answer_lookup(MINTED)) == value
    assert not any(use.value in ("abc", "x") for use in uses)
    carried = {
        leaf for leaf in _leaves(value) if isinstance(leaf, str) and leaf.startswith(("tk", "usr", "it"))
    }
    assert not carried & {leaf for leaf in _leaves(recorded) if isinstance(leaf, str)}
    assert len(placeholders_in(recorded)) == len(carried)


def _leaves(value: Any) -> list[Any]:
    if isinstance(value, dict):
        return [leaf for child in value.values() for leaf in _leaves(child)]
    if isinstance(value, list):
        return [leaf for child in value for leaf in _leaves(child)]
    return [value]


def test_nested_and_listed_fields_are_named_by_their_path() -> None:
    named = {
        minted.where: minted.reference.text()
        for minted in minted_fields(MINTED, 3, set())
        if minted.reference
    }
    assert named == {
        "id": "<id from call 3>",
        "owner.id": "<owner.id from call 3>",
        "items.0.id": "<items.0.id from call 3>",
        "items.1.id": "<items.1.id from call 3>",
    }
    assert with_placeholders(MINTED, minted_fields(MINTED, 3, set()))["items"][1] == {
        "id": "<items.1.id from call 3>"
    }


def test_a_path_segment_and_a_query_value_become_the_placeholder() -> None:
    index = index_of(MINTED)
    path, _ = index.scan("/v1/tickets/tk-1042/items/it-0002", "request.path", path=True)
    assert path == "/v1/tickets/<id from call 1>/items/<items.1.id from call 1>"
    query, _ = index.scan({"owner": "usr-7f3a9", "tags": ["it-0001", "x"]}, "request.query")
    assert query == {"owner": "<owner.id from call 1>", "tags": ["<items.0.id from call 1>", "x"]}


def problem_of(index: MintedIndex, value: Any, path: bool = False) -> list[tuple[str, str | None]]:
    uses: list[Use] = index.scan(value, "body", path=path)[1]
    return [(use.where, use.problem) for use in uses]


def test_what_cannot_be_named_safely_is_reported_with_its_reason() -> None:
    index = index_of(MINTED)
    assert problem_of(index, {"note": "merged into tk-1042."}) == [("body.note", "inside a longer string")]
    assert problem_of(index, {"tk-1042": 1}) == [("body.tk-1042 (its key)", "a key")]
    assert problem_of(index, "/v1/tickets/tk-1042x", path=True) == []  # another id that starts alike
    assert problem_of(index, "/v1/x-tk-1042/y", path=True) == [("body segment 2", "inside a longer string")]
    assert problem_of(index, {"order": "order 1234567 of tk-1042"}) == [
        ("body.order", "inside a longer string")
    ]
    assert problem_of(index, {"note": "tk-10420"}) == []
    ambiguous = index_of({"id": "tk-1042", "self": {"id": "tk-1042"}})
    assert problem_of(ambiguous, {"into": "tk-1042"}) == [("body.into", "ambiguous")]
    short = index_of({"id": "a1", "number": 7, "big": 1234567})
    assert problem_of(short, {"into": "a1", "n": 7, "b": 1234567}) == [
        ("body.into", "too short"),
        ("body.n", "too short"),
        ("body.b", None),
    ]
    assert problem_of(short, {"b": "1234567"}) == [("body.b", "as text")]
    dotted = index_of({"a.b": "tk-99999"})
    assert problem_of(dotted, {"x": "tk-99999"}) == [("body.x", "not nameable")]


def test_echoes_of_the_input_and_stable_fields_are_not_minted_and_words_never_match() -> None:
    answer = {"id": "tk-5", "title": "Printer on fire", "status": "open", "slug": "printer-on-fire-5"}
    inputs = InputValues([{"title": "Printer on fire"}, "/v1/tickets", None, {"title": "Printer on fire"}])
    minted = minted_fields(answer, 1, inputs, stable=("slug",))
    assert [item.where for item in minted] == ["status", "id"] or sorted(item.where for item in minted) == [
        "id",
        "status",
    ]
    index = MintedIndex()
    index.add(minted)
    assert problem_of(index, {"status": "open"}) == []
    assert kind_of(True) is None and kind_of("open") == "word" and kind_of("tk-5") == "distinct"


def test_a_plan_call_echoing_an_earlier_dry_run_id_through_its_placeholder_mints_nothing_new() -> None:
    """Call 2 creates a child of `<id from call 1>` and its answer echoes `tk-4`; call 3 hard-codes
    `tk-4`: one use, naming call 1 alone, not an ambiguity between 1 and 2."""
    created = Call(
        seq=1,
        tool="create_ticket",
        effect="create",
        args={"title": "x"},
        outcome=Outcome("ok", 201, None, {"id": "tk-4", "title": "x"}),
    )
    child = Call(
        seq=2,
        tool="create_child",
        effect="create",
        args={"parent": "<id from call 1>"},
        outcome=Outcome("ok", 201, None, {"id": "tk-5", "parent": "tk-4"}),
    )
    merge = Call(seq=3, tool="update_ticket", effect="update", args={"id": "t1", "mergedInto": "tk-4"})
    found = list(hard_coded([created, child, merge], "server"))
    assert [
        (call.seq, [(use.where, use.problem, use.reference) for use in uses]) for call, uses in found
    ] == [(3, [("args.mergedInto", None, Reference("id", 1))])]
    assert list(hard_coded([created, child, merge], "record")) == []


def test_a_minted_value_in_a_body_held_as_bytes_is_a_stop_and_random_bytes_are_not() -> None:
    index = index_of(MINTED)
    upload = bytes_body(b"%PDF-1.7 ... ref tk-1042 ...")
    assert problem_of(index, upload) == [("body", "in bytes")]
    assert index.scan(upload, "body")[0] == upload  # never rewritten: bytes hold no placeholder
    assert problem_of(index, bytes_body(bytes(range(256)) * 64)) == []
    assert problem_of(index, [["into", "tk-1042"], ["note", "x"]]) == [("body.0.1", None)]  # a form


texts = st.lists(
    st.one_of(
        ids, st.sampled_from(["\x1b", "\\", "\n", '"', "%2D", "/", " ", "-", "<id from call 2>", "ab", "9"])
    ),
    max_size=6,
).map("".join)


@given(st.lists(st.one_of(texts, values), max_size=4))
def test_the_quick_look_never_passes_over_a_use_the_walk_would_find(value: Any) -> None:
    filtered = index_of(MINTED)
    walked = index_of(MINTED)
    walked.unfilterable = True  # every part walked
    assert filtered.scan(value, "body") == walked.scan(value, "body")
    assert filtered.scan(str(value), "p", path=True) == walked.scan(str(value), "p", path=True)
