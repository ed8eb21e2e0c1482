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


def test_a_real_calls_result_keeps_every_block_links_whole_and_bytes_by_their_digest() -> None:
    """The approved run's status keeps what the call answered beside its text: a created resource's
    link, an image and a resource's blob by SHA-256 and size, a resource's text as it is."""
    import base64
    import hashlib

    import mcp_types as types

    from reviewer.mcp_gate.upstream import result_value

    png = b"\x89PNG fake image bytes"
    answered = types.CallToolResult(
        content=[
            types.TextContent(type="text", text="created"),
            types.ResourceLink(type="resource_link", uri="file:///srv/docs/new.txt", name="new.txt"),
            types.ImageContent(type="image", data=base64.b64encode(png).decode(), mime_type="image/png"),
            types.EmbeddedResource(
                type="resource",
                resource=types.TextResourceContents(uri="memo://today", mime_type="text/plain", text="hello"),
            ),
        ]
    )
    assert result_value(answered) == {
        "content": "created",
        "blocks": [
            {"type": "resource_link", "uri": "file:///srv/docs/new.txt", "name": "new.txt"},
            {
                "type": "image",
                "mime_type": "image/png",
                "sha256": hashlib.sha256(png).hexdigest(),
                "bytes": len(png),
            },
            {"type": "resource", "uri": "memo://today", "mime_type": "text/plain", "text": "hello"},
        ],
    }
    only_text = types.CallToolResult(content=[types.TextContent(type="text", text="done")])
    assert result_value(only_text) == {"content": "done"}, "a text answer is kept as it was"


@pytest.mark.parametrize(
    "timeouts",
    [
        ("--upstream-timeout", "0"),
        ("--upstream-start-timeout", "-1"),
        ("--upstream-timeout", "nan"),
        ("--upstream-start-timeout", "inf"),
        ("--decision-timeout", "0"),
    ],
)
def test_a_timeout_that_could_never_end_a_wait_or_never_let_one_start_is_refused(
    timeouts: tuple[str, str], capsys: pytest.CaptureFixture[str]
) -> None:
    """Refused before the upstream starts, in one line naming the option: 0 or less ends every wait at
    once, nan or inf never ends one."""
    from reviewer.__main__ import main

    assert main(["mcp-gate", *timeouts, "--", "true"]) == 2
    flag, seconds = timeouts[0], float(timeouts[1])
    assert capsys.readouterr().err.splitlines() == [
        f"reviewer mcp-gate: {flag} must be a finite number of seconds above 0, not {seconds:g}"
    ]
