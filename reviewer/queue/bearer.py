"""A bearer token held by an `httpx.Auth`: kept until shortly before it ends, renewed then, and renewed
once more when the server refuses it (401). The queue's sign-in through an identity provider
(`reviewer.queue.sign_in.RenewingAuth`) and an API's OAuth 2.0 client credentials
(`reviewer.agent.request_auth.OAuth2ClientCredentials`) are two ways to get the token and one way to hold
it. Also the one reader of an OAuth error answer (RFC 6749 section 5.2).
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncGenerator, Generator
from dataclasses import dataclass

import httpx

from reviewer.plan.sanitize import clip, safe_text

Renewal = Generator[httpx.Request, httpx.Response, None]
"""The requests that get a new token, each sent with the answer to the one before (its body read)."""


class RenewedBearer(httpx.Auth):
    """A subclass says what the token is (`token`), when it is due (`due`), and how a new one is got
    (`renewal`). One renewal at a time across an async client's requests: a request that waited for
    another's renewal uses the token it brought, and a provider that rotates refresh tokens never sees
    one used twice."""

    def __init__(self) -> None:
        self._renewing = asyncio.Lock()

    def token(self) -> str | None:
        raise NotImplementedError

    def due(self) -> bool:
        raise NotImplementedError

    def renewal(self) -> Renewal:
        raise NotImplementedError

    def _authorized(self, request: httpx.Request) -> httpx.Request:
        request.headers["Authorization"] = f"Bearer {self.token()}"
        return request

    def sync_auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        renew = self.due()
        while True:
            if renew:
                steps, answer = self.renewal(), None
                while True:
                    try:
                        step = steps.send(answer)  # type: ignore[arg-type]  # None starts it
                    except StopIteration:
                        break
                    answer = yield step
                    answer.read()
            response = yield self._authorized(request)
            if response.status_code != 401 or renew:
                return
            renew = True  # a kept token the server no longer takes: one new one, once

    async def async_auth_flow(self, request: httpx.Request) -> AsyncGenerator[httpx.Request, httpx.Response]:
        renew = self.due()
        used = self.token()
        while True:
            if renew:
                async with self._renewing:
                    if self.token() == used:  # nobody renewed it while this request waited
                        steps, answer = self.renewal(), None
                        while True:
                            try:
                                step = steps.send(answer)  # type: ignore[arg-type]  # None starts it
                            except StopIteration:
                                break
                            answer = yield step
                            await answer.aread()
            used = self.token()
            response = yield self._authorized(request)
            if response.status_code != 401 or renew:
                return
            renew = True


@dataclass(frozen=True)
class OAuthRefusal:
    """What an OAuth endpoint's refusal says: its status, the RFC 6749 error code when it is one (a short
    word of lowercase letters and underscores) and the provider's description, made safe to show."""

    status: int
    code: str | None
    description: str | None

    def words(self) -> str:
        """`invalid_grant: the refresh token expired`, or `HTTP 400` when the answer names no code."""
        return ": ".join(filter(None, [self.code or f"HTTP {self.status}", self.description]))


def oauth_refusal(answer: httpx.Response) -> OAuthRefusal:
    """The refusal in `answer`, never anything else of its body (a token it might hold)."""
    try:
        body = answer.json()
    except ValueError:
        body = None
    if not isinstance(body, dict):
        return OAuthRefusal(answer.status_code, None, None)
    code, description = body.get("error"), body.get("error_description")
    return OAuthRefusal(
        answer.status_code,
        code if isinstance(code, str) and re.fullmatch(r"[a-z_]{1,40}", code) else None,
        safe_text(clip(description, 300)) if isinstance(description, str) and description else None,
    )
