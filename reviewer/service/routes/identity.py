"""`GET /v1/whoami`: who the token says the caller is; `GET /v1/auth`: how reviewers sign in."""

from __future__ import annotations

from typing import TYPE_CHECKING

from fastapi import APIRouter, Request, Response

from reviewer.queue.messages import ProviderSignIn, SignInMethods, Whoami
from reviewer.service.deps import Caller
from reviewer.service.responses import errors, json_response

if TYPE_CHECKING:  # PyJWT loads only on a queue whose reviewers sign in through a provider
    from reviewer.service.oidc import IdentityTokens

router = APIRouter(tags=["identity"])


@router.get("/v1/whoami", response_model=Whoami, responses=errors())
async def whoami(identity: Caller) -> Response:
    return json_response(Whoami(name=identity.name, role=identity.role, identity=identity.principal))


@router.get("/v1/auth", response_model=SignInMethods)
async def sign_in_methods(request: Request) -> Response:
    """Asked without a token: whether reviewers sign in through the team's OpenID provider (which
    one, as which client) or with a minted token. Holds nothing secret: a public client's id."""
    provider: IdentityTokens | None = request.app.state.identity_tokens
    if provider is None:
        return json_response(SignInMethods(minted_reviewer_tokens=True))
    return json_response(
        SignInMethods(
            minted_reviewer_tokens=False,
            oidc=ProviderSignIn(
                issuer=provider.settings.issuer,
                client_id=provider.settings.client_id,
                scopes=provider.settings.scopes,
                device_authorization_endpoint=provider.endpoints.device_authorization_endpoint,
                token_endpoint=provider.endpoints.token_endpoint,
                session_seconds=provider.settings.session,
            ),
        )
    )
