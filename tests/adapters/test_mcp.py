"""Python write tools on an MCP server (`gated_server`), driven by the official MCP client in-process,
with the real queue and the real sample API."""

from __future__ import annotations

import asyncio
import json
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client
from mcp.server.mcpserver import MCPServer

from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.adapters.examples import load_example
from tests.agent.fixtures import Queue
from tests.agent.helpers import received, reviewer_decides

example = load_example("mcp_server")


def real_writes(sample_api: RunningSampleApi) -> list[tuple[str, str]]:
    return [(entry["method"], entry["path"]) for entry in received(sample_api) if not entry["query"]]


def test_add_tool_accepts_a_write_tool_unchanged() -> None:
    async def listed() -> Any:
        server = MCPServer("plain")
        server.add_tool(tools.update_ticket)
        return (await server.list_tools())[0]

    tool = asyncio.run(listed())
    assert tool.name == "update_ticket"
    assert set(tool.input_schema["properties"]) == {"id", "status", "mergedInto", "title"}
    assert tool.input_schema["required"] == ["id"]


def test_the_example_server_dry_runs_submits_and_runs_the_approved_plan_once(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    server = example.build(sample_api.base_url, queue.url, token=queue.agent_token)

    async def scenario() -> tuple[dict[str, Any], list[str], dict[str, Any]]:
        async with Client(server) as host:
            created = json.loads(
                (await host.call_tool("create_ticket", {"title": "Printer on fire"})).content[0].text
            )
            merged = json.loads(
                (
                    await host.call_tool(
                        "update_ticket",
                        {"id": "t1", "status": "closed", "mergedInto": created["result"]["id"]},
                    )
                )
                .content[0]
                .text
            )
            submitted = (
                await host.call_tool("reviewer_submit_plan", {"title": "Merge t1"})
            ).structured_content
            assert submitted is not None and submitted["state"] == "pending"
            late = await host.call_tool("delete_ticket", {"id": "t3"})
            assert late.is_error
            await reviewer_decides(queue.url, queue.reviewer_token, submitted["proposal_id"], "approve")
            status = await host.call_tool("reviewer_plan_status", {"proposal_id": submitted["proposal_id"]})
            again = await host.call_tool("reviewer_plan_status", {"proposal_id": submitted["proposal_id"]})
            assert again.structured_content == status.structured_content
            return merged, [created["note"]], status.structured_content or {}

    merged, notes, status = asyncio.run(scenario())
    assert merged["status"] == "refused" and "chain noise" in merged["note"]
    assert "accepted" in notes[0]
    assert status["state"] == "executed" and status["ended"] == "completed"
    assert real_writes(sample_api) == [("POST", "/v1/tickets"), ("PATCH", "/v1/tickets/t1")]
    assert sample_api.store.tickets["t1"]["mergedInto"] == "tk-4"
