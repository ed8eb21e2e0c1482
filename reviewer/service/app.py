"""The queue service's HTTP routes (DESIGN section 5) as a FastAPI app built by `create_app`.

Bodies are read by the routes themselves, with the size limit applied while reading, and
validated by `parse_proposal` (proposals) or the pydantic models of `reviewer.api` (decisions and
executions), so every refusal is a JSON `ErrorBody` naming the problem. Their schemas are still
published in `/openapi.json`. Quick reads (the token, the list's version, a decision state) run on
the event loop; writes, which wait for fsync, and large reads run in the thread pool.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, MutableMapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Annotated, Any, Final, TypeVar

import msgspec
from fastapi import Depends, FastAPI, Header, Query, Request, Response
from fastapi import Path as PathParam
from fastapi.exceptions import RequestValidationError
from fastapi.openapi.utils import get_openapi
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from pydantic import BaseModel, ValidationError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from reviewer.api import (
    Claim,
    ClaimRequest,
    DecisionRequest,
    DecisionState,
    ErrorBody,
    ExecutionHistory,
    ExecutionReport,
    ProposalPage,
    ProposalRecord,
    State,
    SubmissionAnswer,
    Whoami,
)
from reviewer.policy import Policy
from reviewer.proposal import (
    MAX_BODY_BYTES,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    PROPOSAL_ID_PATTERN,
    Proposal,
    ProposalError,
    locate_limit_violation,
    parse_proposal,
    plan_sha256,
    value_within_limits,
)
from reviewer.service.auth import Identity, Role, hash_token, redact_tokens
from reviewer.service.errors import (
    BadRequest,
    Forbidden,
    Invalid,
    InvalidJSON,
    ServiceError,
    TooLarge,
    Unauthorized,
)
from reviewer.service.store import DEFAULT_CLAIM_LEASE, Clock, QueueStore, SQLiteStore, Submission

DEFAULT_PENDING_TTL: Final = 24 * 3600.0
"""A proposal nobody decided within a day is stale: the agent re-plans against today's state."""
DEFAULT_APPROVAL_TTL: Final = 3600.0
"""An approval is for running now, not next week: an hour to start the real run."""
MAX_PAGE: Final = 200
MAX_IDEMPOTENCY_KEY: Final = 255

access_log = logging.getLogger("reviewer.service.access")
Model = TypeVar("Model", bound=BaseModel)
ProposalId = Annotated[str, PathParam(pattern=PROPOSAL_ID_PATTERN)]

_bearer = HTTPBearer(auto_error=False, description="A token minted by `reviewer token create`.")


def _errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented refusals of a route; 401 and 422 (our ErrorBody, not FastAPI's) are on every one."""
    return {status: {"model": ErrorBody} for status in sorted({401, 422, *statuses})}


def _json_body(schema_ref: str | dict[str, Any]) -> dict[str, Any]:
    schema = {"$ref": f"#/components/schemas/{schema_ref}"} if isinstance(schema_ref, str) else schema_ref
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytes:
    """The request body, refused with 413 as soon as it passes `limit` (before it is all in memory)."""
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the body is {int(declared):,} bytes; at most {limit:,} are accepted")
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise TooLarge(f"the body is over {limit:,} bytes; at most {limit:,} are accepted")
        chunks.append(chunk)
    return b"".join(chunks)


def parse_message(raw: bytes, model: type[Model]) -> Model:
    """A JSON body as an API message, with the proposal format's limits on depth, strings and integers."""
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        raise InvalidJSON(f"the body is not valid JSON ({error})") from None
    except RecursionError:
        raise Invalid(f"the body nests deeper than {MAX_DEPTH} levels") from None
    if not value_within_limits(value, 1):
        raise Invalid(locate_limit_violation(value))
    try:
        return model.model_validate(value, strict=True)
    except ValidationError as error:
        raise Invalid(_validation_message(error.errors())) from None


def _validation_message(errors: Any) -> str:
    """pydantic's errors as `$.field: problem; ...`, the form `parse_proposal` uses too."""
    parts = []
    for error in list(errors)[:5]:
        location = "$" + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
        )
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)


def _submission(raw: bytes) -> Submission:
    """Validate a proposal and compute its digest, the same function the terminal app uses."""
    try:
        proposal = parse_proposal(raw, "proposal")
    except ProposalError as error:
        try:
            msgspec.json.decode(raw)
        except msgspec.DecodeError as syntax:
            raise InvalidJSON(f"the body is not valid JSON ({syntax})") from None
        except RecursionError:
            pass
        raise Invalid(str(error)) from None
    if proposal.proposal_id in (".", ".."):
        raise Invalid("proposal: $.proposal_id: '.' and '..' cannot be used as a URL path segment")
    return Submission(
        proposal_id=proposal.proposal_id,
        revision=proposal.revision,
        plan_sha256=plan_sha256(proposal),
        title=proposal.title,
        agent_name=proposal.agent.name,
        call_count=len(proposal.calls),
        body=raw,
    )


async def authenticate(
    request: Request, credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]
) -> Identity:
    """The caller's identity from its bearer token alone; runs on the loop (one indexed lookup)."""
    if credentials is None or not credentials.credentials or len(credentials.credentials) > 512:
        raise Unauthorized("send the token as `Authorization: Bearer <token>`")
    store: QueueStore = request.app.state.store
    identity = store.resolve_token(hash_token(credentials.credentials))
    if identity is None:
        raise Unauthorized("this token is unknown or revoked; ask the queue's operator for one")
    request.state.who = identity.name
    return identity


Caller = Annotated[Identity, Depends(authenticate)]


def _require_role(identity: Identity, role: Role, action: str) -> None:
    if identity.role != role:
        raise Forbidden(
            f"only a {role} token may {action}; this token ({identity.name}) is a {identity.role}"
        )


def _idempotency_key(value: str | None, what: str = "a decision") -> str:
    """The Idempotency-Key a decision or a claim must carry."""
    if value is None or not value.strip():
        raise BadRequest(f"{what} needs an Idempotency-Key header (e.g. a UUID), reused only for retries")
    return _checked_idempotency_key(value)


def _optional_idempotency_key(value: str | None) -> str | None:
    """An execution report's Idempotency-Key: without one, a retry of a stored report is a 409."""
    return None if value is None else _checked_idempotency_key(value)


def _checked_idempotency_key(value: str) -> str:
    if (
        not value.strip()
        or len(value) > MAX_IDEMPOTENCY_KEY
        or not value.isascii()
        or not value.isprintable()
    ):
        raise BadRequest(
            f"the Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters, "
            "not only spaces"
        )
    return value


def _list_etag(last_seq: int, next_deadline: float | None, *query: object) -> str:
    material = f"{last_seq}|{next_deadline!r}|" + "|".join(repr(part) for part in query)
    return '"' + hashlib.sha256(material.encode()).hexdigest()[:32] + '"'


def _etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = {candidate.strip().removeprefix("W/") for candidate in if_none_match.split(",")}
    return etag in candidates or "*" in candidates


def _cursor(value: str | None) -> int | None:
    if value is None:
        return None
    if not value.isdigit() or len(value) > 16:
        raise BadRequest("the cursor is not one this service gave out; start again without it")
    return int(value)


def _json(model: BaseModel, status_code: int = 200, headers: dict[str, str] | None = None) -> Response:
    return Response(
        model.model_dump_json(exclude_none=True), status_code, headers, media_type="application/json"
    )


def _error_json(body: ErrorBody, status_code: int, headers: dict[str, str] | None = None) -> Response:
    """Every error body the service writes: messages quote what the caller sent, so tokens are redacted."""
    return Response(
        redact_tokens(body.model_dump_json(exclude_none=True)),
        status_code,
        headers,
        media_type="application/json",
    )


def _error_response(error: ServiceError) -> Response:
    body = ErrorBody(error=error.code, message=error.message, **error.details)
    headers = {"WWW-Authenticate": "Bearer"} if error.status == 401 else None
    return _error_json(body, error.status, headers)


class RequestLog:
    """ASGI middleware: one log line per request, with the caller's name but never its token.

    Only the path is logged (not the query string), with token-shaped strings redacted, and the
    caller's name comes from the authenticated identity, so a token pasted into a URL by mistake
    never reaches the log either.
    """

    def __init__(self, app: Callable[..., Awaitable[None]]) -> None:
        self.app = app

    async def __call__(
        self,
        scope: MutableMapping[str, Any],
        receive: Callable[[], Awaitable[Any]],
        send: Callable[[Any], Awaitable[None]],
    ) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = 500

        async def send_and_note(message: MutableMapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        try:
            await self.app(scope, receive, send_and_note)
        finally:
            who = scope.get("state", {}).get("who", "-")
            access_log.info(
                "%s %s %d %s %.1fms",
                scope["method"],
                redact_tokens(scope["path"])[:200],
                status,
                who,
                (time.perf_counter() - started) * 1000,
            )


def create_app(
    db_path: Path | str,
    *,
    clock: Clock = time.time,
    pending_ttl: float = DEFAULT_PENDING_TTL,
    approval_ttl: float = DEFAULT_APPROVAL_TTL,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
    store: QueueStore | None = None,
    policy: Policy | None = None,
) -> FastAPI:
    """The service on the SQLite file `db_path` (or on `store`), with an injectable clock and TTLs,
    deciding under `policy` (one approval, unsigned, by any reviewer when None)."""
    queue: QueueStore = store or SQLiteStore(
        db_path,
        clock=clock,
        pending_ttl=pending_ttl,
        approval_ttl=approval_ttl,
        claim_lease=claim_lease,
        policy=policy,
    )

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        yield
        queue.close()

    app = FastAPI(
        title="reviewer queue",
        version="1",
        description="Proposals from AI agents wait here for a reviewer's decision (DESIGN section 5).",
        lifespan=lifespan,
    )
    app.state.store = queue
    app.add_middleware(RequestLog)

    @app.exception_handler(ServiceError)
    async def on_service_error(request: Request, error: ServiceError) -> Response:
        return _error_response(error)

    @app.exception_handler(RequestValidationError)
    async def on_validation_error(request: Request, error: RequestValidationError) -> Response:
        return _error_response(Invalid(_validation_message(error.errors())))

    @app.exception_handler(StarletteHTTPException)
    async def on_http_error(request: Request, error: StarletteHTTPException) -> Response:
        code = {404: "not_found", 405: "method_not_allowed"}.get(error.status_code, "http_error")
        body = ErrorBody(error=code, message=str(error.detail))
        return _error_json(body, error.status_code, dict(error.headers or {}))

    @app.exception_handler(Exception)
    async def on_unexpected(request: Request, error: Exception) -> Response:
        logging.getLogger("reviewer.service").exception(
            "unexpected error on %s", redact_tokens(request.url.path)
        )
        body = ErrorBody(error="internal", message="the service failed; nothing was changed, try again")
        return _error_json(body, 500)

    @app.get("/v1/whoami", response_model=Whoami, responses=_errors())
    async def whoami(identity: Caller) -> Response:
        return _json(Whoami(name=identity.name, role=identity.role))

    @app.post(
        "/v1/proposals",
        status_code=201,
        response_model=SubmissionAnswer,
        responses={200: {"model": SubmissionAnswer}, **_errors(400, 403, 409, 413)},
        openapi_extra=_json_body("Proposal"),
    )
    async def submit(request: Request, identity: Caller) -> Response:
        """Submit a revision: 201 when stored, 200 when this plan is already stored under that number."""
        _require_role(identity, "agent", "submit proposals")
        submission = await run_in_threadpool(_submission, await read_body(request))
        created, answer = await run_in_threadpool(queue.submit, identity, submission)
        return _json(answer, 201 if created else 200)

    @app.get(
        "/v1/proposals",
        response_model=ProposalPage,
        responses={304: {"description": "Nothing changed since the ETag given"}, **_errors(400, 403)},
    )
    async def list_proposals(
        identity: Caller,
        state: State | None = None,
        cursor: str | None = None,
        limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = 50,
        if_none_match: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Summaries, newest submission first; send the last ETag in If-None-Match to get a bodiless 304."""
        _require_role(identity, "reviewer", "list proposals")
        before_seq = _cursor(cursor)
        version = queue.list_version()
        etag = _list_etag(version.last_seq, version.next_deadline, state, cursor, limit)
        headers = {"ETag": etag, "Cache-Control": "no-cache"}
        if _etag_matches(if_none_match, etag):
            return Response(status_code=304, headers=headers)
        page = await run_in_threadpool(queue.list_proposals, state, before_seq, limit)
        return _json(page, headers=headers)

    @app.get("/v1/proposals/{proposal_id}", response_model=ProposalRecord, responses=_errors(404))
    async def get_proposal(identity: Caller, proposal_id: ProposalId) -> Response:
        """The latest revision's state, every revision, and the trail of submissions and decisions."""
        return _json(await run_in_threadpool(queue.get_record, identity, proposal_id))

    @app.get(
        "/v1/proposals/{proposal_id}/revisions/{revision}",
        responses={
            200: {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Proposal"}}}},
            **_errors(404),
        },
    )
    async def get_revision(
        identity: Caller,
        proposal_id: ProposalId,
        revision: Annotated[int, PathParam(ge=1, le=MAX_SAFE_INTEGER)],
    ) -> Response:
        """One revision, whole, exactly as the agent submitted it."""
        body = await run_in_threadpool(queue.get_revision_body, identity, proposal_id, revision)
        return Response(body, media_type="application/json")

    @app.post(
        "/v1/proposals/{proposal_id}/decisions",
        status_code=201,
        response_model=DecisionState,
        responses=_errors(400, 403, 404, 409, 412, 413),
        openapi_extra=_json_body("DecisionRequest"),
    )
    async def decide(
        request: Request,
        identity: Caller,
        proposal_id: ProposalId,
        idempotency_key: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Approve or reject the latest revision, naming its number and digest (412 if either is stale)."""
        _require_role(identity, "reviewer", "decide")
        key = _idempotency_key(idempotency_key)
        decision = await run_in_threadpool(parse_message, await read_body(request), DecisionRequest)
        replayed, answer = await run_in_threadpool(queue.decide, identity, proposal_id, decision, key)
        return _json(answer, 201, {"Idempotent-Replayed": "true"} if replayed else None)

    @app.get("/v1/proposals/{proposal_id}/decision", response_model=DecisionState, responses=_errors(404))
    async def decision_state(identity: Caller, proposal_id: ProposalId) -> Response:
        """The latest revision's state: what an agent polls before it may run anything."""
        return _json(queue.decision_state(identity, proposal_id))

    @app.post(
        "/v1/proposals/{proposal_id}/claims",
        status_code=201,
        response_model=Claim,
        responses=_errors(400, 403, 404, 409, 412, 413),
        openapi_extra=_json_body("ClaimRequest"),
    )
    async def claim(
        request: Request,
        identity: Caller,
        proposal_id: ProposalId,
        idempotency_key: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Claim the approval before the first real write: one run per approval, fixed against expiry
        and re-plans until its report; another claim of it is a 409 naming the holder."""
        _require_role(identity, "agent", "claim approvals")
        key = _idempotency_key(idempotency_key, "a claim")
        claim_request = await run_in_threadpool(parse_message, await read_body(request), ClaimRequest)
        replayed, answer = await run_in_threadpool(queue.claim, identity, proposal_id, claim_request, key)
        return _json(answer, 201, {"Idempotent-Replayed": "true"} if replayed else None)

    @app.post(
        "/v1/proposals/{proposal_id}/executions",
        status_code=201,
        response_model=DecisionState,
        responses=_errors(400, 403, 404, 409, 412, 413),
        openapi_extra=_json_body("ExecutionReport"),
    )
    async def report_execution(
        request: Request,
        identity: Caller,
        proposal_id: ProposalId,
        idempotency_key: Annotated[str | None, Header()] = None,
    ) -> Response:
        """Report the real run under its claim (409 without one); stored whatever happened since the claim.

        With an Idempotency-Key, a retry of a report that was stored answers the first answer again.
        """
        _require_role(identity, "agent", "report executions")
        key = _optional_idempotency_key(idempotency_key)
        raw = await read_body(request)
        report = await run_in_threadpool(parse_message, raw, ExecutionReport)
        replayed, answer = await run_in_threadpool(
            queue.record_execution, identity, proposal_id, report, raw, key
        )
        return _json(answer, 201, {"Idempotent-Replayed": "true"} if replayed else None)

    @app.get(
        "/v1/proposals/{proposal_id}/executions", response_model=ExecutionHistory, responses=_errors(404)
    )
    async def list_executions(identity: Caller, proposal_id: ProposalId) -> Response:
        """The execution reports stored for the proposal, oldest first, to verify a run against its plan."""
        return _json(await run_in_threadpool(queue.list_executions, identity, proposal_id))

    def openapi() -> dict[str, Any]:
        """FastAPI's document plus the schemas of the bodies the routes read themselves."""
        if app.openapi_schema is None:
            document = get_openapi(
                title=app.title, version=app.version, description=app.description, routes=app.routes
            )
            schemas = document.setdefault("components", {}).setdefault("schemas", {})
            _, proposal_schemas = msgspec.json.schema_components(
                [Proposal], ref_template="#/components/schemas/{name}"
            )
            schemas.update(proposal_schemas)
            for model in (DecisionRequest, ClaimRequest, ExecutionReport):
                schemas[model.__name__] = model.model_json_schema(ref_template="#/components/schemas/{model}")
            app.openapi_schema = document
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]
    return app
