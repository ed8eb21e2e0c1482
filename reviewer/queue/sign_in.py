"""Signing a reviewer in through the team's OpenID provider: the device authorization grant (RFC 8628)
that `reviewer login` runs, the session it stores, and its renewal with the refresh token.

The grant works over SSH and from a phone: the terminal shows a URL and a short code, the person
signs in at the provider in any browser, and meanwhile the client polls the provider's token
endpoint at the interval the grant gives (five seconds unless it says otherwise), five seconds slower
after each `slow_down`, until the code's `expires_in` runs out. What it receives (the identity token
the queue checks, and the refresh token that renews it) is stored in the same 0600 file as a minted
token. `RenewingAuth` sends the identity token and, when the queue's session has ended, renews it
at the provider first, transparently: a person the provider no longer signs in is then refused.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from functools import cached_property
from typing import Any, Final

import httpx
import jwt

from reviewer import json_text
from reviewer.queue.bearer import Renewal, RenewedBearer, oauth_refusal
from reviewer.queue.messages import ProviderSignIn
from reviewer.queue.refusals import QueueError

DEVICE_CODE_GRANT: Final = "urn:ietf:params:oauth:grant-type:device_code"
DEFAULT_INTERVAL: Final = 5.0
"""RFC 8628 3.2: the poll interval when the provider names none."""
SLOW_DOWN_STEP: Final = 5.0
"""RFC 8628 3.5: how much longer to wait after each `slow_down`."""
RENEW_BEFORE: Final = 30.0
"""Renew this many seconds before the session ends, so a request in flight does not meet its end."""
SESSION_FORMAT: Final = "reviewer.oidc-session/v1"


class SignInFailed(QueueError):
    """The sign-in or its renewal did not give a session; the message says what to do."""


@dataclass(frozen=True)
class ProviderSession:
    """What the token file holds for a reviewer signed in through the provider."""

    issuer: str
    client_id: str
    token_endpoint: str
    id_token: str
    refresh_token: str | None
    session_seconds: float
    """The queue's longest session; the client renews before it ends, or before the token's `exp`."""

    def ends_at(self) -> float:
        """When the queue stops accepting the identity token: its `exp`, or `iat` plus the queue's
        session, whichever is first. Read without checking the signature: the queue checks it."""
        return self._ends_at

    @cached_property
    def _ends_at(self) -> float:
        """`ends_at`, the token decoded once per session (each request asks whether it is due)."""
        claims = jwt.decode(self.id_token, options={"verify_signature": False})
        issued = float(claims.get("iat", 0))
        return min(float(claims.get("exp", 0)), issued + self.session_seconds)

    def to_json(self) -> bytes:
        return json.dumps({"format": SESSION_FORMAT, **asdict(self)}, separators=(",", ":")).encode()

    @classmethod
    def from_json(cls, text: str) -> ProviderSession:
        document = json_text.loads(text)
        if not isinstance(document, dict) or document.pop("format", None) != SESSION_FORMAT:
            raise ValueError("not a sign-in session")
        session = cls(**document)
        try:
            session.ends_at()
        except (jwt.InvalidTokenError, TypeError, ValueError):
            raise ValueError("the stored identity token cannot be read") from None
        return session

    def __repr__(self) -> str:
        return f"ProviderSession(issuer={self.issuer!r}, client_id={self.client_id!r})"


@dataclass(frozen=True)
class DeviceCode:
    """The provider's answer to the device authorization request (RFC 8628 3.2)."""

    device_code: str
    user_code: str
    verification_uri: str
    verification_uri_complete: str | None
    expires_in: float
    interval: float


def start_device_grant(
    http: httpx.Client, device_authorization_endpoint: str, client_id: str, scopes: str
) -> DeviceCode:
    answer = _post(http, device_authorization_endpoint, {"client_id": client_id, "scope": scopes})
    if answer.status_code != 200:
        raise SignInFailed(f"the provider refused to start the sign-in: {oauth_refusal(answer).words()}")
    body = _json(answer)
    try:
        return DeviceCode(
            device_code=str(body["device_code"]),
            user_code=str(body["user_code"]),
            verification_uri=str(body.get("verification_uri") or body["verification_url"]),
            verification_uri_complete=body.get("verification_uri_complete"),
            expires_in=float(body["expires_in"]),
            interval=float(body.get("interval", DEFAULT_INTERVAL)),
        )
    except (KeyError, TypeError, ValueError):
        raise SignInFailed(
            "the provider's device authorization answer lacks a field RFC 8628 requires"
        ) from None


def poll_device_grant(
    http: httpx.Client,
    token_endpoint: str,
    client_id: str,
    code: DeviceCode,
    *,
    sleep: Callable[[float], None] = time.sleep,
    clock: Callable[[], float] = time.monotonic,
) -> dict[str, Any]:
    """Poll until the person finished at the provider (RFC 8628 3.4, 3.5): the token response."""
    deadline = clock() + code.expires_in
    interval = max(code.interval, 1.0)
    while True:
        sleep(interval)
        if clock() > deadline:
            raise SignInFailed("the code expired before the sign-in was finished; run `reviewer login` again")
        answer = _post(
            http,
            token_endpoint,
            {"grant_type": DEVICE_CODE_GRANT, "device_code": code.device_code, "client_id": client_id},
        )
        if answer.status_code == 200:
            return _json(answer)
        error = _json(answer).get("error") if _is_json(answer) else None
        if error == "authorization_pending":
            continue
        if error == "slow_down":
            interval += SLOW_DOWN_STEP
            continue
        if error == "access_denied":
            raise SignInFailed("the sign-in was declined at the provider")
        if error == "expired_token":
            raise SignInFailed("the code expired before the sign-in was finished; run `reviewer login` again")
        raise SignInFailed(f"the provider refused the sign-in: {oauth_refusal(answer).words()}")


def session_from(
    tokens: dict[str, Any],
    issuer: str,
    client_id: str,
    token_endpoint: str,
    session_seconds: float,
    previous: ProviderSession | None = None,
) -> ProviderSession:
    """The session a token response gives; a renewal that returns no new refresh token keeps the old."""
    id_token = tokens.get("id_token")
    if not isinstance(id_token, str):
        raise SignInFailed("the provider gave no identity token: the scopes must include openid")
    refresh = tokens.get("refresh_token")
    if not isinstance(refresh, str):
        refresh = previous.refresh_token if previous is not None else None
    return ProviderSession(issuer, client_id, token_endpoint, id_token, refresh, session_seconds)


def renewal_request(session: ProviderSession) -> httpx.Request:
    if session.refresh_token is None:
        raise SignInFailed("the session ended and the provider gave no refresh token: run `reviewer login`")
    return httpx.Request(
        "POST",
        session.token_endpoint,
        data={
            "grant_type": "refresh_token",
            "refresh_token": session.refresh_token,
            "client_id": session.client_id,
        },
        headers={"Accept": "application/json"},
    )


def renewed(session: ProviderSession, answer: httpx.Response) -> ProviderSession:
    if answer.status_code != 200:
        refusal = oauth_refusal(answer).words()
        raise SignInFailed(f"the provider did not renew the session ({refusal}); run `reviewer login` again")
    return session_from(
        _json(answer),
        session.issuer,
        session.client_id,
        session.token_endpoint,
        session.session_seconds,
        session,
    )


class RenewingAuth(RenewedBearer):
    """The identity token as the bearer credential, renewed at the provider before the queue's
    session ends or after the queue refused it, and stored again (`store`) each time. One renewal
    at a time: a provider that rotates refresh tokens treats a second use of one as theft."""

    def __init__(
        self,
        session: ProviderSession,
        store: Callable[[ProviderSession], object],
        clock: Callable[[], float] = time.time,
        reload: Callable[[], ProviderSession | None] = lambda: None,
    ) -> None:
        super().__init__()
        self.session = session
        self.store = store
        self.clock = clock
        self.reload = reload
        """The session as stored now: another process (the app, a second command) may have renewed
        it, and a rotated refresh token used twice makes a provider end the whole sign-in."""

    def token(self) -> str:
        return self.session.id_token

    def due(self) -> bool:
        if self.clock() < self.session.ends_at() - RENEW_BEFORE:
            return False
        stored = self.reload()
        if stored is None or stored.id_token == self.session.id_token:
            return True
        self.session = stored
        return self.clock() >= stored.ends_at() - RENEW_BEFORE

    def renewal(self) -> Renewal:
        answer = yield renewal_request(self.session)
        self.session = renewed(self.session, answer)
        self.store(self.session)


def device_sign_in(
    http: httpx.Client,
    provider: ProviderSignIn,
    say: Callable[[str], None],
    *,
    sleep: Callable[[float], None] = time.sleep,
) -> ProviderSession:
    """`reviewer login` on a queue that signs reviewers in through `provider`: start the grant, tell
    the person where to go and which code to enter, and wait for the session."""
    from reviewer.plan.sanitize import safe_text

    if provider.device_authorization_endpoint is None:
        raise SignInFailed(
            f"the provider {provider.issuer} offers no device authorization grant; enable it for "
            f"the client {provider.client_id}"
        )
    code = start_device_grant(
        http, provider.device_authorization_endpoint, provider.client_id, provider.scopes
    )
    # Each address alone on its line, nothing after it: what a terminal selects by a double click
    # (or a phone's SSH app by a tap) is the address and no comma or bracket.
    say(f"To sign in, open this address and enter the code {safe_text(code.user_code)}:")
    say(f"  {safe_text(code.verification_uri)}")
    if code.verification_uri_complete:
        say("or open this one, which holds the code:")
        say(f"  {safe_text(code.verification_uri_complete)}")
    say(f"Waiting for the sign-in at {safe_text(provider.issuer)} (the code works {code.expires_in:g} s) ...")
    tokens = poll_device_grant(http, provider.token_endpoint, provider.client_id, code, sleep=sleep)
    return session_from(
        tokens, provider.issuer, provider.client_id, provider.token_endpoint, provider.session_seconds
    )


def _post(http: httpx.Client, url: str, form: dict[str, str]) -> httpx.Response:
    try:
        return http.post(url, data=form, headers={"Accept": "application/json"})
    except httpx.HTTPError as error:
        raise SignInFailed(f"cannot reach the identity provider at {url}: {error}") from None


def _is_json(answer: httpx.Response) -> bool:
    try:
        return isinstance(answer.json(), dict)
    except ValueError:
        return False


def _json(answer: httpx.Response) -> dict[str, Any]:
    if not _is_json(answer):
        raise SignInFailed(f"the provider answered {answer.status_code} without a JSON object")
    body: dict[str, Any] = answer.json()
    return body


__all__ = [
    "DeviceCode",
    "ProviderSession",
    "RenewingAuth",
    "SignInFailed",
    "poll_device_grant",
    "session_from",
    "start_device_grant",
]
