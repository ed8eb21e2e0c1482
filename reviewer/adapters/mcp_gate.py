"""`reviewer mcp-gate`: a stdio MCP server in front of an unmodified upstream MCP server.

The host (a desktop assistant, an IDE) starts the gate instead of the upstream. The gate starts the
upstream from COMMAND over stdio and lists its tools unchanged, plus `reviewer_submit_plan` and
`reviewer_plan_status`. A tool annotated `readOnlyHint: true` passes straight through. Any other call is
recorded (`dry_run.via: record`; effect `delete` when `destructiveHint` is true, else `update`, unless
`--effect` says otherwise) and answered at once with what was recorded and a placeholder for its result,
in the shape of the tool's output schema when it declares one (the host's client validates structured
content against it). Once a reviewer approves, `reviewer_plan_status` claims the approval and makes the
calls on the upstream, once, in order, stopping at the first failure (`reviewer.agent.session`).

The upstream inherits the gate's environment except the agent token, which is the gate's alone.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import AsyncIterator, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final, get_args

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from reviewer.agent.errors import AgentError
from reviewer.agent.gate import AGENT_TOKEN_ENV, Gate, MissingAgentToken
from reviewer.agent.session import PlanSession
from reviewer.agent.tools import WRITE_EFFECTS, WriteTool
from reviewer.plan.dry_run_params import names_dry_run
from reviewer.plan.placeholders import Reference, placeholder
from reviewer.plan.proposal import Effect, Target
from reviewer.queue.client import QueueClient, QueueError

SUBMIT_TOOL: Final = "reviewer_submit_plan"
STATUS_TOOL: Final = "reviewer_plan_status"
DEFAULT_UPSTREAM_TIMEOUT: Final = 30.0
UNSTRUCTURED_FIELD: Final = "content"
"""The field a placeholder names for a tool without an output schema: its text content."""


class UpstreamFailed(Exception):
    """The upstream server could not be started, did not answer in time, crashed, or lists no tools."""


class UpstreamToolError(Exception):
    """The upstream answered a real call with `isError`: the call failed, and the run stops there."""


GATE_TOOLS: Final = (
    types.Tool(
        name=SUBMIT_TOOL,
        description=(
            "Submit the write calls recorded so far as one plan for a human reviewer. Answers at once with "
            "proposal_id, revision, plan_sha256 and state; nothing is written until a reviewer approves. "
            f"Then ask {STATUS_TOOL}."
        ),
        input_schema={
            "type": "object",
            "properties": {
                "title": {"type": "string", "description": "what the plan does, for the reviewer"}
            },
        },
    ),
    types.Tool(
        name=STATUS_TOOL,
        description=(
            "The state of a submitted plan: pending, approved, rejected (with the reviewer's reason), "
            "expired, or executed. The first time it is approved, this call runs the plan's calls once, "
            "in order, and answers executed with each call's result. Asking again runs nothing more."
        ),
        input_schema={
            "type": "object",
            "properties": {"proposal_id": {"type": "string"}},
            "required": ["proposal_id"],
        },
    ),
)


def effect_of(tool: types.Tool, overrides: Mapping[str, Effect]) -> Effect:
    """What a call of `tool` does, for the reviewer: the operator's word, else the tool's annotations."""
    if tool.name in overrides:
        return overrides[tool.name]
    if tool.annotations is not None and tool.annotations.destructive_hint:
        return "delete"
    return "update"


def is_read_only(tool: types.Tool) -> bool:
    return bool(tool.annotations is not None and tool.annotations.read_only_hint)


def produced_fields(tool: types.Tool) -> tuple[str, ...]:
    """The fields a real call of `tool` produces: its output schema's properties, else its text."""
    properties = (tool.output_schema or {}).get("properties")
    if isinstance(properties, Mapping) and properties:
        return tuple(properties)
    return (UNSTRUCTURED_FIELD,)


def placeholder_value(schema: Any, name: str, seq: int) -> Any:
    """A value valid against `schema` standing for field `name` of call `seq`, not yet produced: the
    placeholder where a string may stand, else the type's neutral value (the text answer says so)."""
    if not isinstance(schema, Mapping):
        return placeholder(name, seq)
    kinds = schema.get("type")
    kinds = [kinds] if isinstance(kinds, str) else list(kinds or [])
    if not kinds and isinstance(schema.get("anyOf"), list) and schema["anyOf"]:
        return placeholder_value(schema["anyOf"][0], name, seq)
    if not kinds or "string" in kinds:
        return placeholder(name, seq)
    if "null" in kinds:
        return None
    if "object" in kinds:
        return structured_placeholders(schema, seq)
    return {"integer": 0, "number": 0, "boolean": False, "array": []}.get(kinds[0], placeholder(name, seq))


def structured_placeholders(schema: Mapping[str, Any], seq: int) -> dict[str, Any]:
    """Structured content in the shape of an output schema, each field a placeholder for call `seq`."""
    properties = schema.get("properties") or {}
    return {name: placeholder_value(sub, name, seq) for name, sub in properties.items()}


def text_of(result: types.CallToolResult) -> str:
    return "\n".join(block.text for block in result.content if isinstance(block, types.TextContent))


def result_value(result: types.CallToolResult) -> Any:
    """What a real call produced, where later calls' placeholders take their values."""
    if result.structured_content is not None:
        return result.structured_content
    return {UNSTRUCTURED_FIELD: text_of(result)}


def tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def json_result(answer: Mapping[str, Any]) -> types.CallToolResult:
    return types.CallToolResult(
        content=[types.TextContent(type="text", text=json.dumps(answer, ensure_ascii=False))],
        structured_content=dict(answer),
    )


@dataclass
class Upstream:
    """The upstream server: started once, held for the gate's life, its tools listed once."""

    parameters: StdioServerParameters
    timeout: float
    client: Client | None = None
    tools: dict[str, types.Tool] = field(default_factory=dict)
    failure: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    closing: anyio.Event = field(default_factory=anyio.Event)

    async def hold(self) -> None:
        """Connect, list the tools, then keep the connection open until the gate closes."""
        try:
            async with AsyncExitStack() as stack:
                client = await stack.enter_async_context(
                    Client(self.parameters, read_timeout_seconds=self.timeout, cache=None)
                )
                listed = await self._list_all(client)
                if not listed:
                    self.failure = "the upstream server lists no tools: there is nothing to gate"
                else:
                    self.client, self.tools = client, {tool.name: tool for tool in listed}
                    clash = sorted(set(self.tools) & {SUBMIT_TOOL, STATUS_TOOL})
                    if clash:
                        self.failure = f"the upstream server has a tool named {clash[0]}, which the gate owns"
                self.ready.set()
                await self.closing.wait()
        except Exception as error:  # any failure to start is reported to the host
            self.failure = (
                f"the upstream server could not be started or stopped answering: {_describe(error)}"
            )
        finally:
            self.client = None
            if self.failure is None:
                self.failure = "the upstream server exited"
            self.ready.set()

    async def _list_all(self, client: Client) -> list[types.Tool]:
        tools: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await client.list_tools(cursor=cursor)
            tools.extend(page.tools)
            cursor = page.next_cursor
            if cursor is None:
                return tools

    async def connected(self) -> Client:
        """The live client, or `UpstreamFailed` saying why there is none (waiting at most `timeout`)."""
        with anyio.move_on_after(self.timeout):
            await self.ready.wait()
        if not self.ready.is_set():
            raise UpstreamFailed(f"the upstream server did not answer within {self.timeout:g} s")
        if self.client is None or self.failure is not None:
            raise UpstreamFailed(self.failure or "the upstream server is not connected")
        return self.client

    async def call(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        client = await self.connected()
        try:
            return await client.call_tool(name, arguments)
        except MCPError:
            raise
        except Exception as error:  # a crash mid-call is reported, not raised raw
            raise UpstreamFailed(f"the upstream server failed during {name}: {_describe(error)}") from error


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class McpGate:
    """The gate's tool handlers: list, pass reads through, record writes, submit, status."""

    def __init__(self, upstream: Upstream, session: PlanSession, effects: Mapping[str, Effect]) -> None:
        self.upstream = upstream
        self.session = session
        self.effects = dict(effects)
        self._specs: dict[str, WriteTool] = {}

    async def list_tools(self) -> types.ListToolsResult:
        await self._ready()
        return types.ListToolsResult(tools=[*self.upstream.tools.values(), *GATE_TOOLS])

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            if name == SUBMIT_TOOL:
                title = arguments.get("title")
                return json_result(await self.session.submit(title if isinstance(title, str) else None))
            if name == STATUS_TOOL:
                proposal_id = arguments.get("proposal_id")
                if not isinstance(proposal_id, str) or not proposal_id:
                    return tool_error(f"{STATUS_TOOL} needs the proposal_id that {SUBMIT_TOOL} answered")
                return json_result(await self.session.status(proposal_id))
            await self._ready()
            tool = self.upstream.tools.get(name)
            if tool is None:
                return tool_error(f"no tool named {name!r}: the upstream server does not list it")
            if is_read_only(tool):
                return await self.upstream.call(name, arguments)
            return await self._record(tool, arguments)
        except (AgentError, QueueError) as refused:
            return tool_error(str(refused))
        except UpstreamFailed as failed:
            raise MCPError(types.INTERNAL_ERROR, str(failed)) from None

    async def _ready(self) -> None:
        try:
            await self.upstream.connected()
        except UpstreamFailed as failed:
            raise MCPError(types.INTERNAL_ERROR, str(failed)) from None

    async def _record(self, tool: types.Tool, arguments: dict[str, Any]) -> types.CallToolResult:
        kept = {key: value for key, value in arguments.items() if not names_dry_run(key)}
        answer = await self.session.call(self._spec(tool), kept)
        placeholders = answer.result if isinstance(answer.result, Mapping) else {}
        said: dict[str, Any] = {
            "recorded": True,
            "tool": tool.name,
            "arguments": kept,
            "result": placeholders,
            "note": f"{answer.note} Pass placeholders on unchanged; call {SUBMIT_TOOL} when done.",
        }
        structured = None
        reference = Reference.parse(str(next(iter(placeholders.values()), "")))
        if tool.output_schema is not None and reference is not None:
            structured = structured_placeholders(tool.output_schema, reference.seq)
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(said, ensure_ascii=False))],
            structured_content=structured,
        )

    def _spec(self, tool: types.Tool) -> WriteTool:
        """The write tool standing for an upstream tool: recorded in the dry run, called on the upstream
        (once, by the approved run) for real."""
        spec = self._specs.get(tool.name)
        if spec is None:
            upstream, name = self.upstream, tool.name

            async def write(**arguments: Any) -> Any:
                result = await upstream.call(name, arguments)
                if result.is_error:
                    raise UpstreamToolError(text_of(result) or "the upstream answered isError")
                return result_value(result)

            spec = self._specs[name] = WriteTool(
                name=name,
                effect=effect_of(tool, self.effects),
                produces=produced_fields(tool),
                description=tool.description or "",
                write=write,
            )
        return spec


@asynccontextmanager
async def running_upstream(upstream: Upstream) -> AsyncIterator[None]:
    async with anyio.create_task_group() as group:
        group.start_soon(upstream.hold)
        try:
            yield
        finally:
            upstream.closing.set()
            # An upstream still starting (or hung) would hold the gate open: cancelling makes the stdio
            # client stop the upstream's process instead of leaving it behind.
            group.cancel_scope.cancel()


async def serve(options: argparse.Namespace, token: str) -> None:
    """Start the upstream, then answer the host on stdin/stdout until it closes them."""
    environment = {key: value for key, value in os.environ.items() if key != AGENT_TOKEN_ENV}
    upstream = Upstream(
        StdioServerParameters(command=options.command[0], args=options.command[1:], env=environment),
        timeout=options.upstream_timeout,
    )
    command_name = os.path.basename(options.command[0])
    queue = QueueClient(options.queue, token)
    gate = Gate(
        api=None,
        queue=queue,
        backend="record",
        agent=f"mcp-gate:{command_name}"[:128],
        target=Target(api=f"mcp:{command_name}"),
    )
    handlers = McpGate(upstream, PlanSession(gate, title=options.title), options.effects)

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return await handlers.list_tools()

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        return await handlers.call_tool(params.name, dict(params.arguments or {}))

    server: Server[Any] = Server("reviewer-mcp-gate", on_list_tools=on_list_tools, on_call_tool=on_call_tool)
    try:
        async with running_upstream(upstream), stdio_server() as (read_stream, write_stream):
            await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await queue.aclose()


def parse_effects(pairs: Sequence[str]) -> dict[str, Effect]:
    effects: dict[str, Effect] = {}
    for pair in pairs:
        name, _, effect = pair.partition("=")
        if not name or effect not in get_args(Effect) or effect == "read":
            raise argparse.ArgumentTypeError(
                f"--effect {pair!r}: write TOOL=EFFECT with EFFECT one of {', '.join(WRITE_EFFECTS)}"
            )
        effects[name] = effect  # type: ignore[assignment]
    return effects


def run(options: argparse.Namespace) -> int:
    """The `mcp-gate` command; stdout belongs to the MCP protocol, so every message goes to stderr."""
    token = os.environ.get(AGENT_TOKEN_ENV)
    if not token:
        print(f"reviewer mcp-gate: {MissingAgentToken()}", file=sys.stderr)
        return 2
    try:
        options.effects = parse_effects(options.effect or [])
    except argparse.ArgumentTypeError as error:
        print(f"reviewer mcp-gate: {error}", file=sys.stderr)
        return 2
    anyio.run(serve, options, token)
    return 0
