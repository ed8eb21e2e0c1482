"""Proposals: an agent submits revisions; a reviewer lists them (with a cheap ETag poll); either reads one."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from typing import Annotated, Final

from fastapi import APIRouter, Header, Query, Request, Response
from fastapi import Path as PathParam
from starlette.concurrency import run_in_threadpool

from reviewer.plan.proposal import MAX_SAFE_INTEGER, PROPOSAL_ID_PATTERN
from reviewer.queue.messages import ProposalPage, ProposalRecord, State, SubmissionAnswer
from reviewer.service.bodies import read_body, submission
from reviewer.service.deps import Caller, Store, require_role
from reviewer.service.listing import MAX_FILTER_CHARS, list_filter
from reviewer.service.responses import errors, json_body, json_response

MAX_PAGE: Final = 200
DEFAULT_LIMIT: Final = 50
CURSOR_PATTERN: Final = r"^[0-9]{1,16}$"

ProposalId = Annotated[str, PathParam(pattern=PROPOSAL_ID_PATTERN)]
router = APIRouter(tags=["proposals"])


@lru_cache(maxsize=256)
def list_etag(last_seq: int, next_deadline: float | None, *query: object) -> str:
    """The list's ETag for a version and a query; remembered, as every idle poll asks for the same."""
    material = f"{last_seq}|{next_deadline!r}|" + "|".join(repr(part) for part in query)
    return '"' + hashlib.sha256(material.encode()).hexdigest()[:32] + '"'


def etag_matches(if_none_match: str | None, etag: str) -> bool:
    if not if_none_match:
        return False
    candidates = {candidate.strip().removeprefix("W/") for candidate in if_none_match.split(",")}
    return etag in candidates or "*" in candidates


@router.post(
    "/v1/proposals",
    status_code=201,
    response_model=SubmissionAnswer,
    responses={200: {"model": SubmissionAnswer}, **errors(400, 403, 409, 413, 415, 503)},
    openapi_extra=json_body("Proposal"),
)
async def submit(request: Request, identity: Caller, store: Store) -> Response:
    """Submit a revision: 201 when stored, 200 when this plan is already stored under that number."""
    require_role(identity, "agent", "submit proposals")
    checked = await run_in_threadpool(submission, await read_body(request))
    created, answer = await run_in_threadpool(store.submit, identity, checked)
    return json_response(answer, 201 if created else 200)


@router.get(
    "/v1/proposals",
    response_model=ProposalPage,
    responses={304: {"description": "Nothing changed since the ETag given"}, **errors(403, 422)},
)
async def list_proposals(
    identity: Caller,
    store: Store,
    state: State | None = None,
    cursor: Annotated[
        str | None, Query(pattern=CURSOR_PATTERN, description="`next_cursor` of a page")
    ] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PAGE)] = DEFAULT_LIMIT,
    environment: Annotated[
        str | None,
        Query(min_length=1, max_length=MAX_FILTER_CHARS, description="only plans that say this environment"),
    ] = None,
    agent: Annotated[
        str | None,
        Query(
            min_length=1,
            max_length=MAX_FILTER_CHARS,
            description="only plans the agent token of this name submitted",
        ),
    ] = None,
    alarm: Annotated[str | None, Query(description="only plans raising this alarm, by name")] = None,
    older_than: Annotated[
        str | None, Query(description="only revisions waiting this long: 90s, 30m, 12h, 2d or seconds")
    ] = None,
    yours: Annotated[
        bool, Query(description="only plans in environments the policy lets you decide")
    ] = False,
    holding: Annotated[
        str | None,
        Query(min_length=1, max_length=128, description="only proposals whose id holds this text"),
    ] = None,
    if_none_match: Annotated[str | None, Header()] = None,
) -> Response:
    """Summaries, newest submission first, each with its reading (counts, alarms, money) and whether
    you may decide it; filtered by the query; send the last ETag in If-None-Match to get a bodiless 304."""
    require_role(identity, "reviewer", "list proposals")
    wanted = list_filter(state, environment, agent, alarm, older_than, yours, holding)
    version = await run_in_threadpool(store.list_version)
    narrowed = (environment, agent, alarm, older_than, yours, holding)
    if any(narrowed):  # a filter's answer is the caller's, and one of rows' ages changes by the second
        now = int(store.clock()) if older_than else None
        etag = list_etag(
            version.last_seq, version.next_deadline, state, cursor, limit, *narrowed, identity.name, now
        )
    else:
        etag = list_etag(version.last_seq, version.next_deadline, state, cursor, limit)
    headers = {"ETag": etag, "Cache-Control": "no-cache"}
    if etag_matches(if_none_match, etag):
        return Response(status_code=304, headers=headers)
    before_seq = None if cursor is None else int(cursor)
    page = await run_in_threadpool(store.list_proposals, state, before_seq, limit, wanted, identity.name)
    return json_response(page, headers=headers)


@router.get("/v1/proposals/{proposal_id}", response_model=ProposalRecord, responses=errors(404))
async def get_proposal(identity: Caller, store: Store, proposal_id: ProposalId) -> Response:
    """The latest revision's state, every revision, and the trail of submissions and decisions."""
    return json_response(await run_in_threadpool(store.get_record, identity, proposal_id))


@router.get(
    "/v1/proposals/{proposal_id}/revisions/{revision}",
    responses={
        200: {"content": {"application/json": {"schema": {"$ref": "#/components/schemas/Proposal"}}}},
        **errors(404),
    },
)
async def get_revision(
    identity: Caller,
    store: Store,
    proposal_id: ProposalId,
    revision: Annotated[int, PathParam(ge=1, le=MAX_SAFE_INTEGER)],
) -> Response:
    """One revision, whole, exactly as the agent submitted it."""
    body = await run_in_threadpool(store.get_revision_body, identity, proposal_id, revision)
    return Response(body, media_type="application/json")
