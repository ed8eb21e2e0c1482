"""What the routes that write under a proposal share: the decorator of a 201 JSON write that can be
refused as stale or conflicting, the required Idempotency-Key header, the answer a replay gives, and
the steps of a write that must carry a key (role, key, body, store)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any, TypeVar

from fastapi import APIRouter, Header, Request, Response
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from reviewer.service.auth import Identity, Role
from reviewer.service.bodies import parse_message, read_body
from reviewer.service.deps import IDEMPOTENCY_KEY_PATTERN, require_role, required_idempotency_key
from reviewer.service.responses import errors, json_body, json_response

IDEMPOTENCY_KEY_DOC = (
    "Required: reused only to retry this very request, which then answers as the first time."
)
RequiredIdempotencyKey = Annotated[
    str, Header(description=IDEMPOTENCY_KEY_DOC, pattern=IDEMPOTENCY_KEY_PATTERN)
]

Route = TypeVar("Route", bound=Callable[..., Any])
Message = TypeVar("Message", bound=BaseModel)


def proposal_write(
    router: APIRouter, what: str, answer: type[BaseModel], body_schema: str
) -> Callable[[Route], Route]:
    """`POST /v1/proposals/{proposal_id}/<what>`: 201 with `answer`, reading a JSON `body_schema`."""
    return router.post(
        f"/v1/proposals/{{proposal_id}}/{what}",
        status_code=201,
        response_model=answer,
        responses=errors(400, 403, 404, 409, 412, 413, 415),
        openapi_extra=json_body(body_schema),
    )


def created(answer: BaseModel, replayed: bool) -> Response:
    """A write's 201; a retry under the same Idempotency-Key says it answers the first answer again."""
    return json_response(answer, 201, {"Idempotent-Replayed": "true"} if replayed else None)


async def keyed_write(
    request: Request,
    identity: Identity,
    role: Role,
    action: str,
    idempotency_key: str,
    what: str,
    model: type[Message],
    write: Callable[[Message, str], tuple[bool, BaseModel]],
) -> Response:
    """A write only `role` may make, under a required Idempotency-Key, of a JSON body read as `model`
    (`what` names it in a refusal); `write` stores the body under the key."""
    require_role(identity, role, action)
    key = required_idempotency_key(idempotency_key, what)
    body = await run_in_threadpool(parse_message, await read_body(request), model)
    replayed, answer = await run_in_threadpool(write, body, key)
    return created(answer, replayed)
