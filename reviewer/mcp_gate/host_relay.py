"""What the upstream asks of the host, relayed through the gate: sampling (the host's model),
elicitation (the host's user) and roots (the host's folders), and the progress of the calls that pass
through. The gate stands between them, so it speaks for each to the other: to the upstream it offers
what a host may offer, and a request the host does not take is answered with an error that says so,
never with anything the gate made up.

The upstream starts before the host connects (the gate's own capabilities are the upstream's), so the
gate cannot mirror the host's declaration at the upstream's handshake: it offers all three, and checks
the host's declaration when a request comes.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import mcp_types as types
from mcp.server.session import ServerSession
from mcp.shared.exceptions import MCPError
from mcp.shared.message import ServerMessageMetadata
from pydantic import BaseModel

HOST_WORDS: Final = "the host behind reviewer mcp-gate"
Result = TypeVar("Result", bound=BaseModel)


@dataclass
class HostRelay:
    """The host's request being answered, where the upstream's requests go while it lasts (a request
    the upstream makes between the host's requests has no host to ask)."""

    session: ServerSession | None = None
    request_id: types.RequestId | None = None

    @contextlib.contextmanager
    def serving(self, context: Any) -> Iterator[None]:
        """While the gate answers the host's request in `context`, the upstream's requests go to it."""
        self.session, self.request_id = context.session, context.request_id
        try:
            yield
        finally:
            self.session = self.request_id = None

    async def sampling(
        self, context: Any, params: types.CreateMessageRequestParams
    ) -> types.CreateMessageResult | types.CreateMessageResultWithTools | types.ErrorData:
        sampling = types.ClientCapabilities(sampling=types.SamplingCapability())
        request = types.CreateMessageRequest(params=params)
        if params.tools or params.tool_choice:
            return await self._ask(sampling, "sampling", request, types.CreateMessageResultWithTools)
        return await self._ask(sampling, "sampling", request, types.CreateMessageResult)

    async def elicitation(
        self, context: Any, params: types.ElicitRequestParams
    ) -> types.ElicitResult | types.ErrorData:
        return await self._ask(
            types.ClientCapabilities(elicitation=types.ElicitationCapability()),
            "elicitation",
            types.ElicitRequest(params=params),
            types.ElicitResult,
        )

    async def roots(self, context: Any) -> types.ListRootsResult | types.ErrorData:
        return await self._ask(
            types.ClientCapabilities(roots=types.RootsCapability()),
            "roots",
            types.ListRootsRequest(),
            types.ListRootsResult,
        )

    async def _ask(
        self, capability: types.ClientCapabilities, name: str, request: Any, result_type: type[Result]
    ) -> Result | types.ErrorData:
        session = self.session
        if session is None or not session.check_client_capability(capability):
            return types.ErrorData(code=types.INVALID_REQUEST, message=f"{HOST_WORDS} offers no {name}")
        metadata = (
            ServerMessageMetadata(related_request_id=self.request_id) if self.request_id is not None else None
        )
        try:
            return await session.send_request(request, result_type, metadata=metadata)
        except MCPError as error:
            return error.error
        except Exception as error:  # a host gone mid-request: the upstream is told, the gate goes on
            return types.ErrorData(
                code=types.INTERNAL_ERROR, message=f"{HOST_WORDS} could not be asked: {error}"
            )


def progress_forwarder(context: Any) -> Any:
    """The progress callback that hands a passed-through call's progress to the host under the token
    the host gave it, or None where the host asked for none."""
    meta = context.meta or {}
    token = meta.get("progress_token", meta.get("progressToken")) if isinstance(meta, dict) else None
    if not isinstance(token, str | int):
        return None
    session: ServerSession = context.session
    related = str(context.request_id) if context.request_id is not None else None

    async def forward(progress: float, total: float | None, message: str | None) -> None:
        await session.send_progress_notification(token, progress, total, message, related_request_id=related)

    return forward
