"""The routes' dependencies: the store and the caller, as FastAPI's full-stack template's `deps.py`
provides its session and current user, plus the Idempotency-Key rules the writes share."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Annotated, Final

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from reviewer.service import rules
from reviewer.service.auth import Identity, Role, hash_token
from reviewer.service.errors import BadRequest, Forbidden, Unauthorized
from reviewer.service.store import QueueStore
from reviewer.service.waits import Waits

if TYPE_CHECKING:  # PyJWT loads only on a queue whose reviewers sign in through a provider
    from reviewer.service.oidc import IdentityTokens

MAX_TOKEN_CHARS: Final = 512
"""Far beyond the tokens `reviewer token create` mints; a longer one is refused unhashed."""
MAX_IDEMPOTENCY_KEY: Final = 255
IDEMPOTENCY_KEY_PATTERN: Final = r"^[!-~](?:[ -~]{0,253}[!-~])?$"
"""1 to 255 printable ASCII characters, no space at either end (HTTP would strip it)."""
IDEMPOTENCY_KEY: Final = re.compile(IDEMPOTENCY_KEY_PATTERN.strip("^$"))

_bearer = HTTPBearer(
    auto_error=False,
    description="A token minted by `reviewer token create`, or a reviewer's identity token from the "
    "queue's OpenID provider (see `GET /v1/auth`).",
)


async def get_store(request: Request) -> QueueStore:
    """The store `create_app` was given; one per process, shared by every request. Async though it
    awaits nothing: FastAPI runs a plain `def` dependency in a worker thread, a hand-off that cost
    an idle poll more than the rest of its work."""
    store: QueueStore = request.app.state.store
    return store


Store = Annotated[QueueStore, Depends(get_store)]


async def get_waits(request: Request) -> Waits:
    """The requests waiting for a change on this replica (`create_app` makes one per app)."""
    waits: Waits = request.app.state.waits
    return waits


WaitingRequests = Annotated[Waits, Depends(get_waits)]


async def current_caller(
    request: Request,
    store: Store,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    """The caller's identity from its bearer token alone: a minted token (one indexed lookup), or,
    on a queue that signs reviewers in through a provider, its identity token. Off the event loop,
    as every store call: a database that hangs holds up this request, never the others."""
    provider: IdentityTokens | None = request.app.state.identity_tokens
    if credentials is not None and provider is not None and provider.reads(credentials.credentials):
        identity = await run_in_threadpool(provider_caller, store, provider, credentials.credentials)
    else:
        identity = await run_in_threadpool(minted_caller, store, credentials, provider is not None)
    request.state.who = identity.name
    return identity


Caller = Annotated[Identity, Depends(current_caller)]


async def caller_again(request: Request, store: QueueStore) -> Identity:
    """The caller's identity read again from its token, for a request held in a long poll: a token
    revoked or expired while it waits is refused at its next reading, as every write refuses it."""
    return await current_caller(request, store, await _bearer(request))


def minted_caller(
    store: QueueStore, credentials: HTTPAuthorizationCredentials | None, provider_signs_in: bool
) -> Identity:
    if credentials is None or not usable_token(credentials.credentials):
        raise Unauthorized("send the token as `Authorization: Bearer <token>`")
    identity = identity_for(store, credentials.credentials)
    if identity is None:
        reason = store.token_refusal(hash_token(credentials.credentials))
        raise Unauthorized(
            f"{reason or 'this token is unknown or revoked'}; ask the queue's operator for one"
        )
    if minted_reviewer_refused(identity, provider_signs_in):
        raise Unauthorized(
            "reviewers sign in to this queue through the identity provider (`reviewer login --queue "
            "URL`); a minted reviewer token decides here only when made with --break-glass"
        )
    return identity


def minted_reviewer_refused(identity: Identity, provider_signs_in: bool) -> bool:
    """Where reviewers sign in through the provider, the only minted reviewer tokens are break-glass ones."""
    return provider_signs_in and identity.role == "reviewer" and identity.kind == "minted"


def provider_caller(store: QueueStore, provider: IdentityTokens, token: str) -> Identity:
    """The person the provider's identity token names, in a worker thread (the provider's keys may
    have to be fetched)."""
    from reviewer.service.oidc import TokenRefused

    try:
        person = provider.check(token)
    except TokenRefused as refused:
        raise Unauthorized(str(refused)) from None
    return store.sign_in(person)


def usable_token(token: str) -> bool:
    return bool(token) and len(token) <= MAX_TOKEN_CHARS


def identity_for(store: QueueStore, token: str) -> Identity | None:
    """Whose token this is: None for one unknown, revoked, empty or too long to be ours."""
    return store.resolve_token(hash_token(token)) if usable_token(token) else None


def require_role(identity: Identity, role: Role | tuple[Role, ...], action: str) -> None:
    """Refuse (403) a caller whose token is of none of these roles, naming them and its own."""
    roles = (role,) if isinstance(role, str) else role
    if identity.role not in roles:
        raise Forbidden(
            f"only {rules.article(roles[0])} {' or '.join(roles)} token may {action}; this token "
            f"({identity.name}) is {rules.article(identity.role)} {identity.role}"
        )


def required_idempotency_key(value: str | None, what: str = "a decision") -> str:
    """The Idempotency-Key a decision or a claim must carry."""
    if value is None or not value.strip():
        raise BadRequest(f"{what} needs an Idempotency-Key header (e.g. a UUID), reused only for retries")
    return checked_idempotency_key(value)


def optional_idempotency_key(value: str | None) -> str | None:
    """An execution report's Idempotency-Key: without one, a retry of a stored report is a 409."""
    return None if value is None else checked_idempotency_key(value)


def checked_idempotency_key(value: str) -> str:
    """The key as `IDEMPOTENCY_KEY_PATTERN` (the one the OpenAPI document publishes) allows it."""
    if IDEMPOTENCY_KEY.fullmatch(value) is None:
        raise BadRequest(
            f"the Idempotency-Key must be 1 to {MAX_IDEMPOTENCY_KEY} printable ASCII characters, "
            "not only spaces"
        )
    return value
