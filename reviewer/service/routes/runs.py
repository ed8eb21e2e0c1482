"""Real runs: an agent claims an approval before its first write and reports the run under the claim."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from starlette.concurrency import run_in_threadpool

from reviewer.queue.messages import Claim, ClaimRequest, DecisionState, ExecutionHistory
from reviewer.service.bodies import parse_message, parse_report, read_body
from reviewer.service.deps import (
    IDEMPOTENCY_KEY_PATTERN,
    Caller,
    Store,
    optional_idempotency_key,
    require_role,
    required_idempotency_key,
)
from reviewer.service.responses import errors, json_body, json_response
from reviewer.service.routes.decisions import IDEMPOTENCY_KEY_DOC
from reviewer.service.routes.proposals import ProposalId

router = APIRouter(tags=["runs"])


@router.post(
    "/v1/proposals/{proposal_id}/claims",
    status_code=201,
    response_model=Claim,
    responses=errors(400, 403, 404, 409, 412, 413, 415),
    openapi_extra=json_body("ClaimRequest"),
)
async def claim(
    request: Request,
    identity: Caller,
    store: Store,
    proposal_id: ProposalId,
    idempotency_key: Annotated[str, Header(description=IDEMPOTENCY_KEY_DOC, pattern=IDEMPOTENCY_KEY_PATTERN)],
) -> Response:
    """Claim the approval before the first real write: one run per approval, fixed against expiry
    and re-plans until its report; another claim of it is a 409 naming the holder."""
    require_role(identity, "agent", "claim approvals")
    key = required_idempotency_key(idempotency_key, "a claim")
    claim_request = await run_in_threadpool(parse_message, await read_body(request), ClaimRequest)
    replayed, answer = await run_in_threadpool(store.claim, identity, proposal_id, claim_request, key)
    return json_response(answer, 201, {"Idempotent-Replayed": "true"} if replayed else None)


@router.post(
    "/v1/proposals/{proposal_id}/executions",
    status_code=201,
    response_model=DecisionState,
    responses=errors(400, 403, 404, 409, 412, 413, 415),
    openapi_extra=json_body("ExecutionReport"),
)
async def report_execution(
    request: Request,
    identity: Caller,
    store: Store,
    proposal_id: ProposalId,
    idempotency_key: Annotated[str | None, Header(pattern=IDEMPOTENCY_KEY_PATTERN)] = None,
) -> Response:
    """Report the real run under its claim (409 without one); stored whatever happened since the claim.

    The claim is checked before the body is read, so a report without one costs nothing to refuse.
    With an Idempotency-Key, a retry of a report that was stored answers the first answer again.
    """
    require_role(identity, "agent", "report executions")
    key = optional_idempotency_key(idempotency_key)
    await run_in_threadpool(store.check_report_allowed, identity, proposal_id, key)
    raw = await read_body(request)
    report = await run_in_threadpool(parse_report, raw)
    replayed, answer = await run_in_threadpool(
        store.record_execution, identity, proposal_id, report, raw, key
    )
    return json_response(answer, 201, {"Idempotent-Replayed": "true"} if replayed else None)


@router.get("/v1/proposals/{proposal_id}/executions", response_model=ExecutionHistory, responses=errors(404))
async def list_executions(identity: Caller, store: Store, proposal_id: ProposalId) -> Response:
    """The execution reports stored for the proposal, oldest first, to verify a run against its plan."""
    body = await run_in_threadpool(store.list_executions, identity, proposal_id)
    return Response(body, media_type="application/json")
