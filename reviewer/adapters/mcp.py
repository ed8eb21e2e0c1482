"""Python write tools served over MCP, gated (`pip install reviewer-gate[mcp]`).

    server = gated_server(gate, create_ticket, update_ticket, read_tools=[list_tickets])
    server.run("stdio")

`server.add_tool(create_ticket)` alone registers a write tool (its signature is real), but each MCP
request runs in a task of its own, outside any `dry_run` block, so the tool would refuse to act. Here a
`PlanSession` holds the plan across requests: each write is dry-run into it through the gate's backend,
`reviewer_submit_plan` submits it and answers at once, and `reviewer_plan_status` runs it once when a
reviewer has approved it. For a server you do not write yourself, use `reviewer mcp-gate`.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterable
from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

from reviewer.agent.errors import AgentError
from reviewer.agent.gate import Gate
from reviewer.agent.session import PlanSession
from reviewer.agent.tools import GatedTool, WriteTool, spec_of
from reviewer.queue.refusals import QueueError

SUBMIT_TOOL = "reviewer_submit_plan"
STATUS_TOOL = "reviewer_plan_status"


def recorded_into(
    session: PlanSession, tool: GatedTool | WriteTool
) -> Callable[..., Coroutine[Any, Any, str]]:
    """`tool` as an MCP tool function: the same signature, each call dry-run into `session`'s plan, and
    the answer (with its note on what the dry run proved) as text for the model."""
    spec = spec_of(tool)

    async def call(*args: Any, **kwargs: Any) -> str:
        bound = spec.signature.bind_partial(*args, **kwargs)
        declared, _ = spec.accept(bound.arguments)
        try:
            return str(await session.call(spec, declared))
        except (AgentError, QueueError) as refused:
            raise ToolError(str(refused)) from None

    call.__name__ = call.__qualname__ = spec.name
    call.__doc__ = spec.description or None
    call.__annotations__ = {**spec.parameter_hints(), "return": str}
    call.__signature__ = spec.signature.replace(return_annotation=str)  # type: ignore[attr-defined]
    return call


def gated_server(
    gate: Gate,
    *tools: GatedTool | WriteTool,
    read_tools: Iterable[Callable[..., Any]] = (),
    name: str = "reviewer-gated",
    title: str | None = None,
) -> MCPServer:
    """An MCP server whose write tools are gated by `gate`; `read_tools` are served as they are."""
    session = PlanSession(gate, title=title)
    server = MCPServer(name)
    for tool in tools:
        spec = spec_of(tool)
        server.add_tool(
            recorded_into(session, spec),
            annotations=ToolAnnotations(read_only_hint=False, destructive_hint=spec.effect == "delete"),
        )
    for read in read_tools:
        server.add_tool(read, annotations=ToolAnnotations(read_only_hint=True))

    async def reviewer_submit_plan(title: str = "") -> dict[str, Any]:
        """Submit the write calls made so far as one plan for a human reviewer; answers at once."""
        return await _answering(session.submit(title or None))

    async def reviewer_plan_status(proposal_id: str) -> dict[str, Any]:
        """The plan's state; the first time it is approved, its calls run once and each result is given."""
        return await _answering(session.status(proposal_id))

    server.add_tool(reviewer_submit_plan, name=SUBMIT_TOOL)
    server.add_tool(reviewer_plan_status, name=STATUS_TOOL)
    return server


async def _answering(step: Coroutine[Any, Any, dict[str, Any]]) -> dict[str, Any]:
    try:
        return await step
    except (AgentError, QueueError) as refused:
        raise ToolError(str(refused)) from None
