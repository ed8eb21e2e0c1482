"""How the gate names the upstream, and the pin of the upstream's tool definitions a plan carries."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from reviewer.mcp_gate.upstream import tools_sha256, upstream_name
from tests.mcp_gate.test_trust import PLAIN, WRITE_FILE, tool


def test_the_pin_changes_with_a_schema_or_an_annotation_and_not_with_a_description() -> None:
    base = tools_sha256([PLAIN, WRITE_FILE])
    assert tools_sha256([WRITE_FILE, PLAIN]) == base
    described = PLAIN.model_copy(update={"description": "new words"})
    assert tools_sha256([described, WRITE_FILE]) == base
    widened = PLAIN.model_copy(update={"input_schema": {"type": "object", "properties": {"p": {}}}})
    assert tools_sha256([widened, WRITE_FILE]) != base
    assert tools_sha256([PLAIN, tool("write_file", destructive_hint=False)]) != base


def test_the_upstream_is_named_by_the_operator_or_by_its_command_line() -> None:
    assert (
        upstream_name(["/usr/bin/npx", "-y", "@mcp/server", "/srv/a b"], None)
        == "npx -y @mcp/server '/srv/a b'"
    )
    assert upstream_name(["npx"], "docs-files") == "docs-files"
