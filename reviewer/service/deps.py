"""The routes' dependencies: the store and the caller, as FastAPI's full-stack template's `deps.py`
provides its session and current user, plus the Idempotency-Key rules the writes share."""

from __future__ import annotations

import re
from typing import Annotated, Final

from fastapi import Depends, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from reviewer.service.auth import Identity, Role, hash_token
from reviewer.service.errors import BadRequest, Forbidden, Unauthorized
from reviewer.service.store import QueueStore

MAX_IDEMPOTENCY_KEY: Final = 255
IDEMPOTENCY_KEY_PATTERN: Final = r"^[!-~](?:[ -~]{0,253}[!-~])?$"
"""1 to 255 printable ASCII characters, no space at either end (HTTP would strip it)."""
IDEMPOTENCY_KEY: Final = re.compile(IDEMPOTENCY_KEY_PATTERN.strip("^$"))

_bearer = HTTPBearer(auto_error=False, description="A token minted by `reviewer token create`.")


def get_store(request: Request) -> QueueStore:
    """The store `create_app` was given; one per process, shared by every request."""
    store: QueueStore = request.app.state.store
    return store


Store = Annotated[QueueStore, Depends(get_store)]


async def current_caller(
    request: Request,
    store: Store,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Identity:
    """The caller's identity from its bearer token alone; runs on the loop (one indexed lookup)."""
    if credentials is None or not credentials.credentials or len(credentials.credentials) > 512:
        raise Unauthorized("send the token as `Authorization: Bearer <token>`")
    identity = store.resolve_token(hash_token(credentials.credentials))
    if identity is None:
        raise Unauthorized("this token is unknown or revoked; ask the queue's operator for one")
    request.state.who = identity.name
    return identity


Caller = Annotated[Identity, Depends(current_caller)]


def require_role(identity: Identity, role: Role, action: str) -> None:
    if identity.role != role:
        raise Forbidden(
            f"only a {role} token may {action}; this token ({identity.name}) is a {identity.role}"
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
