"""What the upstream asks of the host passes through the gate: sampling, elicitation and roots reach
the host's callbacks and their answers come back, and the progress of a passed-through call reaches
the host under its own token. A host that offers none of them gets the upstream's request refused in
words, never answered by the gate. Driven by the official client, the upstream on the official SDK."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client, StdioServerParameters

from tests.agent.fixtures import Queue
from tests.mcp_gate.test_official import gate_parameters

UPSTREAM = Path(__file__).with_name("capabilities_server.py")
TOOLS = ("ask_model", "ask_user", "my_roots", "count_slowly")


def parameters(queue: Queue, tmp_path: Path) -> StdioServerParameters:
    """The gate as a host starts it, every tool of the upstream's a read passed through."""
    (tmp_path / "work").mkdir(exist_ok=True)
    reads = [word for name in TOOLS for word in ("--read", name)]
    return gate_parameters(queue, [sys.executable, str(UPSTREAM)], *reads, writable=tmp_path / "work")


async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
    asked = params.messages[0].content.text  # type: ignore[union-attr]
    return types.CreateMessageResult(
        role="assistant", content=types.TextContent(type="text", text=f"yes to {asked}"), model="host-model"
    )


async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
    return types.ElicitResult(action="accept", content={"ok": True})


async def roots(context: Any) -> types.ListRootsResult:
    return types.ListRootsResult(roots=[types.Root(uri="file:///srv/project", name="project")])


def texts(results: list[types.CallToolResult]) -> list[str]:
    return [result.content[0].text for result in results]  # type: ignore[union-attr]


def test_sampling_elicitation_roots_and_progress_pass_through_the_gate(queue: Queue, tmp_path: Path) -> None:
    progress: list[tuple[float, float | None, str | None]] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append((done, total, message))

    async def scenario() -> list[types.CallToolResult]:
        host = Client(
            parameters(queue, tmp_path),
            read_timeout_seconds=60,
            mode="legacy",
            sampling_callback=sampling,
            elicitation_callback=elicitation,
            list_roots_callback=roots,
        )
        async with host:
            return [
                await host.call_tool("ask_model", {"prompt": "ship it?"}),
                await host.call_tool("ask_user", {"question": "really?"}),
                await host.call_tool("my_roots", {}),
                await host.call_tool("count_slowly", {"steps": 2}, progress_callback=on_progress),
            ]

    answered = asyncio.run(scenario())
    assert texts(answered) == [
        "model said: yes to ship it?",
        "user accept: True",
        "file:///srv/project",
        "counted to 2",
    ]
    assert progress == [(1.0, 2.0, "step 1"), (2.0, 2.0, "step 2")]


def test_a_host_that_offers_none_of_them_has_the_upstreams_requests_refused_in_words(
    queue: Queue, tmp_path: Path
) -> None:
    async def scenario() -> list[types.CallToolResult]:
        async with Client(parameters(queue, tmp_path), read_timeout_seconds=60, mode="legacy") as host:
            return [await host.call_tool(name, arguments) for name, arguments in (
                ("ask_model", {"prompt": "ship it?"}),
                ("my_roots", {}),
            )]  # fmt: skip

    said = texts(asyncio.run(scenario()))
    assert all(text.startswith("error: ") for text in said), said
    assert "the host behind reviewer mcp-gate offers no sampling" in said[0]
    assert "the host behind reviewer mcp-gate offers no roots" in said[1]
