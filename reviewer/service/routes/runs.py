"""Real runs: an agent claims an approval before its first write and reports the run under the claim,
or says it refused the approval and claimed nothing."""

from __future__ import annotations

from functools import partial
from typing import Annotated

from fastapi import APIRouter, Header, Request, Response
from starlette.concurrency import run_in_threadpool

from reviewer.queue.messages import Claim, ClaimRequest, DecisionState, ExecutionHistory, RefusalReport
from reviewer.service.bodies import parse_report, read_body
from reviewer.service.deps import (
    IDEMPOTENCY_KEY_PATTERN,
    Caller,
    Store,
    optional_idempotency_key,
    require_role,
)
from reviewer.service.responses import errors
from reviewer.service.routes.proposals import ProposalId
from reviewer.service.routes.writes import RequiredIdempotencyKey, created, keyed_write, proposal_write

router = APIRouter(tags=["runs"])


@proposal_write(router, "claims", Claim, "ClaimRequest")
async def claim(
    request: Request,
    identity: Caller,
    store: Store,
    proposal_id: ProposalId,
    idempotency_key: RequiredIdempotencyKey,
) -> Response:
    """Claim the approval before the first real write: one run per approval, fixed against expiry
    and re-plans until its report; another claim of it is a 409 naming the holder."""
    store_it = partial(store.claim, identity, proposal_id)
    return await keyed_write(
        request, identity, "agent", "claim approvals", idempotency_key, "a claim", ClaimRequest, store_it
    )


@proposal_write(router, "executions", DecisionState, "ExecutionReport")
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
    return created(answer, replayed)


@proposal_write(router, "refusals", DecisionState, "RefusalReport")
async def report_refusal(
    request: Request,
    identity: Caller,
    store: Store,
    proposal_id: ProposalId,
    idempotency_key: RequiredIdempotencyKey,
) -> Response:
    """Say that this executor refused the approval before claiming it (the queue's trail went
    backwards or forked, the signatures do not satisfy its signers, its ledger says it ran): the
    proposal's state does not change, and its decision state lists the refusal for the reviewers."""
    store_it = partial(store.record_refusal, identity, proposal_id)
    return await keyed_write(
        request, identity, "agent", "report refusals", idempotency_key, "a refusal", RefusalReport, store_it
    )


@router.get("/v1/proposals/{proposal_id}/executions", response_model=ExecutionHistory, responses=errors(404))
async def list_executions(identity: Caller, store: Store, proposal_id: ProposalId) -> Response:
    """The execution reports stored for the proposal, oldest first, to verify a run against its plan."""
    body = await run_in_threadpool(store.list_executions, identity, proposal_id)
    return Response(body, media_type="application/json")
