"""What `mcp-gate` lets through and how it names effects: the operator's flags and file, never the
upstream's annotations alone."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("mcp")

import mcp_types as types

from reviewer.agent.shaped import shaped_answer
from reviewer.mcp_gate.trust import (
    DESTRUCTIVE_CAUTION,
    IDEMPOTENT_NOTE,
    OPEN_WORLD_NOTE,
    UNKNOWN_CAUTION,
    TrustConfigError,
    TrustPolicy,
    load_policy,
)


def tool(name: str, **hints: bool) -> types.Tool:
    return types.Tool(
        name=name,
        input_schema={"type": "object"},
        annotations=types.ToolAnnotations(**hints) if hints else None,
    )


READ_ONLY = tool("read_graph", read_only_hint=True)
LIAR = tool("purge", read_only_hint=True, destructive_hint=True)
WRITE_FILE = tool("write_file", destructive_hint=True, idempotent_hint=True)
CREATE = tool("create_entities", destructive_hint=False)
PLAIN = tool("open_ticket")
FETCH = tool("fetch_and_store", open_world_hint=True)


def test_by_default_nothing_passes_whatever_the_hints() -> None:
    policy = TrustPolicy()
    assert [policy.passes(item) for item in (READ_ONLY, LIAR, WRITE_FILE, CREATE, PLAIN)] == [False] * 5


def test_trusted_hints_let_through_read_only_tools_that_are_not_also_destructive() -> None:
    policy = TrustPolicy(trust_read_only_hints=True)
    assert policy.passes(READ_ONLY) and not policy.passes(LIAR) and not policy.passes(PLAIN)


def test_the_operators_effect_wins_over_every_hint_and_read_over_none() -> None:
    policy = TrustPolicy(frozenset({"open_ticket"}), {"read_graph": "delete"}, trust_read_only_hints=True)
    assert not policy.passes(READ_ONLY) and policy.effect_of(READ_ONLY) == "delete"
    assert policy.passes(PLAIN)


def test_effects_from_hints_never_overstate_nor_understate() -> None:
    """A tool that says it only adds is a create; a destructive hint is an update that may overwrite,
    never a delete; a tool that says nothing is an effect unknown, never a create (it may be a DELETE
    FROM items); only the operator says delete (and then no caution is added to the word). The
    idempotent and open-world hints are told too."""
    policy = TrustPolicy()
    assert policy.effect_of(CREATE) == "create" and policy.caution_of(CREATE) == ""
    assert policy.effect_of(PLAIN) == policy.effect_of(FETCH) == "other"
    assert policy.caution_of(PLAIN) == UNKNOWN_CAUTION and "effect unknown" in UNKNOWN_CAUTION
    assert policy.caution_of(FETCH) == f"{UNKNOWN_CAUTION}; {OPEN_WORLD_NOTE}"
    assert policy.effect_of(WRITE_FILE) == "update"
    assert policy.caution_of(WRITE_FILE) == f"{DESTRUCTIVE_CAUTION}; {IDEMPOTENT_NOTE}"
    assert policy.effect_of(READ_ONLY) == "other" and "readOnlyHint" in policy.caution_of(READ_ONLY)
    told = TrustPolicy(effects={"write_file": "delete"})
    assert told.effect_of(WRITE_FILE) == "delete" and told.caution_of(WRITE_FILE) == ""


def test_the_config_file_and_the_flags_that_win_over_it(tmp_path: Path) -> None:
    config = tmp_path / "tools.toml"
    config.write_text(
        'trust_read_only_hints = true\nread = ["read_file", "move_file"]\n'
        '[effects]\nwrite_file = "update"\ndelete_entities = "delete"\n'
    )
    policy = load_policy(config, ["delete_entities"], ["move_file=delete"], False)
    assert policy.reads == {"read_file", "delete_entities"}
    assert dict(policy.effects) == {"write_file": "update", "move_file": "delete"}
    assert policy.trust_read_only_hints


@pytest.mark.parametrize(
    ("text", "flags", "words"),
    [
        ("read = 'x'", (), "read must be a list"),
        ("reads = []", (), "unknown key 'reads'"),
        ("[effects]\nx = 'read'", (), "EFFECT one of"),
        ("read = ['x']\n[effects]\nx = 'update'", (), "'x' is both in read and in [effects]"),
        ("read = [", (), "tools.toml"),
        ("", ("--both",), "'x' is given both --read and --effect"),
    ],
)
def test_a_bad_config_is_one_clear_error(
    tmp_path: Path, text: str, flags: tuple[str, ...], words: str
) -> None:
    config = tmp_path / "tools.toml"
    config.write_text(text)
    reads, effects = (["x"], ["x=update"]) if flags else ([], [])
    with pytest.raises(TrustConfigError, match=words.replace("[", r"\[").replace("]", r"\]")):
        load_policy(config, reads, effects, False)


def test_placeholders_follow_the_output_schema_into_objects_and_arrays() -> None:
    """Objects inside arrays, reached through `$defs` as pydantic writes them; a number nobody sent is
    left out unless required, and what the request carried is kept."""
    schema = {
        "$defs": {
            "Entity": {
                "type": "object",
                "properties": {"name": {"type": "string"}, "size": {"type": "integer"}},
                "required": ["name", "size"],
            }
        },
        "type": "object",
        "properties": {
            "owner": {"type": "object", "properties": {"id": {"type": "string"}}},
            "entities": {"type": "array", "items": {"$ref": "#/$defs/Entity"}},
            "count": {"type": "integer"},
            "mergedInto": {"type": "integer"},
            "kind": {"enum": ["a", "b"]},
        },
        "required": ["entities", "count"],
    }
    assert shaped_answer(schema, {"count": 2}, 3) == {
        "owner": {"id": "<owner.id from call 3>"},
        "entities": [{"name": "<entities.0.name from call 3>", "size": 0}],
        "count": 2,
    }
    assert shaped_answer({"type": "array"}, {}, 1) is None


def test_a_destructive_hint_marks_calls_destructive_and_can_only_raise_the_operators_word() -> None:
    policy = TrustPolicy(effects={"move_file": "delete", "write_file": "update"})
    assert policy.destructive(WRITE_FILE), "the hint raises an update the operator named"
    assert policy.destructive(tool("move_file", destructive_hint=False)), "a hint cannot lower a delete"
    assert not policy.destructive(PLAIN) and not policy.destructive(CREATE)
