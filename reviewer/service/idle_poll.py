"""The idle poll's short way: a reviewer's `GET /v1/proposals` whose ETag still matches is answered
304 before FastAPI sees it.

A reviewer's app polls every couple of seconds and almost every answer is "nothing new". That answer
needs one statement (the token's row and the list's version, `QueueStore.caller_and_list_version`,
run off the event loop as every store call) and a comparison; FastAPI's middleware, routing and
dependencies cost more than both. The token is
read on every poll, never remembered, so a revoked token is refused at its very next poll, by every
replica. Anything else (another query, another caller, an ETag that no longer matches, a store that
fails) goes the ordinary way, which gives the full answer or the documented error, so the two ways
cannot disagree on anything but speed.

The same poll with `?wait=N` (and nothing else in its query) is a long poll: while the ETag still
matches, the answer waits up to N seconds (`waits.MAX_WAIT` at most) for any proposal to change,
reading the token and the version again at each change, so the app hears of a new proposal or a
decision at once and an idle app costs one request every N seconds.
"""

from __future__ import annotations

import math
from functools import partial
from urllib.parse import parse_qsl

from starlette.concurrency import run_in_threadpool
from starlette.types import ASGIApp, Receive, Scope, Send

from reviewer.service.auth import hash_token
from reviewer.service.deps import minted_reviewer_refused, usable_token
from reviewer.service.errors import Invalid
from reviewer.service.responses import error_response
from reviewer.service.routes.proposals import DEFAULT_LIMIT, etag_matches, list_etag
from reviewer.service.store import ListVersion, QueueStore
from reviewer.service.waits import ANY_PROPOSAL, MAX_WAIT, Waits

LIST_PATH = "/v1/proposals"


def wait_asked(query_string: bytes) -> float | None:
    """The seconds of a query that is `wait=N` alone (0 for none); None for any other query, which
    goes the ordinary way. `Invalid` when N is not a number of seconds, 0 or more."""
    if not query_string:
        return 0.0
    try:
        pairs = parse_qsl(query_string.decode("ascii"), strict_parsing=True)
    except ValueError:  # not ASCII, or not name=value pairs: the ordinary way answers it
        return None
    if len(pairs) != 1 or pairs[0][0] != "wait":
        return None
    try:
        seconds = float(pairs[0][1])
    except ValueError:
        seconds = math.nan
    if not (math.isfinite(seconds) and seconds >= 0):
        raise Invalid(f"$.query.wait: a number of seconds, 0 or more (at most {MAX_WAIT:g} are waited)")
    return seconds


class IdlePoll:
    """ASGI middleware: the 304 of an unchanged listing, for the query-less poll the app sends."""

    __slots__ = ("app", "provider_signs_in", "store", "waits")

    def __init__(
        self, app: ASGIApp, store: QueueStore, waits: Waits, provider_signs_in: bool = False
    ) -> None:
        self.app = app
        self.store = store
        self.waits = waits
        self.provider_signs_in = provider_signs_in
        """Reviewers sign in through a provider: a minted reviewer token goes the ordinary way (its 401)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        wait = None
        if scope["type"] == "http" and scope["method"] == "GET" and scope["path"] == LIST_PATH:
            try:
                wait = wait_asked(scope.get("query_string", b""))
            except Invalid as refused:
                await error_response(refused)(scope, receive, send)
                return
        if wait is not None:
            unchanged = await self.waits.hold(
                ANY_PROPOSAL,
                wait,
                partial(run_in_threadpool, self.unchanged, scope),
                lambda found: found is not None,
                self.seconds_to_change,
            )
            if unchanged is not None:
                etag, _ = unchanged
                headers = [(b"etag", etag.encode()), (b"cache-control", b"no-cache")]
                await send({"type": "http.response.start", "status": 304, "headers": headers})
                await send({"type": "http.response.body", "body": b""})
                return
        await self.app(scope, receive, send)

    def seconds_to_change(self, unchanged: tuple[str, ListVersion] | None) -> float:
        """Seconds until the list's next deadline passes (a proposal expires by time alone)."""
        deadline = None if unchanged is None else unchanged[1].next_deadline
        return math.inf if deadline is None else deadline - self.store.clock()

    def unchanged(self, scope: Scope) -> tuple[str, ListVersion] | None:
        """The listing's ETag and version when a reviewer's token sent that ETag in If-None-Match;
        else None."""
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
        token = token.strip()
        if not usable_token(token):
            return None
        try:
            identity, version = self.store.caller_and_list_version(hash_token(token))
        except Exception:  # the ordinary way meets the same failure and answers it as documented
            return None
        if (
            identity is None
            or identity.role != "reviewer"
            or minted_reviewer_refused(identity, self.provider_signs_in)
        ):
            return None
        etag = list_etag(version.last_seq, version.next_deadline, None, None, DEFAULT_LIMIT)
        if not etag_matches(if_none_match, etag):
            return None
        scope.setdefault("state", {})["who"] = identity.name  # the access log names the caller
        return etag, version
