"""The gated MCP server the host talks to: the upstream's tools listed unchanged plus
`reviewer_submit_plan` and `reviewer_plan_status`, reads passed through, writes recorded into a plan,
the approved plan run once on the upstream; resources and prompts pass through as they are."""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping
from contextlib import AsyncExitStack
from typing import Any, Final

import anyio
import mcp_types as types
import msgspec
from mcp import Client, StdioServerParameters
from mcp.server import Server
from mcp.server.stdio import stdio_server
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from reviewer.agent.errors import AgentError
from reviewer.agent.gate import AGENT_TOKEN_ENV, Gate, MissingAgentToken
from reviewer.agent.session import PlanSession
from reviewer.agent.shaped import shape
from reviewer.agent.signer_options import trust_from_options
from reviewer.agent.tools import WriteTool
from reviewer.agent.waiting import Patience
from reviewer.audit.checks import check_readable
from reviewer.audit.inputs import AuditSourceUnreadable, credential_files, credential_variables
from reviewer.audit.options import audit_headers, audit_option
from reviewer.audit.registry import AuditSource
from reviewer.mcp_gate.host_relay import progress_forwarder
from reviewer.mcp_gate.recordings import RecordedCall, RecordingFile, RecordingUnreadable
from reviewer.mcp_gate.trust import TrustConfigError, TrustPolicy, load_policy
from reviewer.mcp_gate.upstream import (
    STATUS_TOOL,
    SUBMIT_TOOL,
    Upstream,
    UpstreamChanged,
    UpstreamFailed,
    UpstreamToolError,
    produced_fields,
    result_value,
    running_upstream,
    text_of,
    tools_sha256,
    upstream_name,
)
from reviewer.plan.dry_run_params import names_dry_run
from reviewer.plan.placeholders import Reference
from reviewer.plan.proposal import Proposal, Target
from reviewer.plan.sanitize import safe_text
from reviewer.queue.client import QueueClient
from reviewer.queue.refusals import QueueError
from reviewer.sandbox.egress import EGRESS_PORT, EgressProxy, proxy_environment, serving_egress
from reviewer.sandbox.environment import sandboxed_environment
from reviewer.sandbox.errors import SandboxRefused
from reviewer.sandbox.handover import HandoverPoint, InnerService, handover_point, serve_handed
from reviewer.sandbox.modes import Sandbox
from reviewer.sandbox.options import sandbox_from_options

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
            "changes_requested (with what to change: re-plan and submit again, as the next revision), "
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


def say(text: str) -> None:
    """One line on stderr (stdout is the MCP protocol's), which hosts show as the server's log."""
    print(f"reviewer mcp-gate: {safe_text(text)}", file=sys.stderr, flush=True)


def tool_error(message: str) -> types.CallToolResult:
    return types.CallToolResult(content=[types.TextContent(type="text", text=message)], is_error=True)


def json_result(answer: Mapping[str, Any], *, failure: str | None = None) -> types.CallToolResult:
    """The answer as JSON text and structured content; with `failure` (said first, in words), or for a
    run that did not complete or whose outcome is unknown, a tool result marked `isError`."""
    said = [failure] if failure is not None else []
    content: list[types.ContentBlock] = [
        types.TextContent(type="text", text=text) for text in [*said, json.dumps(answer, ensure_ascii=False)]
    ]
    return types.CallToolResult(
        content=content, structured_content=dict(answer), is_error=failure is not None or run_failed(answer)
    )


def run_failed(answer: Mapping[str, Any]) -> bool:
    """Whether a status answer is of a run that failed, stopped, was not run, or may have written
    without saying so: the host's model must not read it as done."""
    return (
        bool(answer.get("outcome_unknown"))
        or answer.get("state") == "not run"
        or answer.get("ended") not in (None, "completed")
    )


CARRIED_OVER_CAUTION: Final = (
    "carried over: recorded by an earlier session of this gate (a host that restarted it) and not "
    "submitted then, not in the conversation that submitted this plan"
)


class McpGate:
    """The gate's tool handlers: list, pass reads through, record writes, submit, status."""

    def __init__(
        self,
        upstream: Upstream,
        gate: Gate,
        policy: TrustPolicy,
        *,
        title: str | None,
        recording: RecordingFile | None = None,
    ) -> None:
        self.upstream = upstream
        self.recording = recording
        """Where the calls recorded and not yet submitted are kept, for a gate started after this one."""
        self.recorded: list[RecordedCall] = []
        self.gate = gate
        self.policy = policy
        self.session = PlanSession(gate, title=title, replay_tools=self.replay_tools)
        self.failures: list[str] = []
        """Why real calls on the upstream failed in the run under way: a run that ends on one is an
        MCP error naming the upstream, after its report is stored."""
        self.carried_over: list[str] = []
        """The tools of the calls picked up from an earlier gate, until the model is told of them."""

    @property
    def name(self) -> str:
        return self.gate.target.api

    async def list_tools(self) -> types.ListToolsResult:
        await self._ready()
        return types.ListToolsResult(tools=[*self.upstream.tools.values(), *GATE_TOOLS])

    async def call_tool(
        self, name: str, arguments: dict[str, Any], progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        """One of the host's tool calls: the gate's own, a read passed through (its progress handed to
        the host by `progress`), or a write recorded."""
        try:
            if name == SUBMIT_TOOL:
                title = arguments.get("title")
                await self._ready()
                # The plan pins the definitions its calls were recorded against (listed at start).
                self.gate.target = msgspec.structs.replace(
                    self.gate.target, tools_sha256=tools_sha256(self.upstream.tools.values())
                )
                submitted = await self.session.submit(title if isinstance(title, str) else None)
                self.recorded.clear()
                if self.recording is not None:
                    self.recording.remove()
                return json_result({**submitted, **self._carried_over_told()})
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
                return await self.upstream.call(name, arguments, progress)
            return await self._record(tool, arguments)
        except (AgentError, QueueError) as refused:
            return tool_error(str(refused))
        except (UpstreamFailed, UpstreamChanged) as failed:
            raise MCPError(types.INTERNAL_ERROR, f"{self.name}: {failed}") from None

    async def _status(self, proposal_id: str) -> types.CallToolResult:
        """The plan's state as a tool result, whatever happened: a run that failed or whose outcome is
        unknown, and an upstream that cannot run it, are results marked `isError` (MCP's way of saying
        a tool failed), so the host can still read the plan's state."""
        self.failures.clear()
        try:
            answer = await self.session.status(proposal_id)
        except (UpstreamFailed, UpstreamChanged) as failed:
            return tool_error(f"{self.name}: {failed}")
        failure = f"{self.name}: {self.failures[0]}" if self.failures else None
        return json_result(answer, failure=failure)

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
        self._keep(RecordedCall(tool.name, kept))
        placeholders = answer.result if isinstance(answer.result, Mapping) else {}
        said: dict[str, Any] = {
            "recorded": True,
            "ran": False,
            "tool": tool.name,
            "arguments": kept,
            "result": placeholders,
            "note": (
                f"{answer.note} Recorded, not run: nothing happened on the upstream yet, and the result "
                "holds placeholders for what the real call produces, never its values. Pass placeholders "
                f"on unchanged; call {SUBMIT_TOOL} when done."
            ),
            **self._carried_over_told(),
        }
        structured = None
        reference = Reference.parse(str(next(iter(placeholders.values()), "")))
        if tool.output_schema is not None and reference is not None:
            # Nothing the call was sent is echoed as its result: a field named like an argument (a
            # file's `content`) may mean something else in the answer.
            shaped = shape(tool.output_schema, {}, reference.seq)
            structured = said["result"] = shaped.answer
            if shaped.stand_ins:
                said["stand_ins"] = (
                    f"{', '.join(shaped.stand_ins)}: the empty value the tool's output schema requires, "
                    "not a result (the real call has not run)"
                )
        return types.CallToolResult(
            content=[types.TextContent(type="text", text=json.dumps(said, ensure_ascii=False))],
            structured_content=structured,
        )

    def _keep(self, call: RecordedCall) -> None:
        """The recording on disk with `call` added; a file that cannot be written is said, and the
        plan goes on in this gate's memory."""
        self.recorded.append(call)
        if self.recording is None:
            return
        try:
            self.recording.save(self.recorded, self.name)
        except OSError as error:
            say(
                f"the recorded plan could not be kept in {self.recording.path} ({error}); "
                "it lives in this gate only"
            )

    async def pick_up(self) -> None:
        """Record again the calls an earlier gate for this upstream and queue kept and did not submit,
        and say so; a kept call of a tool the upstream no longer lists ends the pick-up there, said."""
        if self.recording is None:
            return
        try:
            kept = self.recording.load()
        except RecordingUnreadable as error:
            moved = self.recording.unreadable_path
            say(f"{error}; a new plan starts, and the file is moved to {moved} at its first recorded call")
            return
        for position, call in enumerate(kept, 1):
            tool = self.upstream.tools.get(call.tool)
            if tool is None or self.policy.passes(tool):
                say(
                    f"the recorded call {position} ({call.tool}) is not a gated tool of the upstream now; "
                    f"{position - 1} of the {len(kept)} recorded calls were picked up"
                )
                break
            await self.session.call(self._spec(tool, carried_over=True), call.arguments)
            self.recorded.append(call)
            self.carried_over.append(call.tool)
        if self.recorded:
            self.recording.save(self.recorded, self.name)
            say(
                f"picked up {len(self.recorded)} recorded call(s) of a plan not yet submitted, kept in "
                f"{self.recording.path}; {SUBMIT_TOOL} submits them"
            )

    def _carried_over_told(self) -> dict[str, str]:
        """What the model reads, once, of the calls an earlier gate recorded that this plan holds: it
        did not make them in this conversation, and they will run with its own if approved."""
        if not self.carried_over:
            return {}
        tools = ", ".join(self.carried_over)
        told = {
            "carried_over": (
                f"this plan also holds {len(self.carried_over)} call(s) recorded by an earlier session of "
                f"this gate and not submitted ({tools}), before this conversation's; they are marked so "
                "in the plan the reviewer sees, and run with the rest if it is approved"
            )
        }
        self.carried_over = []
        return told

    def _spec(self, tool: types.Tool, *, carried_over: bool = False) -> WriteTool:
        """The write tool standing for an upstream tool: recorded in the dry run, called on the upstream
        (once, by the approved run) for real. A call `carried_over` from an earlier gate says so."""
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
            caution="; ".join(
                part
                for part in (CARRIED_OVER_CAUTION if carried_over else "", self.policy.caution_of(tool))
                if part
            ),
            destructive=self.policy.destructive(tool),
            write=write,
        )


def passthrough_handlers(upstream: Upstream, capabilities: types.ServerCapabilities) -> dict[str, Any]:
    """Handlers that serve the upstream's resources (and their subscriptions), resource templates,
    prompts, completions and logging level unchanged, for the capabilities it declares (a server
    without prompts keeps answering "method not found")."""

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

    async def subscribe(ctx: Any, params: types.SubscribeRequestParams) -> types.EmptyResult:
        return await (await client()).subscribe_resource(params.uri)

    async def unsubscribe(ctx: Any, params: types.UnsubscribeRequestParams) -> types.EmptyResult:
        return await (await client()).unsubscribe_resource(params.uri)

    async def complete(ctx: Any, params: types.CompleteRequestParams) -> types.CompleteResult:
        context = params.context.arguments if params.context is not None else None
        return await (await client()).complete(params.ref, params.argument.model_dump(), context)

    async def set_logging_level(ctx: Any, params: types.SetLevelRequestParams) -> types.EmptyResult:
        return await (await client()).set_logging_level(params.level)

    handlers: dict[str, Any] = {}
    if capabilities.resources is not None:
        handlers.update(
            on_list_resources=list_resources,
            on_list_resource_templates=list_resource_templates,
            on_read_resource=read_resource,
        )
        if capabilities.resources.subscribe:
            handlers.update(on_subscribe_resource=subscribe, on_unsubscribe_resource=unsubscribe)
    if capabilities.prompts is not None:
        handlers.update(on_list_prompts=list_prompts, on_get_prompt=get_prompt)
    if capabilities.completions is not None:
        handlers.update(on_completion=complete)
    if capabilities.logging is not None:
        handlers.update(on_set_logging_level=set_logging_level)
    return handlers


async def serve(options: argparse.Namespace, token: str) -> None:
    """Start the upstream in its sandbox, then answer the host on stdin/stdout until it closes them."""
    # The upstream gets no variable of the reviewer's, nor the audit log's credential (by name or value).
    environment = sandboxed_environment(os.environ, options.audit_variables, options.audit_secrets)
    sandbox: Sandbox = options.sandbox
    name = upstream_name(options.command, options.name)
    queue = QueueClient(options.queue, token)
    try:
        async with AsyncExitStack() as serving:
            point = None
            if sandbox.private_network and sandbox.allowed_net:
                # The upstream's one way out: --allow-net's proxy, on a listener its relay hands over.
                point = await serving.enter_async_context(handover_point())
                environment.update(proxy_environment(f"http://127.0.0.1:{EGRESS_PORT}"))
            started = sandbox.command_line(
                options.command, [EGRESS_PORT] if point else [], point.path if point else None
            )
            upstream = Upstream(
                StdioServerParameters(command=started[0], args=started[1:], env=environment),
                timeout=options.upstream_timeout,
                start_timeout=options.upstream_start_timeout,
            )
            await serving.enter_async_context(running_upstream(upstream))
            if point is not None:
                await serve_egress(serving, point, sandbox, options.upstream_start_timeout)
            await serve_host(options, upstream, name, queue)
    finally:
        await queue.aclose()
        await anyio.to_thread.run_sync(options.sandbox.end_leftovers)


async def serve_egress(
    serving: AsyncExitStack, point: HandoverPoint, sandbox: Sandbox, timeout: float
) -> None:
    """`--allow-net`'s proxy, served for the gate's life on the listener the upstream's relay hands
    over (waiting as long as the upstream may take to start); said in a line when it never comes
    (the upstream then reaches nothing)."""
    proxy = EgressProxy(sandbox.allowed_net)
    service = InnerService(EGRESS_PORT, lambda listener: serving_egress(proxy, listener))
    connection = await point.taken(timeout)
    point.close()
    served = connection is not None and await serve_handed(serving, connection, [service])
    if connection is not None:
        connection.close()
    if not served:
        say("the upstream's sandbox handed over no listener for its proxy: it reaches no host")


async def serve_host(options: argparse.Namespace, upstream: Upstream, name: str, queue: QueueClient) -> None:
    """Answer the host on stdin/stdout until it closes them."""
    with anyio.move_on_after(upstream.start_timeout):
        await upstream.ready.wait()
    capabilities = None
    if upstream.client is not None and upstream.failure is None:
        capabilities = upstream.client.server_capabilities
    gate = Gate(
        api=None,
        queue=queue,
        backend="record",
        agent=f"mcp-gate:{name}"[:128],
        audit=options.audit_source,
        target=Target(
            api=f"mcp:{name}",
            base_url=options.base_url,
            environment=options.environment,
        ),
        decision_timeout=options.decision_timeout,
        patience=Patience(say=say),
        allowed_signers=options.trust.allowed_signers,
        signatures_required=options.trust.signatures_required,
        ledger=options.trust.ledger,
    )
    recording = RecordingFile.of(options.queue, gate.target.api)
    handlers = McpGate(upstream, gate, options.policy, title=options.title, recording=recording)
    if capabilities is not None:
        await handlers.pick_up()

    async def on_list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return await handlers.list_tools()

    async def on_call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        # What the upstream asks of the host while this call lasts (sampling, elicitation,
        # roots) goes to the host, in the approved run too.
        with upstream.host.serving(ctx):
            return await handlers.call_tool(
                params.name, dict(params.arguments or {}), progress_forwarder(ctx)
            )

    server: Server[Any] = Server(
        "reviewer-mcp-gate",
        on_list_tools=on_list_tools,
        on_call_tool=on_call_tool,
        **(passthrough_handlers(upstream, capabilities) if capabilities is not None else {}),
    )
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def audit_source_of(options: argparse.Namespace) -> AuditSource | None:
    """`--audit KIND:LOCATION` read by `--audit-field` and `--audit-header`; a source whose first row
    cannot be read is refused now, not found out after a plan was recorded. The variables, files and
    values its credential comes from are kept for the upstream's sandbox to withhold."""
    headers = audit_headers(options.audit_header)
    options.audit_variables = credential_variables(options.audit_header)
    options.audit_files = credential_files(options.audit_header)
    options.audit_secrets = [value.rpartition(" ")[2] for value in headers.values()]
    source = audit_option(options.audit, options.audit_field, headers, stdin_is="the MCP protocol's")
    if source is not None:
        check_readable(source)
    return source


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
        options.audit_source = audit_source_of(options)
        options.trust = trust_from_options(options)
        options.sandbox = sandbox_from_options(options, os.environ, options.audit_files, role="upstream")
    except (TrustConfigError, ValueError, AuditSourceUnreadable, SandboxRefused) as error:
        print(f"reviewer mcp-gate: {error}", file=sys.stderr)
        return 2
    print(f"reviewer mcp-gate: {options.sandbox.describe()}", file=sys.stderr, flush=True)
    if trusted := options.trust.describe():
        print(f"reviewer mcp-gate: {trusted}", file=sys.stderr, flush=True)
    anyio.run(serve, options, token)
    return 0
