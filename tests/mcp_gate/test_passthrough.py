"""What the gate passes through as the upstream declares it: the logging level, resource
subscriptions and completions answer through the gate as they answer bare, through the official
MCP client (the same checks run against both; each request reaches the upstream)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

import mcp_types as types
from mcp import Client, StdioServerParameters

from tests.agent.fixtures import Queue

pytestmark = pytest.mark.filterwarnings("ignore::mcp.shared.exceptions.MCPDeprecationWarning")
"""The SDK warns that a later protocol version dropped the logging level and subscriptions."""

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = [sys.executable, str(Path(__file__).with_name("passthrough_server.py"))]


async def checks(host: Client) -> dict[str, Any]:
    """Each passed-through feature, used as a host uses it: what it answered."""
    capabilities = host.server_capabilities
    assert capabilities is not None
    await host.set_logging_level("warning")
    await host.subscribe_resource("memo://today")
    await host.unsubscribe_resource("memo://today")
    completed = await host.complete(
        types.ResourceTemplateReference(type="ref/resource", uri="memo://{colour}"),
        {"name": "colour", "value": "gr"},
    )
    return {
        "logging": capabilities.logging is not None,
        "subscribe": bool(capabilities.resources and capabilities.resources.subscribe),
        "completions": capabilities.completions is not None,
        "completed": completed.completion.values,
    }


def run(command: list[str], log: Path, queue: Queue) -> dict[str, Any]:
    parameters = StdioServerParameters(
        command=command[0],
        args=command[1:],
        env={
            "PASSTHROUGH_LOG": str(log),
            "REVIEWER_AGENT_TOKEN": queue.agent_token,
            "XDG_STATE_HOME": str(log.parent / "state"),
        },
        cwd=str(ROOT),
    )

    async def scenario() -> dict[str, Any]:
        # the initialize handshake, as the Inspector and today's hosts connect
        async with Client(parameters, read_timeout_seconds=120, mode="legacy") as host:
            return await checks(host)

    return asyncio.run(scenario())


def test_logging_subscriptions_and_completions_answer_through_the_gate_as_bare(
    queue: Queue, tmp_path: Path
) -> None:
    bare_log, gated_log = tmp_path / "bare.log", tmp_path / "gated.log"
    bare = run(UPSTREAM, bare_log, queue)
    gate = [sys.executable, "-m", "reviewer", "mcp-gate", "--queue", queue.url, "--writable", str(tmp_path)]
    gate += ["--", *UPSTREAM]
    gated = run(gate, gated_log, queue)

    assert bare == {"logging": True, "subscribe": True, "completions": True, "completed": ["green", "grey"]}
    assert gated == bare
    received = [tuple(json.loads(line)) for line in gated_log.read_text().splitlines()]
    assert received == [tuple(json.loads(line)) for line in bare_log.read_text().splitlines()]
    assert received == [
        ("logging/setLevel", "warning"),
        ("resources/subscribe", "memo://today"),
        ("resources/unsubscribe", "memo://today"),
        ("completion/complete", "gr"),
    ]
