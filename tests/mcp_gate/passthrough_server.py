"""An upstream MCP server that declares logging, resource subscriptions and completions (the official
SDK's low-level server), with one tool; every such request it receives is appended to PASSTHROUGH_LOG."""

from __future__ import annotations

import json
import os
import warnings
from typing import Any

import anyio
import mcp_types as types
from mcp.server import Server
from mcp.server.stdio import stdio_server

warnings.simplefilter("ignore", UserWarning)  # the SDK warns of the handshake's features it serves
LOG = os.environ["PASSTHROUGH_LOG"]
RESOURCE = "memo://today"
COLOURS = ("red", "green", "grey")


def logged(method: str, value: str) -> None:
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps([method, value]) + "\n")


async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
    tool = types.Tool(
        name="paint", input_schema={"type": "object", "properties": {"colour": {"type": "string"}}}
    )
    return types.ListToolsResult(tools=[tool])


async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text="painted")])


async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
    return types.ListResourcesResult(resources=[types.Resource(uri=RESOURCE, name="today")])


async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
    return types.ReadResourceResult(contents=[types.TextResourceContents(uri=params.uri, text="memo")])


async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
    logged("resources/subscribe", params.uri)
    return types.EmptyResult()


async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
    logged("resources/unsubscribe", params.uri)
    return types.EmptyResult()


async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
    logged("completion/complete", params.argument.value)
    values = [colour for colour in COLOURS if colour.startswith(params.argument.value)]
    return types.CompleteResult(completion=types.Completion(values=values, total=len(values)))


async def set_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
    logged("logging/setLevel", params.level)
    return types.EmptyResult()


async def main() -> None:
    server: Server[Any] = Server(
        "passthrough",
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_read_resource=read_resource,
        on_subscribe_resource=subscribe,
        on_unsubscribe_resource=unsubscribe,
        on_completion=complete,
        on_set_logging_level=set_level,
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


anyio.run(main)
