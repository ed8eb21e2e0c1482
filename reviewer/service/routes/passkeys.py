"""Passkeys and review links in the queue API (`serve --web-origin`): a reviewer makes a one-time
enrolment link under their own sign-in, lists and removes their passkeys; reviewers and auditors
export every registered passkey for executors that verify offline; a reviewer asks for a revision's
review link (`reviewer show ID --link`)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

from fastapi import APIRouter, Path, Request, Response
from starlette.concurrency import run_in_threadpool

from reviewer.queue.passkey_messages import EnrolmentLink, PasskeyEntry, PasskeyListing, ReviewLink
from reviewer.service.auth import hash_token, mint_token
from reviewer.service.deps import Caller, Store, require_role
from reviewer.service.errors import NotFound
from reviewer.service.responses import errors, json_response
from reviewer.service.review_links import review_link
from reviewer.service.routes.proposals import ProposalId
from reviewer.service.web.pages import web_of
from reviewer.signing.passkeys import AllowedPasskeys

router = APIRouter(tags=["passkeys"])
CredentialId = Annotated[str, Path(pattern=r"^[A-Za-z0-9_-]{4,1400}$")]


@router.post("/v1/passkeys/links", response_model=EnrolmentLink, responses=errors(403))
async def enrolment_link(request: Request, identity: Caller, store: Store) -> Response:
    """A one-time link whose page registers a passkey for the caller (a reviewer) alone."""
    require_role(identity, "reviewer", "enrol a passkey")
    web_of(request).enrolment_limit.check(f"token:{identity.token_id}")
    link = mint_token()  # token-shaped: the access log and every error message redact it
    expires_at = await run_in_threadpool(store.create_passkey_link, identity, hash_token(link))
    origin = web_of(request).relying_party.origin
    return json_response(
        EnrolmentLink(
            link=f"{origin}/passkeys/register/{link}",
            reviewer=identity.name,
            expires_at=datetime.fromtimestamp(expires_at, UTC),
        ),
        201,
    )


@router.get("/v1/passkeys", response_model=PasskeyListing, responses=errors(403))
async def list_passkeys(identity: Caller, store: Store) -> Response:
    """The caller's own passkeys."""
    require_role(identity, "reviewer", "list passkeys")
    found = await run_in_threadpool(store.list_passkeys, identity)
    return json_response(PasskeyListing(passkeys=[PasskeyEntry(**vars(item)) for item in found]))


@router.delete("/v1/passkeys/{credential_id}", status_code=204, responses=errors(403, 404, 409))
async def remove_passkey(identity: Caller, store: Store, credential_id: CredentialId) -> Response:
    """Remove one of the caller's passkeys (its id, or a start of it): it decides nothing from now."""
    require_role(identity, "reviewer", "remove a passkey")
    if not await run_in_threadpool(store.remove_passkey, identity, credential_id):
        raise NotFound(f"you hold no passkey whose id begins with {credential_id!r}")
    return Response(status_code=204)


@router.get("/v1/passkeys/export", responses=errors(403))
async def export_passkeys(request: Request, identity: Caller, store: Store) -> Response:
    """Every passkey that may decide now, as the file executors verify assertions with
    (`--allowed-passkeys`): reviewer, credential id, COSE public key, RP id and origin."""
    require_role(identity, ("reviewer", "auditor"), "export the passkeys")
    provider_signs_in = request.app.state.identity_tokens is not None
    registered = await run_in_threadpool(store.registered_passkeys, provider_signs_in)
    return Response(AllowedPasskeys(tuple(registered)).to_text(), media_type="application/json")


@router.get("/v1/proposals/{proposal_id}/link", response_model=ReviewLink, responses=errors(403, 404))
async def proposal_link(
    request: Request, identity: Caller, store: Store, proposal_id: ProposalId
) -> Response:
    """The review page of the proposal's latest revision."""
    require_role(identity, "reviewer", "open a review page")
    state = await run_in_threadpool(store.decision_state, identity, proposal_id)
    secret = await run_in_threadpool(store.review_link_secret)
    origin = web_of(request).relying_party.origin
    return json_response(
        ReviewLink(
            proposal_id=proposal_id,
            revision=state.revision,
            review=review_link(origin, secret, proposal_id, state.revision),
        )
    )
