"""`reviewer mcp-gate`: a stdio MCP server in front of an unmodified upstream MCP server.

The host (a desktop assistant, an IDE) starts the gate instead of the upstream. The gate starts the
upstream from COMMAND over stdio and lists its tools unchanged, plus `reviewer_submit_plan` and
`reviewer_plan_status`; the upstream's resources, resource templates and prompts pass through as they are.

What passes un-gated is the operator's decision (`TrustPolicy`), never the upstream's: MCP calls tool
annotations untrusted hints. A tool passes straight through only when `--read` names it, or when the
operator trusts read-only hints (`--trust-read-only-hints`) and the tool says read-only without also
saying destructive. Any other call is recorded (`dry_run.via: record`) and answered at once with what
was recorded and a placeholder for its result, in the shape of the tool's output schema when it
declares one (the host's client validates structured content against it). Effects never overstate:
`--effect` says, else an update when the tool hints `destructiveHint` (it may overwrite: the reviewer is
told so), else a create. `delete` comes only from the operator.

The proposal names the upstream (`--name`, else the command and its arguments) and pins the definitions
of its tools (`Target.tools_sha256`). Once a reviewer approves, `reviewer_plan_status` lists the tools
again, refuses an upstream whose definitions changed, claims the approval and makes the calls on the
upstream once, in order, stopping at the first failure (`reviewer.agent.session`). The queue holds the
plan, so a gate restarted between submission and approval runs it from the queue's copy. A call sent
and never answered (a timeout, an upstream that died) may have been performed: it is never sent again.

The upstream inherits the gate's environment except the agent token, which is the gate's alone.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
import tomllib
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final, get_args

import anyio
import mcp_types as types
import msgspec
from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.exceptions import MCPError

from reviewer.agent.errors import AgentError
from reviewer.agent.gate import AGENT_TOKEN_ENV, Gate, MissingAgentToken
from reviewer.agent.session import PlanSession
from reviewer.agent.shaped import shaped_answer
from reviewer.agent.tools import WRITE_EFFECTS, WriteTool
from reviewer.plan.dry_run_params import names_dry_run
from reviewer.plan.placeholders import Reference
from reviewer.plan.proposal import Effect, Proposal, Target, canonical_json
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


class UpstreamNoAnswer(UpstreamFailed, ConnectionError):
    """A real call was sent and no answer came (a timeout, an upstream that died): it may have been
    performed. A connection failure, so the executor reports the call's outcome as unknown."""


class UpstreamChanged(Exception):
    """The upstream is not the one the approved plan was recorded against: another server, or tools
    whose definitions changed since. Nothing is run; the approval stays unused."""


class TrustConfigError(ValueError):
    """The operator's tool configuration (`--tools FILE`, `--read`, `--effect`) cannot be used."""


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


DESTRUCTIVE_CAUTION: Final = (
    "the upstream hints destructiveHint: a call may overwrite or destroy what it touches "
    "(an annotation the operator has not confirmed)"
)
READ_ONLY_CAUTION: Final = (
    "the upstream hints readOnlyHint, which the operator has not confirmed (--read): gated as a call "
    "whose effect is not known"
)


@dataclass(frozen=True)
class TrustPolicy:
    """The operator's word on the upstream's tools; the upstream's annotations count only as it allows.

    `reads` pass un-gated; `effects` are gated with that effect. With `trust_read_only_hints`, a tool
    hinted `readOnlyHint` (and not also `destructiveHint`) passes too. Nothing else passes: a hint is
    the upstream's claim about itself, and one wrong hint would let a write through unseen.
    """

    reads: frozenset[str] = frozenset()
    effects: Mapping[str, Effect] = field(default_factory=dict)
    trust_read_only_hints: bool = False

    def passes(self, tool: types.Tool) -> bool:
        """Whether calls of `tool` go straight to the upstream, un-gated."""
        if tool.name in self.effects:
            return False
        if tool.name in self.reads:
            return True
        hints = tool.annotations
        return bool(
            self.trust_read_only_hints
            and hints is not None
            and hints.read_only_hint is True
            and hints.destructive_hint is not True
        )

    def effect_of(self, tool: types.Tool) -> Effect:
        """What a gated call of `tool` does, for the reviewer, never more than the evidence says."""
        if tool.name in self.effects:
            return self.effects[tool.name]
        if self._destructive(tool):
            return "update"
        if tool.annotations is not None and tool.annotations.read_only_hint is True:
            return "other"  # it claims to write nothing: not a create, and not a read until the operator says
        return "create"

    def caution_of(self, tool: types.Tool) -> str:
        """What the reviewer is told of each call beyond its effect (a destructive or read-only hint)."""
        if tool.name in self.effects:
            return ""
        if self._destructive(tool):
            return DESTRUCTIVE_CAUTION
        if tool.annotations is not None and tool.annotations.read_only_hint is True:
            return READ_ONLY_CAUTION
        return ""

    def destructive(self, tool: types.Tool) -> bool:
        """Whether its calls are marked destructive: the operator's `--effect TOOL=delete`, or the
        upstream's `destructiveHint`, which can only raise it (an update the operator named may still
        be marked destructive by its hint), never lower it."""
        return self.effects.get(tool.name) == "delete" or self._destructive(tool)

    @staticmethod
    def _destructive(tool: types.Tool) -> bool:
        return tool.annotations is not None and tool.annotations.destructive_hint is True


def load_policy(
    config: Path | None, reads: Sequence[str], effect_pairs: Sequence[str], trust_read_only_hints: bool
) -> TrustPolicy:
    """The policy from the config file (TOML: `read = [...]`, `[effects]`, `trust_read_only_hints`)
    and the flags, which win over the file for the tools they name."""
    file_reads: set[str] = set()
    file_effects: dict[str, Effect] = {}
    trust = trust_read_only_hints
    if config is not None:
        try:
            document = tomllib.loads(config.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError) as error:
            raise TrustConfigError(f"--tools {config}: {error}") from None
        unknown = sorted(set(document) - {"read", "effects", "trust_read_only_hints"})
        if unknown:
            raise TrustConfigError(
                f"--tools {config}: unknown key {unknown[0]!r} (read, effects, trust_read_only_hints)"
            )
        listed = document.get("read", [])
        if not isinstance(listed, list) or not all(isinstance(name, str) and name for name in listed):
            raise TrustConfigError(f"--tools {config}: read must be a list of tool names")
        file_reads = set(listed)
        effects = document.get("effects", {})
        if not isinstance(effects, dict):
            raise TrustConfigError(f"--tools {config}: [effects] must map tool names to effects")
        file_effects = parse_effects(f"{name}={value}" for name, value in effects.items())
        hinted = document.get("trust_read_only_hints", False)
        if not isinstance(hinted, bool):
            raise TrustConfigError(f"--tools {config}: trust_read_only_hints must be true or false")
        trust = trust or hinted
        clash = sorted(file_reads & set(file_effects))
        if clash:
            raise TrustConfigError(f"--tools {config}: {clash[0]!r} is both in read and in [effects]")
    flag_effects = parse_effects(effect_pairs)
    clash = sorted(set(reads) & set(flag_effects))
    if clash:
        raise TrustConfigError(f"{clash[0]!r} is given both --read and --effect")
    effects_now = {name: effect for name, effect in file_effects.items() if name not in reads}
    effects_now.update(flag_effects)
    reads_now = (file_reads - set(flag_effects)) | set(reads)
    return TrustPolicy(frozenset(reads_now), effects_now, trust)


def definition_of(tool: types.Tool) -> dict[str, Any]:
    """What a call of `tool` means: its name, input and output schemas and annotations (its
    description and title are for the model and may change without changing what a call does)."""
    annotations = tool.annotations.model_dump(mode="json", exclude_none=True) if tool.annotations else None
    return {
        "name": tool.name,
        "input_schema": tool.input_schema,
        "output_schema": tool.output_schema,
        "annotations": annotations,
    }


def tools_sha256(tools: Iterable[types.Tool]) -> str:
    """SHA-256 of the RFC 8785 JSON of the tools' definitions, in name order: the pin a plan carries."""
    definitions = sorted((definition_of(tool) for tool in tools), key=lambda item: item["name"])
    return hashlib.sha256(canonical_json(definitions)).hexdigest()


def upstream_name(command: Sequence[str], name: str | None) -> str:
    """How the proposal names the upstream: the operator's `--name`, else its command line."""
    return name or shlex.join([os.path.basename(command[0]), *command[1:]])


def produced_fields(tool: types.Tool) -> tuple[str, ...]:
    """The fields a real call of `tool` produces: its output schema's properties, else its text."""
    properties = (tool.output_schema or {}).get("properties")
    if isinstance(properties, Mapping) and properties:
        return tuple(properties)
    return (UNSTRUCTURED_FIELD,)


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

    async def current_tools(self) -> dict[str, types.Tool]:
        """The tools the upstream lists now (asked again: a server may change them while it runs)."""
        client = await self.connected()
        try:
            return {tool.name: tool for tool in await self._list_all(client)}
        except Exception as error:  # reported to the host as the upstream's failure
            raise UpstreamFailed(
                f"the upstream server could not list its tools: {_describe(error)}"
            ) from None

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
        """One call on the upstream. An error it answers is raised as `MCPError`; a call sent and not
        answered (a timeout, a connection lost) is `UpstreamNoAnswer`; an answer that breaks the tool's
        own output schema is `UpstreamFailed`."""
        client = await self.connected()
        try:
            return await client.call_tool(name, arguments)
        except MCPError as error:
            if error.error.code in (types.REQUEST_TIMEOUT, types.CONNECTION_CLOSED):
                raise UpstreamNoAnswer(
                    f"the upstream server gave no answer to {name}: {error.error.message}"
                ) from error
            raise
        except RuntimeError as error:
            raise UpstreamFailed(
                f"the upstream server answered {name} outside its own schema: {error}"
            ) from error
        except Exception as error:  # a crash mid-call is reported, not raised raw
            raise UpstreamNoAnswer(f"the upstream server failed during {name}: {_describe(error)}") from error


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


class McpGate:
    """The gate's tool handlers: list, pass reads through, record writes, submit, status."""

    def __init__(self, upstream: Upstream, gate: Gate, policy: TrustPolicy, *, title: str | None) -> None:
        self.upstream = upstream
        self.gate = gate
        self.policy = policy
        self.session = PlanSession(gate, title=title, replay_tools=self.replay_tools)
        self.failures: list[str] = []
        """Why real calls on the upstream failed in the run under way: a run that ends on one is an
        MCP error naming the upstream, after its report is stored."""

    @property
    def name(self) -> str:
        return self.gate.target.api

    async def list_tools(self) -> types.ListToolsResult:
        await self._ready()
        return types.ListToolsResult(tools=[*self.upstream.tools.values(), *GATE_TOOLS])

    async def call_tool(self, name: str, arguments: dict[str, Any]) -> types.CallToolResult:
        try:
            if name == SUBMIT_TOOL:
                title = arguments.get("title")
                await self._ready()
                # The plan pins the definitions its calls were recorded against (listed at start).
                self.gate.target = msgspec.structs.replace(
                    self.gate.target, tools_sha256=tools_sha256(self.upstream.tools.values())
                )
                return json_result(await self.session.submit(title if isinstance(title, str) else None))
            if name == STATUS_TOOL:
                proposal_id = arguments.get("proposal_id")
                if not isinstance(proposal_id, str) or not proposal_id:
                    return tool_error(f"{STATUS_TOOL} needs the proposal_id that {SUBMIT_TOOL} answered")
                return await self._status(proposal_id)
            await self._ready()
            tool = self.upstream.tools.get(name)
            if tool is None:
                return tool_error(f"no tool named {name!r}: the upstream server does not list it")
            if self.policy.passes(tool):
                return await self.upstream.call(name, arguments)
            return await self._record(tool, arguments)
        except (AgentError, QueueError) as refused:
            return tool_error(str(refused))
        except (UpstreamFailed, UpstreamChanged) as failed:
            raise MCPError(types.INTERNAL_ERROR, f"{self.name}: {failed}") from None

    async def _status(self, proposal_id: str) -> types.CallToolResult:
        self.failures.clear()
        answer = await self.session.status(proposal_id)
        if self.failures:
            raise MCPError(
                types.INTERNAL_ERROR,
                f"{self.name}: {self.failures[0]}. {answer.get('summary', '')}".strip(),
            )
        return json_result(answer)

    async def _ready(self) -> None:
        try:
            await self.upstream.connected()
        except UpstreamFailed as failed:
            raise MCPError(types.INTERNAL_ERROR, f"{self.name}: {failed}") from None

    async def replay_tools(self, proposal: Proposal) -> list[WriteTool]:
        """The write tools that run an approved plan on this upstream, once its tools are listed again
        and found to be the ones the plan was recorded against."""
        if proposal.target.api != self.name:
            raise UpstreamChanged(
                f"plan {proposal.proposal_id} was recorded against {proposal.target.api}, not this "
                "upstream server; nothing was run"
            )
        tools = await self.upstream.current_tools()
        if proposal.target.tools_sha256 != tools_sha256(tools.values()):
            raise UpstreamChanged(
                f"the upstream server's tool definitions changed since plan {proposal.proposal_id} was "
                "recorded (names, schemas or annotations); nothing was run and the approval is unused. "
                "Record the plan again against the server as it is now"
            )
        return [self._spec(tools[name]) for name in dict.fromkeys(call.tool for call in proposal.calls)]

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
            structured = shaped_answer(tool.output_schema, kept, reference.seq)
            said["result"] = structured
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(said, ensure_ascii=False))],
            structured_content=structured,
        )

    def _spec(self, tool: types.Tool) -> WriteTool:
        """The write tool standing for an upstream tool: recorded in the dry run, called on the upstream
        (once, by the approved run) for real."""
        upstream, name, failures = self.upstream, tool.name, self.failures

        async def write(**arguments: Any) -> Any:
            try:
                result = await upstream.call(name, arguments)
            except UpstreamFailed as failed:
                failures.append(str(failed))
                raise
            if result.is_error:
                raise UpstreamToolError(text_of(result) or "the upstream answered isError")
            return result_value(result)

        return WriteTool(
            name=name,
            effect=self.policy.effect_of(tool),
            produces=produced_fields(tool),
            description=tool.description or "",
            caution=self.policy.caution_of(tool),
            destructive=self.policy.destructive(tool),
            write=write,
        )


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


def passthrough_handlers(upstream: Upstream, capabilities: types.ServerCapabilities) -> dict[str, Any]:
    """Handlers that serve the upstream's resources, resource templates and prompts unchanged, for the
    capabilities it declares (a server without prompts keeps answering "method not found")."""

    async def client() -> Client:
        try:
            return await upstream.connected()
        except UpstreamFailed as failed:
            raise MCPError(types.INTERNAL_ERROR, str(failed)) from None

    async def list_resources(ctx: Any, params: Any) -> types.ListResourcesResult:
        return await (await client()).list_resources(cursor=getattr(params, "cursor", None))

    async def list_resource_templates(ctx: Any, params: Any) -> types.ListResourceTemplatesResult:
        return await (await client()).list_resource_templates(cursor=getattr(params, "cursor", None))

    async def read_resource(ctx: Any, params: types.ReadResourceRequestParams) -> types.ReadResourceResult:
        return await (await client()).read_resource(params.uri)

    async def list_prompts(ctx: Any, params: Any) -> types.ListPromptsResult:
        return await (await client()).list_prompts(cursor=getattr(params, "cursor", None))

    async def get_prompt(ctx: Any, params: types.GetPromptRequestParams) -> types.GetPromptResult:
        return await (await client()).get_prompt(params.name, params.arguments)

    handlers: dict[str, Any] = {}
    if capabilities.resources is not None:
        handlers.update(
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
        )
    if capabilities.prompts is not None:
        handlers.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    return handlers


async def serve(options: argparse.Namespace, token: str) -> None:
    """Start the upstream, then answer the host on stdin/stdout until it closes them."""
    environment = {key: value for key, value in os.environ.items() if key != AGENT_TOKEN_ENV}
    upstream = Upstream(
        StdioServerParameters(command=options.command[0], args=options.command[1:], env=environment),
        timeout=options.upstream_timeout,
    )
    name = upstream_name(options.command, options.name)
    queue = QueueClient(options.queue, token)
    try:
        async with running_upstream(upstream):
            with anyio.move_on_after(upstream.timeout):
                await upstream.ready.wait()
            capabilities = None
            if upstream.client is not None and upstream.failure is None:
                capabilities = upstream.client.server_capabilities
            gate = Gate(
                api=None,
                queue=queue,
                backend="record",
                agent=f"mcp-gate:{name}"[:128],
                target=Target(
                    api=f"mcp:{name}",
                    base_url=options.base_url,
                    environment=options.environment,
                ),
            )
            handlers = McpGate(upstream, gate, options.policy, title=options.title)

            async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
                return await handlers.list_tools()

            async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
                return await handlers.call_tool(params.name, dict(params.arguments or {}))

            server: Server[Any] = Server(
                "reviewer-mcp-gate",
                on_list_tools=on_list_tools,
                on_call_tool=on_call_tool,
                **(passthrough_handlers(upstream, capabilities) if capabilities is not None else {}),
            )
            async with stdio_server() as (read_stream, write_stream):
                await server.run(read_stream, write_stream, server.create_initialization_options())
    finally:
        await queue.aclose()


def parse_effects(pairs: Iterable[str]) -> dict[str, Effect]:
    effects: dict[str, Effect] = {}
    for pair in pairs:
        name, _, effect = pair.partition("=")
        if not name or effect not in get_args(Effect) or effect == "read":
            raise TrustConfigError(
                f"--effect {pair!r}: write TOOL=EFFECT with EFFECT one of {', '.join(WRITE_EFFECTS)} "
                "(a tool that only reads is named with --read)"
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
        options.policy = load_policy(
            options.tools, options.read or [], options.effect or [], options.trust_read_only_hints
        )
    except TrustConfigError as error:
        print(f"reviewer mcp-gate: {error}", file=sys.stderr)
        return 2
    anyio.run(serve, options, token)
    return 0
