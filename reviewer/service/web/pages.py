"""The pages a browser opens: the review page of a revision, the passkey enrolment page, their one
script and style sheet, and the POSTs their buttons send.

Safe by default: a GET changes nothing (mail and chat scanners open links); every POST that decides
carries a passkey's assertion over the decision statement and is judged by it alone, never by a
cookie (the queue sets none); every page forbids framing, inline script and third-party resources
(`PAGE_HEADERS`); the enrolment and decision routes are rate limited per address.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from importlib.resources import files
from typing import Annotated, Any, Final

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import HTMLResponse, JSONResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import BaseModel, Field
from starlette.concurrency import run_in_threadpool
from webauthn.helpers import base64url_to_bytes, bytes_to_base64url

from reviewer.plan.proposal import MAX_STRING_CHARS, PROPOSAL_ID_PATTERN
from reviewer.service.auth import hash_token
from reviewer.service.errors import (
    BadRequest,
    Forbidden,
    NotFound,
    ServiceError,
    SignatureRefused,
    StaleRevision,
)
from reviewer.service.responses import error_response
from reviewer.service.review_links import key_matches
from reviewer.service.store import QueueStore
from reviewer.service.web.limits import RateLimit
from reviewer.service.web.relying_party import RelyingParty
from reviewer.service.web.review_view import PAGE_READER, review_view
from reviewer.signing.passkeys import PasskeyAssertion, statement_challenge
from reviewer.signing.sshsig import DecisionKind, DecisionStatement, SigningError

router = APIRouter(include_in_schema=False)

PAGE_HEADERS: Final = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
        "base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Frame-Options": "DENY",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-store",
    "Cross-Origin-Opener-Policy": "same-origin",
}
"""On every page, script, style sheet and page POST's answer. `no-referrer`: the link's key is in
the URL. `no-store`: a decided or superseded page is never shown from a cache as undecided."""

ASSERTION_TIMEOUT_MS: Final = 120_000
_templates = Environment(
    loader=PackageLoader("reviewer.service.web", "templates"),
    autoescape=select_autoescape(default=True, default_for_string=True),
)
_STATIC: Final = {"review.js": "text/javascript; charset=utf-8", "review.css": "text/css; charset=utf-8"}


@dataclass
class WebPages:
    """What the pages need beside the store: the relying party and the rate limits."""

    relying_party: RelyingParty
    enrolment_limit: RateLimit
    decision_limit: RateLimit


def web_of(request: Request) -> WebPages:
    web: WebPages = request.app.state.web
    return web


def store_of(request: Request) -> QueueStore:
    store: QueueStore = request.app.state.store
    return store


def client_of(request: Request) -> str:
    return request.client.host if request.client else "unknown"


def page(template: str, status: int = 200, **context: Any) -> HTMLResponse:
    html = _templates.get_template(template).render(**context)
    return HTMLResponse(html, status, headers=PAGE_HEADERS)


def page_json(content: Any, status: int = 200) -> JSONResponse:
    return JSONResponse(content, status, headers=PAGE_HEADERS)


def page_error(error: ServiceError) -> Response:
    answer = error_response(error)
    answer.headers.update(PAGE_HEADERS)
    return answer


def require_same_origin(request: Request, web: WebPages) -> None:
    """A page POST comes from the page's own origin (a browser always says which): a form on
    another site is refused before anything is read."""
    if request.headers.get("origin") != web.relying_party.origin:
        raise Forbidden(f"a page's request must come from {web.relying_party.origin}")


ProposalPath = Annotated[str, Path(pattern=PROPOSAL_ID_PATTERN)]
RevisionPath = Annotated[int, Path(ge=1, le=2**31)]
LinkPath = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{20,64}$")]


# --- static files ------------------------------------------------------------------------------


@router.get("/static/{name}")
async def static_file(name: str) -> Response:
    media_type = _STATIC.get(name)
    if media_type is None:
        raise NotFound(f"no static file {name!r}")
    body = files("reviewer.service.web").joinpath("static", name).read_bytes()
    headers = {**PAGE_HEADERS, "Cache-Control": "public, max-age=300"}
    return Response(body, media_type=media_type, headers=headers)


# --- enrolment ---------------------------------------------------------------------------------


@router.get("/passkeys/register/{link}")
async def register_page(request: Request, link: LinkPath) -> Response:
    """The page with the Register passkey button; shows who it enrols, spends nothing."""
    try:
        reviewer = await run_in_threadpool(store_of(request).passkey_link_owner, hash_token(link))
    except NotFound as missing:
        return page("gone.html", 404, message=missing.message)
    return page("register.html", reviewer=reviewer, link=link, rp_id=web_of(request).relying_party.rp_id)


class RegistrationBody(BaseModel):
    credential: dict[str, Any]
    label: str = Field(default="", max_length=100)


@router.post("/passkeys/register/{link}/options")
async def registration_options(request: Request, link: LinkPath) -> Response:
    web = web_of(request)
    try:
        require_same_origin(request, web)
        web.enrolment_limit.check(client_of(request))
        challenge = secrets.token_bytes(32)
        reviewer = await run_in_threadpool(
            store_of(request).passkey_challenge, hash_token(link), bytes_to_base64url(challenge)
        )
    except ServiceError as refused:
        return page_error(refused)
    return page_json(web.relying_party.registration_options(reviewer, challenge))


@router.post("/passkeys/register/{link}")
async def register(request: Request, link: LinkPath, body: RegistrationBody) -> Response:
    """Verify the browser's new passkey against the link's challenge; register it, spend the link."""
    web = web_of(request)
    store = store_of(request)
    try:
        require_same_origin(request, web)
        web.enrolment_limit.check(client_of(request))
        reviewer, challenge = await run_in_threadpool(store.registration_challenge, hash_token(link))
        if challenge is None:
            raise BadRequest("ask for the registration options first (press Register passkey)")
        try:
            passkey, sign_count = web.relying_party.verify_registration(
                body.credential, base64url_to_bytes(challenge), reviewer
            )
        except SigningError as error:
            raise SignatureRefused(str(error)) from None
        label = " ".join(body.label.split()) or "passkey"
        await run_in_threadpool(store.register_passkey, hash_token(link), passkey, sign_count, label)
    except ServiceError as refused:
        return page_error(refused)
    return page_json({"reviewer": reviewer, "credential_id": passkey.credential_id})


# --- the review page ---------------------------------------------------------------------------


@router.get("/review/{proposal_id}/{revision}")
async def review_page(
    request: Request,
    proposal_id: ProposalPath,
    revision: RevisionPath,
    key: Annotated[str, Query(max_length=64)] = "",
    page_number: Annotated[int, Query(alias="page", ge=1, le=10_000)] = 1,
) -> Response:
    """The revision as the screen shows it, and the buttons when it may still be decided. Decides nothing."""
    store = store_of(request)
    try:
        await require_key(store, proposal_id, key)
        view = await run_in_threadpool(review_view, store, proposal_id, revision, page_number)
    except NotFound as missing:
        return page("gone.html", 404, message=missing.message)
    return page("review.html", view=view, key=key)


async def require_key(store: QueueStore, proposal_id: str, key: str) -> None:
    """The link's key is this proposal's; without it the page is the same 404 as an unknown id."""
    secret = await run_in_threadpool(store.review_link_secret)
    if not key_matches(secret, proposal_id, key):
        raise NotFound("no such review page; open the link the queue sent, whole")


class StatementBody(BaseModel):
    key: str = Field(max_length=64)
    decision: DecisionKind
    reviewer: str = Field(min_length=1, max_length=254)


class DecisionBody(BaseModel):
    key: str = Field(max_length=64)
    statement: str = Field(max_length=4096)
    reason: str = Field(default="", max_length=MAX_STRING_CHARS)
    assertion: dict[str, Any]


@router.post("/review/{proposal_id}/{revision}/statement")
async def statement(
    request: Request, proposal_id: ProposalPath, revision: RevisionPath, body: StatementBody
) -> Response:
    """The statement a button's decision signs (the queue's time in it) and the assertion options:
    its challenge is the statement's SHA-256. Refused for a revision no longer the pending one."""
    web = web_of(request)
    store = store_of(request)
    try:
        require_same_origin(request, web)
        web.decision_limit.check(client_of(request))
        await require_key(store, proposal_id, body.key)
        state = await run_in_threadpool(store.decision_state, PAGE_READER, proposal_id)
        if state.revision != revision:
            raise StaleRevision(
                f"revision {revision} was superseded by revision {state.revision}: this page decides "
                "nothing; open the new revision's page",
                latest_revision=state.revision,
                latest_plan_sha256=state.plan_sha256,
            )
        if state.state != "pending":
            raise BadRequest(f"this revision is {state.state}; nothing is left to decide")
        try:
            made = DecisionStatement.now(
                proposal_id, revision, state.plan_sha256, body.decision, body.reviewer.strip()
            )
        except SigningError as error:
            raise BadRequest(f"reviewer: {error}") from None
        credentials = [
            item.credential_id
            for item in await run_in_threadpool(store.registered_passkeys)
            if item.reviewer == made.reviewer
        ]
        if not credentials:
            raise Forbidden(
                f"no passkey is enrolled for {made.reviewer!r} on this queue; enrol one with "
                "`reviewer passkey enroll`"
            )
    except ServiceError as refused:
        return page_error(refused)
    text = made.to_bytes().decode()
    return page_json(
        {
            "statement": text,
            "publicKey": {
                "challenge": bytes_to_base64url(statement_challenge(made.to_bytes())),
                "rpId": web.relying_party.rp_id,
                "allowCredentials": [{"type": "public-key", "id": item} for item in credentials],
                "userVerification": "required",
                "timeout": ASSERTION_TIMEOUT_MS,
            },
        }
    )


@router.post("/review/{proposal_id}/{revision}/decision")
async def decision(
    request: Request, proposal_id: ProposalPath, revision: RevisionPath, body: DecisionBody
) -> Response:
    """Decide, bound by the assertion alone: the queue verifies it, then applies every rule a
    decision from the terminal meets (the revision pending and the latest, the policy, one vote each)."""
    web = web_of(request)
    store = store_of(request)
    try:
        require_same_origin(request, web)
        web.decision_limit.check(client_of(request))
        await require_key(store, proposal_id, body.key)
        try:
            assertion = PasskeyAssertion.from_browser(body.assertion)
            named = DecisionStatement.parse(body.statement)
        except SigningError as error:
            raise SignatureRefused(str(error)) from None
        if named.revision != revision:
            raise SignatureRefused(
                f"statement.revision is {named.revision}, but this is the page of revision {revision}; "
                "nothing was decided"
            )
        provider_signs_in = request.app.state.identity_tokens is not None
        _, state = await run_in_threadpool(
            store.decide_by_passkey, proposal_id, body.statement, assertion, body.reason, provider_signs_in
        )
    except ServiceError as refused:
        return page_error(refused)
    return page_json(state.model_dump(mode="json"))
