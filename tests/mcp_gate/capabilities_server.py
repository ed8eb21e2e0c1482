"""An upstream MCP server that asks its client for what only a host has: its model (sampling), its
user (elicitation), its folders (roots); and reports the progress of a slow tool. Each tool answers
what the client answered, or the error it got."""

from __future__ import annotations

import warnings

import mcp_types as types
from mcp.server.mcpserver import Context, MCPServer
from pydantic import BaseModel

warnings.simplefilter("ignore")  # the SDK warns that sampling and roots are deprecated in a later protocol
server = MCPServer("asks-the-host")


class Answer(BaseModel):
    ok: bool


@server.tool()
async def ask_model(prompt: str, ctx: Context) -> str:
    """Sampling: the host's model answers `prompt`."""
    try:
        result = await ctx.session.create_message(
            [types.SamplingMessage(role="user", content=types.TextContent(type="text", text=prompt))],
            max_tokens=20,
        )
    except Exception as error:
        return f"error: {error}"
    return f"model said: {result.content.text}"  # type: ignore[union-attr]


@server.tool()
async def ask_user(question: str, ctx: Context) -> str:
    """Elicitation: the host's user answers `question`."""
    try:
        result = await ctx.elicit(question, Answer)
    except Exception as error:
        return f"error: {error}"
    return f"user {result.action}: {result.data.ok if result.action == 'accept' else '-'}"


@server.tool()
async def my_roots(ctx: Context) -> str:
    """Roots: the folders the host names."""
    try:
        result = await ctx.session.list_roots()
    except Exception as error:
        return f"error: {error}"
    return " ".join(str(root.uri) for root in result.roots)


@server.tool()
async def count_slowly(steps: int, ctx: Context) -> str:
    """Reports its progress at each step."""
    for step in range(1, steps + 1):
        await ctx.report_progress(step, steps, f"step {step}")
    return f"counted to {steps}"


if __name__ == "__main__":
    server.run("stdio")
