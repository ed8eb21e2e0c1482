"""The idle poll's short way: a reviewer's `GET /v1/proposals` whose ETag still matches is answered
304 before FastAPI routes it.

A reviewer's app polls every couple of seconds and almost every answer is "nothing new". That answer
needs the token's one look-up, the list version's one look-up and a comparison; resolving the route's
dependencies and parameters cost more than all three. Anything else (another query, another caller,
an ETag that no longer matches, a store that fails) goes the ordinary way, which gives the full
answer or the documented error, so the two ways cannot disagree on anything but speed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from reviewer.service.deps import identity_for
from reviewer.service.routes.proposals import DEFAULT_LIMIT, etag_matches, list_etag
from reviewer.service.store import QueueStore

LIST_PATH = "/v1/proposals"


class IdlePoll:
    """ASGI middleware: the 304 of an unchanged listing, for the query-less poll the app sends."""

    def __init__(self, app: Callable[..., Awaitable[None]], store: QueueStore) -> None:
        self.app = app
        self.store = store

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if (
            scope["type"] == "http"
            and scope["method"] == "GET"
            and scope["path"] == LIST_PATH
            and not scope.get("query_string")
        ):
            etag = self.unchanged(scope)
            if etag is not None:
                headers = [(b"etag", etag.encode()), (b"cache-control", b"no-cache")]
                await send({"type": "http.response.start", "status": 304, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)

    def unchanged(self, scope: MutableMapping[str, Any]) -> str | None:
        """The listing's ETag when a reviewer's token sent it in If-None-Match; else None."""
        authorization = if_none_match = None
        for name, value in scope["headers"]:
            if name == b"authorization" and authorization is None:
                authorization = value.decode("latin-1")
            elif name == b"if-none-match" and if_none_match is None:
                if_none_match = value.decode("latin-1")
        if authorization is None or if_none_match is None:
            return None
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer":
            return None
        try:
            identity = identity_for(self.store, token.strip())
            if identity is None or identity.role != "reviewer":
                return None
            version = self.store.list_version()
        except Exception:  # the ordinary way meets the same failure and answers it as documented
            return None
        etag = list_etag(version.last_seq, version.next_deadline, None, None, DEFAULT_LIMIT)
        if not etag_matches(if_none_match, etag):
            return None
        scope.setdefault("state", {})["who"] = identity.name  # the access log names the caller
        return etag
