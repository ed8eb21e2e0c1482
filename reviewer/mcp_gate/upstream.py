"""The upstream MCP server: started from COMMAND over stdio, held for the gate's life, its tools
listed and pinned (`tools_sha256`), and one real call at a time once a plan is approved."""

from __future__ import annotations

import base64
import hashlib
import os
import shlex
from collections.abc import AsyncIterator, Iterable, Mapping, Sequence
from contextlib import AsyncExitStack, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, Final

import anyio
import mcp_types as types
from mcp import Client, StdioServerParameters
from mcp.shared.dispatcher import ProgressFnT
from mcp.shared.exceptions import MCPError

from reviewer.mcp_gate.host_relay import HostRelay
from reviewer.plan.proposal import canonical_json

SUBMIT_TOOL: Final = "reviewer_submit_plan"
STATUS_TOOL: Final = "reviewer_plan_status"
"""The gate's own tools: an upstream that lists one of these names is refused."""
DEFAULT_UPSTREAM_TIMEOUT: Final = 30.0
UNSTRUCTURED_FIELD: Final = "content"
"""The field a placeholder names for a tool without an output schema: its text content."""
BLOCKS_FIELD: Final = "blocks"
"""Where a real call's content blocks other than text are kept in its result."""


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
    """What a real call produced, where later calls' placeholders take their values: its structured
    content, else its text; with every other block it answered beside it (`blocks`), so the run's
    status keeps a created resource's link and an image's digest, never only the text."""
    value: dict[str, Any] = (
        dict(result.structured_content)
        if result.structured_content is not None
        else {UNSTRUCTURED_FIELD: text_of(result)}
    )
    blocks = [kept for block in result.content if (kept := block_kept(block)) is not None]
    if blocks and BLOCKS_FIELD not in value:
        value[BLOCKS_FIELD] = blocks
    return value


def block_kept(block: types.ContentBlock) -> dict[str, Any] | None:
    """A content block other than text as the run keeps it: a link whole, bytes by their digest and
    size (an image, a sound or a resource's blob is no text a reviewer reads)."""
    if isinstance(block, types.TextContent):
        return None
    if isinstance(block, types.ResourceLink):
        link: dict[str, Any] = block.model_dump(
            mode="json", exclude_none=True, exclude={"icons", "meta", "annotations"}
        )
        return link
    if isinstance(block, types.ImageContent | types.AudioContent):
        return {"type": block.type, "mime_type": block.mime_type, **_digest(block.data)}
    if isinstance(block, types.EmbeddedResource):
        resource = block.resource
        kept: dict[str, Any] = {"type": "resource", "uri": str(resource.uri), "mime_type": resource.mime_type}
        if isinstance(resource, types.TextResourceContents):
            return {**kept, "text": resource.text}
        return {**kept, **_digest(getattr(resource, "blob", ""))}
    return {"type": str(getattr(block, "type", "unknown"))}


def _digest(base64_data: str) -> dict[str, Any]:
    try:
        raw = base64.b64decode(base64_data, validate=True)
    except (ValueError, TypeError):
        raw = base64_data.encode("utf-8", "replace")
    return {"sha256": hashlib.sha256(raw).hexdigest(), "bytes": len(raw)}


@dataclass
class Upstream:
    """The upstream server: started once, held for the gate's life, its tools listed once."""

    parameters: StdioServerParameters
    timeout: float
    """Seconds one tool call may wait for its answer."""
    start_timeout: float
    """Seconds the upstream may take to start and list its tools, and to answer any other request."""
    host: HostRelay = field(default_factory=HostRelay)
    """Where the upstream's sampling, elicitation and roots requests go: the host's request under way."""
    client: Client | None = None
    tools: dict[str, types.Tool] = field(default_factory=dict)
    failure: str | None = None
    ready: anyio.Event = field(default_factory=anyio.Event)
    closing: anyio.Event = field(default_factory=anyio.Event)

    async def hold(self) -> None:
        """Connect, list the tools, then keep the connection open until the gate closes."""
        try:
            async with AsyncExitStack() as stack:
                # The initialize handshake every server speaks, in which the logging level and
                # resource subscriptions the gate passes through still exist (a later protocol
                # version dropped them, and a host on the handshake would find them gone).
                client = await stack.enter_async_context(
                    Client(
                        self.parameters,
                        read_timeout_seconds=self.start_timeout,
                        cache=None,
                        mode="legacy",
                        sampling_callback=self.host.sampling,
                        elicitation_callback=self.host.elicitation,
                        list_roots_callback=self.host.roots,
                    )
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
                self.no_answer()
                if not self.ready.is_set() and _timed_out(error)
                else f"the upstream server could not be started or stopped answering: {_describe(error)}"
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

    def no_answer(self) -> str:
        return f"the upstream server did not answer within {self.start_timeout:g} s of starting"

    async def connected(self) -> Client:
        """The live client, or `UpstreamFailed` saying why there is none (waiting at most
        `start_timeout`)."""
        with anyio.move_on_after(self.start_timeout):
            await self.ready.wait()
        if not self.ready.is_set():
            raise UpstreamFailed(self.no_answer())
        if self.client is None or self.failure is not None:
            raise UpstreamFailed(self.failure or "the upstream server is not connected")
        return self.client

    async def call(
        self, name: str, arguments: dict[str, Any], progress: ProgressFnT | None = None
    ) -> types.CallToolResult:
        """One call on the upstream. An error it answers is raised as `MCPError`; a call sent and not
        answered (a timeout, a connection lost) is `UpstreamNoAnswer`; an answer that breaks the tool's
        own output schema is `UpstreamFailed`."""
        client = await self.connected()
        try:
            return await client.call_tool(
                name, arguments, read_timeout_seconds=self.timeout, progress_callback=progress
            )
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


def _timed_out(error: BaseException) -> bool:
    """Whether `error` (or one in its group) is a request the upstream did not answer in time: its
    start-up, told as the gate's own wait for it is, whichever of the two bounds ends first."""
    if isinstance(error, BaseExceptionGroup):
        return any(_timed_out(inner) for inner in error.exceptions)
    return isinstance(error, MCPError) and error.error.code == types.REQUEST_TIMEOUT


def _describe(error: BaseException) -> str:
    if isinstance(error, BaseExceptionGroup):
        return "; ".join(_describe(inner) for inner in error.exceptions)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


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
