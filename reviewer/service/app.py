"""The queue service as a FastAPI app built by `create_app`.

The routes live on `APIRouter`s in `reviewer.service.routes`, one module per thing served, and take
the caller and the store as dependencies (`reviewer.service.deps`); bodies are read and parsed by
`reviewer.service.bodies`, so every refusal is a JSON `ErrorBody` naming the problem. This module
wires them together: the store, the access log and the idle poll's short way in front of FastAPI
(`QueueApp`), the requests that wait for a change (`reviewer.service.waits`), the error handlers,
and an OpenAPI document that says what the service does (required headers, the proposal's limits,
the bodies the routes read themselves). Every store call (the token included) runs in the thread
pool, never on the event loop: a database that hangs holds up the requests that wait on it, and
`/healthz` still answers. A database outage is answered `503` with `Retry-After`
(`reviewer.service.store.outages`).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import msgspec
from fastapi import FastAPI, Request, Response
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Receive, Scope, Send

from reviewer.plan.proposal import MAX_BODY_BYTES, MAX_CALLS, MAX_DEPTH, MAX_STRING_CHARS, Proposal
from reviewer.queue.messages import ClaimRequest, DecisionRequest, ErrorBody, ExecutionReport, RefusalReport
from reviewer.service.auth import redact_tokens
from reviewer.service.bodies import validation_message
from reviewer.service.deps import required_idempotency_key
from reviewer.service.errors import Invalid, ServiceError
from reviewer.service.idle_poll import IdlePoll
from reviewer.service.metrics import Metrics
from reviewer.service.notifications.delivery import Deliverer
from reviewer.service.notifications.sender import Sender
from reviewer.service.notifications.targets import notifying
from reviewer.service.request_log import RequestLog
from reviewer.service.responses import error_json, error_response
from reviewer.service.routes import decisions, health, identity, metrics, proposals, runs, trail, version
from reviewer.service.signed_memory import SignedMemory
from reviewer.service.store import (
    DEFAULT_APPROVAL_TTL,
    DEFAULT_CLAIM_LEASE,
    DEFAULT_PENDING_TTL,
    Clock,
    QueueStore,
)
from reviewer.service.store.clock import TimeKeeper
from reviewer.service.store.opener import open_store
from reviewer.service.waits import Waits

ROUTERS: Final = (
    identity.router,
    proposals.router,
    decisions.router,
    runs.router,
    health.router,
    metrics.router,
    trail.router,
    version.router,
)

if TYPE_CHECKING:  # WebAuthn loads only with the pages, PyJWT with a provider, cryptography with keys
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from reviewer.service.oidc import IdentityTokens
    from reviewer.service.web.relying_party import RelyingParty

ENROLMENTS_PER_MINUTE: Final = 20
"""Enrolment requests (links, options, registrations) a minute from one address or one token."""
DECISIONS_PER_MINUTE: Final = 60
"""A page's statement and decision requests a minute from one address (two a decision; reviewers
behind one office address share it)."""

LIMITS: Final = (
    f"Limits: a body up to {MAX_BODY_BYTES:,} bytes (413 beyond), strings up to {MAX_STRING_CHARS:,} "
    f"characters, nesting up to {MAX_DEPTH} levels, up to {MAX_CALLS:,} calls, numbers within +-2^53 "
    "(larger ones, and literals that would be rounded or read as 0, are refused), "
    "`seq` unique and increasing, placeholders naming earlier calls."
)


def create_app(
    db: Path | str | None,
    *,
    clock: Clock = time.time,
    pending_ttl: float = DEFAULT_PENDING_TTL,
    approval_ttl: float = DEFAULT_APPROVAL_TTL,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
    store: QueueStore | None = None,
    senders: Sequence[Sender] = (),
    remind_after: float | None = None,
    api_docs: bool = False,
    keep_deliveries: float | None = None,
    identity_tokens: IdentityTokens | None = None,
    trail_key: Ed25519PrivateKey | None = None,
    signed_memory: SignedMemory | None = None,
    web_origin: RelyingParty | None = None,
    every_access_line: bool = False,
) -> FastAPI:
    """The service on the database `db` names (or on `store`), with an injectable clock and TTLs.

    With `senders` (from `--notify`), the store writes each event to its outbox and a `Deliverer`
    sends them from threads that start and stop with the app (a `store` given is opened with what it
    writes for them, `notifying`; `remind_after` and `keep_deliveries` are for a store opened here).
    `api_docs` (`serve --api-docs`) serves the Swagger UI at `/docs` and ReDoc at `/redoc`; off by
    default, since both pages load their scripts from a CDN. `/openapi.json` is always served: it
    describes the API, holds no data.
    With `identity_tokens` (`serve --oidc-issuer`), reviewers sign in through that OpenID provider.
    `trail_key` (`serve --trail-key`) signs the trail's checkpoints; without it the queue keeps its
    log and signs none. `signed_memory` remembers the largest log it signed, outside the database.
    With `web_origin` (`serve --web-origin`), the review pages, passkey enrolment and their API
    routes are served (`reviewer.service.web`); without it, none of them.
    `every_access_line` (`serve --access-log all`) logs polls answered 304 too, one line each.
    """
    queue: QueueStore = store or open_store(
        db,
        clock=clock,
        pending_ttl=pending_ttl,
        approval_ttl=approval_ttl,
        claim_lease=claim_lease,
        notifying=notifying(senders, remind_after=remind_after, keep_deliveries=keep_deliveries)
        if senders
        else None,
        create=True,
    )
    queue.health.serving = True
    deliverer = Deliverer(queue, senders, clock=clock) if senders else None
    time_keeper = TimeKeeper(queue.keep_time)
    waits = Waits()
    queue.on_change = waits.changed

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        if deliverer is not None:
            deliverer.start()
        time_keeper.start()
        waits.loop = asyncio.get_running_loop()
        stop_hearing = queue.hear_other_writers()
        yield
        waits.release()
        if stop_hearing is not None:
            stop_hearing()
        time_keeper.stop()
        if deliverer is not None:
            deliverer.stop()
        if queue.policy_evaluator is not None:
            queue.policy_evaluator.close()  # its processes end with the queue, not after it
        queue.close()

    app = QueueApp(
        queue,
        waits,
        provider_signs_in=identity_tokens is not None,
        every_access_line=every_access_line,
        title="reviewer queue",
        version="1",
        description=(
            "Proposals from AI agents wait here for a reviewer's decision; an approved plan is claimed "
            "by one run, which reports what it did."
        ),
        lifespan=lifespan,
        docs_url="/docs" if api_docs else None,
        redoc_url="/redoc" if api_docs else None,
    )
    app.state.store = queue
    app.state.waits = waits
    app.state.identity_tokens = identity_tokens
    app.state.trail_key = trail_key
    app.state.signed_memory = signed_memory
    for router in ROUTERS:
        app.include_router(router)
    if web_origin is not None:
        from reviewer.service.routes import passkeys
        from reviewer.service.web import pages
        from reviewer.service.web.limits import RateLimit

        queue.web_origin = web_origin.origin
        app.state.web = pages.WebPages(
            web_origin,
            enrolment_limit=RateLimit(ENROLMENTS_PER_MINUTE, clock),
            decision_limit=RateLimit(DECISIONS_PER_MINUTE, clock),
        )
        app.include_router(passkeys.router)
        app.include_router(pages.router)

    @app.exception_handler(ServiceError)
    async def on_service_error(request: Request, error: ServiceError) -> Response:
        return error_response(error)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, error: RequestValidationError) -> Response:
        """FastAPI's 422 as our ErrorBody; a missing or malformed Idempotency-Key is the documented 400."""
        problems = list(error.errors())
        if any(tuple(problem["loc"]) == ("header", "idempotency-key") for problem in problems):
            what = "a claim" if request.url.path.endswith("/claims") else "a decision"
            try:
                required_idempotency_key(request.headers.get("idempotency-key"), what)
            except ServiceError as refused:
                return error_response(refused)
        return error_response(Invalid(validation_message(problems)))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, error: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        body = ErrorBody(error=code, message=str(error.detail))
        headers = dict(error.headers or {})
        if error.status_code == 405:
            headers["Allow"] = ", ".join(allowed_methods(request.url.path))
        return error_json(body, error.status_code, headers)

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, error: Exception) -> Response:
        logging.getLogger("reviewer.service").exception(
            "unexpected error on %s", redact_tokens(request.url.path)
        )
        body = ErrorBody(
            error="internal",
            message=(
                "the service failed on this request; try again (a retry with the same "
                "Idempotency-Key is stored once)"
            ),
        )
        return error_json(body, 500)

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            app.openapi_schema = openapi_document(app)
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app


class QueueApp(FastAPI):
    """FastAPI behind the access log and the idle poll's short way: an unchanged poll meets neither
    FastAPI's own middleware (errors, telemetry, body limit) nor its router, and is logged like
    every other request."""

    def __init__(
        self,
        store: QueueStore,
        waits: Waits,
        provider_signs_in: bool = False,
        every_access_line: bool = False,
        **settings: Any,
    ) -> None:
        super().__init__(**settings)
        # The routers' own routes: the app's list holds each included router as one entry.
        routes = [route for router in ROUTERS for route in router.routes]
        self.state.metrics = Metrics(store, routes, waits)
        idle_poll = IdlePoll(self.routed, store, waits, provider_signs_in)
        self.front = RequestLog(
            idle_poll, on_response=self.state.metrics.count_request, every_line=every_access_line
        )

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self.front(scope, receive, send)

    async def routed(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The ordinary way: FastAPI's middleware, router and dependencies."""
        await super().__call__(scope, receive, send)


def allowed_methods(path: str) -> list[str]:
    """Every method some route serves at `path`: a 405's `Allow` names them all, not one route's."""
    methods: set[str] = set()
    for route in (route for router in ROUTERS for route in router.routes):
        if isinstance(route, APIRoute) and route.methods and route.path_regex.match(path):
            methods |= route.methods
    return sorted(methods)


def openapi_document(app: FastAPI) -> dict[str, Any]:
    """FastAPI's document plus the schemas of the bodies the routes read themselves, with the
    proposal's limits where a client (or schemathesis) reads them."""
    document = get_openapi(
        title=app.title, version=app.version, description=app.description, routes=app.routes
    )
    schemas = document.setdefault("components", {}).setdefault("schemas", {})
    _, proposal_schemas = msgspec.json.schema_components(
        [Proposal], ref_template="#/components/schemas/{name}"
    )
    schemas.update(proposal_schemas)
    proposal_schema = schemas["Proposal"]
    proposal_schema["description"] = LIMITS
    calls = proposal_schema.get("properties", {}).get("calls")
    if isinstance(calls, dict):
        calls["maxItems"] = MAX_CALLS
        calls["minItems"] = 1
    for model in (DecisionRequest, ClaimRequest, ExecutionReport, RefusalReport):
        schemas[model.__name__] = model.model_json_schema(ref_template="#/components/schemas/{model}")
    schemas["ExecutionReport"]["description"] = LIMITS.replace("calls,", "calls in the plan,", 1)
    return document
