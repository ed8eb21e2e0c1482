"""Reviewers signed in by the team's OpenID provider: its discovery document and keys, and the check
of an identity token that names the person.

An identity token is accepted only as OpenID Connect Core and RFC 8725 say: signed by a key of the
provider's JWKS (cached, fetched again when a token names a key it does not hold, at most every
`KEY_REFRESH_COOLDOWN` seconds), with an algorithm of `ALGORITHMS` (never `none`, never an HMAC whose
secret would be the public key), from this issuer, for this client, within its times and within the
queue's own session length, whatever lifetime the provider gave it. PyJWT does the JOSE work.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final
from urllib.parse import urlsplit

import httpx
import jwt

from reviewer.plan.hosts import is_loopback
from reviewer.signing.sshsig import REVIEWER_NAME_PATTERN

ALGORITHMS: Final = ("RS256", "RS384", "RS512", "PS256", "PS384", "PS512", "ES256", "ES384", "ES512", "EdDSA")
"""Public-key signatures only: an HMAC token (`HS256`) would be checked with a secret, and the only
thing the queue has to use as one is the provider's public key, which anyone can read."""
DEFAULT_SESSION: Final = 600.0
"""How long a sign-in decides before it is renewed: ten minutes after the provider issued the token."""
DEFAULT_SCOPES: Final = "openid email groups offline_access"
LEEWAY: Final = 30.0
"""Seconds of clock difference allowed between the provider and the queue on `exp`, `nbf` and `iat`."""
KEY_REFRESH_COOLDOWN: Final = 30.0
"""A token naming an unknown key fetches the JWKS again at most this often, so forged key ids cannot
make the queue hammer the provider."""
MAX_ID_TOKEN_CHARS: Final = 16384
PROVIDER_NAME: Final = re.compile(REVIEWER_NAME_PATTERN)
"""The names a provider's person may decide under (an email address, usually): those a signed
decision may name, plain ASCII, so no look-alike letter or control hides in the author of a decision."""


class ProviderUnusable(Exception):
    """The provider's discovery document or keys cannot be used; the message says what to check."""


class TokenRefused(Exception):
    """An identity token the queue does not accept; the message says why, never the token."""


@dataclass(frozen=True)
class ProviderSettings:
    """`reviewer serve --oidc-*`: which provider, which client, who counts as a reviewer."""

    issuer: str
    client_id: str
    reviewers_group: str
    groups_claim: str = "groups"
    name_claim: str = "email"
    scopes: str = DEFAULT_SCOPES
    session: float = DEFAULT_SESSION


@dataclass(frozen=True)
class Endpoints:
    """What the discovery document says, of what the queue and `reviewer login` use."""

    issuer: str
    jwks_uri: str
    token_endpoint: str
    device_authorization_endpoint: str | None


@dataclass(frozen=True)
class ProviderPerson:
    """The person an accepted identity token names."""

    issuer: str
    subject: str
    name: str
    email: str | None
    reviewer: bool
    """Whether the groups claim holds the reviewers' group."""
    issued_at: float
    session_ends_at: float

    @property
    def principal(self) -> str:
        return f"{self.issuer}#{self.subject}"


def check_issuer_url(url: str, what: str = "the issuer") -> str:
    """The issuer (or one of its endpoints, `what` naming it) as given, refused unless it is https (or
    http to loopback, for a provider on this host): keys fetched in clear could be anyone's."""
    parts = urlsplit(url)
    if parts.scheme != "https" and not (parts.scheme == "http" and is_loopback(parts.hostname)):
        raise ProviderUnusable(f"{what} {url!r} must be an https:// URL (http:// only to loopback)")
    if parts.query or parts.fragment or parts.username:
        raise ProviderUnusable(f"{what} {url!r} must not carry a query, fragment or user")
    return url


def discover(issuer: str, client: httpx.Client) -> Endpoints:
    """The provider's endpoints from `ISSUER/.well-known/openid-configuration`, whose `issuer` must be
    the one configured, character for character (OpenID Connect Discovery 4.3)."""
    check_issuer_url(issuer)
    where = issuer.rstrip("/") + "/.well-known/openid-configuration"
    try:
        answer = client.get(where)
        answer.raise_for_status()
        document = answer.json()
    except (httpx.HTTPError, ValueError) as error:
        raise ProviderUnusable(f"cannot read the provider's discovery document at {where}: {error}") from None
    if not isinstance(document, dict):
        raise ProviderUnusable(f"{where} is not a discovery document")
    if document.get("issuer") != issuer:
        raise ProviderUnusable(
            f"{where} names the issuer {document.get('issuer')!r}, not {issuer!r}: give --oidc-issuer "
            "exactly as the provider writes it (a trailing slash counts)"
        )
    for needed in ("jwks_uri", "token_endpoint"):
        if not isinstance(document.get(needed), str):
            raise ProviderUnusable(f"{where} has no {needed}")
    device = document.get("device_authorization_endpoint")
    for name in ("jwks_uri", "token_endpoint", "device_authorization_endpoint"):
        if isinstance(document.get(name), str):
            check_issuer_url(document[name], f"the provider's {name}")
    return Endpoints(
        issuer, document["jwks_uri"], document["token_endpoint"], device if isinstance(device, str) else None
    )


class _ProviderKeys(jwt.PyJWKClient):
    """The provider's key set, with the `alg` each key declares as published, by key id: PyJWK's
    `algorithm_name` guesses RS256 for an RSA key without one, which would refuse the PS256 the key
    also serves. Kept from each fetch (the one way PyJWT fills its cache), so it is the cached set's."""

    def __init__(self, uri: str, **options: Any) -> None:
        super().__init__(uri, **options)
        self.declared: dict[str | None, str | None] = {}

    def fetch_data(self) -> Any:
        data = super().fetch_data()
        keys = data.get("keys") if isinstance(data, dict) else None
        declared: dict[str | None, str | None] = {}
        for key in keys or []:  # the signing keys PyJWT picks from, the first of a key id as it does
            if isinstance(key, dict) and key.get("use") in (None, "sig"):
                declared.setdefault(key.get("kid"), key.get("alg"))
        self.declared = declared
        return data


class IdentityTokens:
    """Checks identity tokens for one provider and client; thread-safe (PyJWKClient locks its cache)."""

    def __init__(
        self,
        settings: ProviderSettings,
        endpoints: Endpoints,
        clock: Callable[[], float],
        key_refresh_cooldown: float = KEY_REFRESH_COOLDOWN,
    ) -> None:
        self.settings = settings
        self.endpoints = endpoints
        self.clock = clock
        self.keys = _ProviderKeys(
            endpoints.jwks_uri, lifespan=3600, timeout=10, cooldown_duration=key_refresh_cooldown
        )

    def reads(self, token: str) -> bool:
        """Whether `token` is for this check to read: three base64url parts, what a provider's
        identity token is (and a minted token never is)."""
        return token.count(".") == 2 and len(token) <= MAX_ID_TOKEN_CHARS

    def check(self, token: str) -> ProviderPerson:
        """The person `token` names, or `TokenRefused` saying why it is not accepted."""
        if len(token) > MAX_ID_TOKEN_CHARS:
            raise TokenRefused("the identity token is longer than any the queue accepts")
        try:
            header = jwt.get_unverified_header(token)
        except jwt.InvalidTokenError:
            raise TokenRefused("this is neither a token of the queue's nor an identity token") from None
        algorithm = header.get("alg")
        if algorithm not in ALGORITHMS:
            raise TokenRefused(
                f"identity tokens signed with {str(algorithm)[:20]!r} are refused; the queue accepts "
                "the provider's public-key signatures only"
            )
        if header.get("typ") not in (None, "JWT", "jwt"):
            raise TokenRefused("this is not an identity token (its type is not JWT)")
        kid = header.get("kid")
        try:
            key = self.keys.get_signing_key(kid if isinstance(kid, str) else None)  # type: ignore[arg-type]
        except jwt.PyJWKClientConnectionError as error:
            raise TokenRefused(f"the provider's keys cannot be read now ({error}); try again") from None
        except jwt.PyJWKClientError:
            raise TokenRefused("the identity token names a key the provider does not publish") from None
        declared = self.keys.declared.get(key.key_id)
        if declared is not None and declared != algorithm:
            raise TokenRefused(f"the provider's key is for {declared}, and the token says {algorithm}")
        now = self.clock()
        try:
            claims: dict[str, Any] = jwt.decode(
                token,
                key.key,
                algorithms=[algorithm],
                audience=self.settings.client_id,
                issuer=self.settings.issuer,
                leeway=LEEWAY,
                options={"require": ["iss", "sub", "aud", "exp", "iat"]},
            )
        except jwt.ExpiredSignatureError:
            raise TokenRefused("the identity token expired: sign in again (`reviewer login`)") from None
        except jwt.ImmatureSignatureError:
            raise TokenRefused("the identity token is not valid yet") from None
        except jwt.InvalidAudienceError:
            raise TokenRefused("the identity token was issued for another client") from None
        except jwt.InvalidIssuerError:
            raise TokenRefused("the identity token was issued by another provider") from None
        except jwt.InvalidSignatureError:
            raise TokenRefused("the identity token's signature does not verify") from None
        except jwt.InvalidTokenError as error:
            raise TokenRefused(f"the identity token is not valid: {error}") from None
        except (jwt.PyJWTError, TypeError, ValueError):  # an algorithm that does not fit the key's type
            raise TokenRefused(f"the identity token's {algorithm} does not fit the provider's key") from None
        return self._person(claims, now)

    def _person(self, claims: dict[str, Any], now: float) -> ProviderPerson:
        audiences = claims["aud"] if isinstance(claims["aud"], list) else [claims["aud"]]
        if len(audiences) > 1 and claims.get("azp") != self.settings.client_id:
            raise TokenRefused("the identity token was issued to another party (azp)")
        issued_at = float(claims["iat"])  # PyJWT refused one in the future
        session_ends_at = min(float(claims["exp"]), issued_at + self.settings.session)
        if session_ends_at + LEEWAY <= now:
            raise TokenRefused("the session ended: the client renews it with its refresh token")
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject or not subject.isprintable():
            raise TokenRefused("the identity token has no usable subject")
        name_claim = self.settings.name_claim
        name = claims.get(name_claim)
        if not isinstance(name, str) or PROVIDER_NAME.fullmatch(name) is None:
            raise TokenRefused(
                f"the identity token's {name_claim!r} claim is missing or not a plain name the "
                "queue can show; ask for the scope that carries it"
            )
        if name_claim == "email" and claims.get("email_verified") is not True:
            raise TokenRefused("the provider has not verified this email address")
        email = claims.get("email")
        return ProviderPerson(
            issuer=claims["iss"],
            subject=subject,
            name=name,
            email=email if isinstance(email, str) else None,
            reviewer=self.settings.reviewers_group in groups_of(claims.get(self.settings.groups_claim)),
            issued_at=issued_at,
            session_ends_at=session_ends_at,
        )


def groups_of(claim: object) -> list[str]:
    """A groups claim as providers write it: a list of names, or one name (Google's `hd`)."""
    if isinstance(claim, str):
        return [claim]
    if isinstance(claim, list):
        return [group for group in claim if isinstance(group, str)]
    return []
