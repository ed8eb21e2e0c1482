"""Decisions: a reviewer approves or rejects the latest revision; anyone allowed reads its state."""

from __future__ import annotations

from functools import partial

from fastapi import APIRouter, Request, Response
from starlette.concurrency import run_in_threadpool

from reviewer.queue.messages import DecisionRequest, DecisionState
from reviewer.service.deps import Caller, Store
from reviewer.service.responses import errors, json_response
from reviewer.service.routes.proposals import ProposalId
from reviewer.service.routes.writes import RequiredIdempotencyKey, keyed_write, proposal_write

router = APIRouter(tags=["decisions"])


@proposal_write(router, "decisions", DecisionState, "DecisionRequest")
async def decide(
    request: Request,
    identity: Caller,
    store: Store,
    proposal_id: ProposalId,
    idempotency_key: RequiredIdempotencyKey,
) -> Response:
    """Approve or reject the latest revision, naming its number and digest (412 if either is stale)."""
    store_it = partial(store.decide, identity, proposal_id)
    return await keyed_write(
        request, identity, "reviewer", "decide", idempotency_key, "a decision", DecisionRequest, store_it
    )


@router.get("/v1/proposals/{proposal_id}/decision", response_model=DecisionState, responses=errors(404))
async def decision_state(identity: Caller, store: Store, proposal_id: ProposalId) -> Response:
    """The latest revision's state: what an agent polls before it may run anything."""
    return json_response(await run_in_threadpool(store.decision_state, identity, proposal_id))
