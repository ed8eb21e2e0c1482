"""Decisions: a reviewer approves or rejects the latest revision; anyone allowed reads its state, and
may wait for it to change (a long poll, `?wait=`)."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime
from functools import partial
from typing import Annotated, Final

from fastapi import APIRouter, Query, Request, Response
from starlette.concurrency import run_in_threadpool

from reviewer.queue.messages import DecisionRequest, DecisionState
from reviewer.service.auth import Identity
from reviewer.service.deps import Caller, Store, WaitingRequests, caller_again
from reviewer.service.responses import errors
from reviewer.service.routes.proposals import ProposalId, etag_matches
from reviewer.service.routes.writes import RequiredIdempotencyKey, keyed_write, proposal_write
from reviewer.service.store import QueueStore
from reviewer.service.waits import MAX_WAIT

router = APIRouter(tags=["decisions"])

Wait = Annotated[
    float,
    Query(
        ge=0,
        allow_inf_nan=False,
        description=(
            f"Seconds to wait (at most {MAX_WAIT:g}; more is served as {MAX_WAIT:g}) for the state to "
            "differ from the one whose ETag If-None-Match names, or, without If-None-Match, to be "
            "other than pending; answered at once when it already does. A wait that ends unchanged "
            "answers 304 (with If-None-Match) or the unchanged state."
        ),
    ),
]
NOT_MODIFIED: Final[dict[int | str, dict[str, str]]] = {
    304: {"description": "The state is still the one If-None-Match names (the wait, if any, ran out)."}
}


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


@dataclass(frozen=True)
class StateRead:
    """One reading of the decision state: the model, its JSON and the ETag of that JSON."""

    state: DecisionState
    body: bytes
    etag: str


def read_state(store: QueueStore, identity: Identity, proposal_id: str) -> StateRead:
    state = store.decision_state(identity, proposal_id)
    body = state.model_dump_json(exclude_none=True).encode()
    return StateRead(state, body, '"' + hashlib.sha256(body).hexdigest()[:32] + '"')


def seconds_to_change(store: QueueStore, read: StateRead) -> float:
    """Seconds until time alone changes the state (a pending proposal or an approval expires, a
    claimed run's lease ends and its outcome becomes unknown, a change window opens or closes);
    infinite when no deadline is ahead."""
    window = read.state.window
    deadlines: list[datetime | None] = [
        read.state.expires_at,
        read.state.lease_expires_at,
        *((window.runs_from, window.runs_until) if window is not None else ()),
    ]
    now = store.clock()
    ahead = [moment.timestamp() - now for moment in deadlines if moment is not None]
    return min((seconds for seconds in ahead if seconds > 0), default=float("inf"))


@router.get(
    "/v1/proposals/{proposal_id}/decision",
    response_model=DecisionState,
    responses={**errors(404), **NOT_MODIFIED},
)
async def decision_state(
    request: Request,
    identity: Caller,
    store: Store,
    waits: WaitingRequests,
    proposal_id: ProposalId,
    wait: Wait = 0.0,
) -> Response:
    """The latest revision's state: what an agent waits on before it may run anything. With `wait`,
    the answer comes as soon as the state changes (a long poll), so a run starts within
    milliseconds of its approval and an idle wait costs one request every `wait` seconds."""
    known = request.headers.get("if-none-match")
    reads = 0

    async def reading() -> StateRead:
        nonlocal identity, reads
        if reads:  # held: the token is read again, so a revoked one is refused now
            identity = await caller_again(request, store)
        reads += 1
        return await run_in_threadpool(read_state, store, identity, proposal_id)

    def unchanged(read: StateRead) -> bool:
        return etag_matches(known, read.etag) if known else read.state.state == "pending"

    read = await waits.hold(proposal_id, wait, reading, unchanged, partial(seconds_to_change, store))
    headers = {"ETag": read.etag, "Cache-Control": "no-cache"}
    if etag_matches(known, read.etag):
        return Response(status_code=304, headers=headers)
    return Response(read.body, 200, headers, media_type="application/json")
