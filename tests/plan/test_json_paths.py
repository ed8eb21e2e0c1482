"""The one reader of a JSON value by path: dotted fields and local `$ref`s."""

from __future__ import annotations

from reviewer.plan.json_paths import ABSENT, MAX_REF_DEPTH, at_path, follow_ref


def test_a_dotted_path_reads_keys_and_list_items_and_says_absent_where_nothing_is() -> None:
    value = {"entities": [{"name": "t4"}], "id": None, "a.b": 1}
    assert at_path(value, "entities.0.name") == "t4"
    assert at_path(value, "id") is None  # JSON null is a value
    assert at_path(value, "entities.1.name") is ABSENT
    assert at_path(value, "entities.x") is ABSENT
    assert at_path(value, "a.b") is ABSENT  # a dot always separates: no key is read with one in it
    assert at_path("text", "length") is ABSENT


def test_a_local_reference_is_followed_with_its_escapes_and_a_circle_ends() -> None:
    document = {
        "components": {"schemas": {"a/b": {"$ref": "#/components/schemas/c~0d"}, "c~d": {"type": "string"}}},
        "loop": {"$ref": "#/loop"},
    }
    assert follow_ref(document, {"$ref": "#/components/schemas/a~1b"}) == {"type": "string"}
    assert follow_ref(document, {"$ref": "#/loop"}) == {"$ref": "#/loop"}, f"at most {MAX_REF_DEPTH} steps"
    assert follow_ref(document, {"$ref": "other.yaml#/components"}) is None
    assert follow_ref(document, {"$ref": "#/components/none"}) is None
    assert follow_ref(document, {"type": "integer"}) == {"type": "integer"}
