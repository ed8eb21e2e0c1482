"""Decisions: a reviewer approves or rejects the latest revision; anyone allowed reads its state."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from starlette.concurrency import run_in_threadpool

from reviewer.queue.messages import DecisionRequest, DecisionState
from reviewer.service.bodies import parse_message, read_body
from reviewer.service.deps import (
    IDEMPOTENCY_KEY_PATTERN,
    Caller,
    Store,
    require_role,
    required_idempotency_key,
)
from reviewer.service.responses import errors, json_body, json_response
from reviewer.service.routes.proposals import ProposalId

router = APIRouter(tags=["decisions"])
IDEMPOTENCY_KEY_DOC = (
    "Required: reused only to retry this very request, which then answers as the first time."
)


@router.post(
    "/v1/proposals/{proposal_id}/decisions",
    status_code=201,
    response_model=DecisionState,
    responses=errors(400, 403, 404, 409, 412, 413, 415),
    openapi_extra=json_body("DecisionRequest"),
)
async def decide(
    request: Request,
    identity: Caller,
    store: Store,
    proposal_id: ProposalId,
    idempotency_key: Annotated[str, Header(description=IDEMPOTENCY_KEY_DOC, pattern=IDEMPOTENCY_KEY_PATTERN)],
) -> Response:
    """Approve or reject the latest revision, naming its number and digest (412 if either is stale)."""
    require_role(identity, "reviewer", "decide")
    key = required_idempotency_key(idempotency_key)
    decision = await run_in_threadpool(parse_message, await read_body(request), DecisionRequest)
    replayed, answer = await run_in_threadpool(store.decide, identity, proposal_id, decision, key)
    return json_response(answer, 201, {"Idempotent-Replayed": "true"} if replayed else None)


@router.get("/v1/proposals/{proposal_id}/decision", response_model=DecisionState, responses=errors(404))
async def decision_state(identity: Caller, store: Store, proposal_id: ProposalId) -> Response:
    """The latest revision's state: what an agent polls before it may run anything."""
    return json_response(store.decision_state(identity, proposal_id))
