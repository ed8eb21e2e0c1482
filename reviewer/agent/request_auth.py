"""Credentials applied to each request as it is sent, for APIs whose credential is not a static header:
AWS Signature Version 4 (every request signed over its method, path, query, headers and exact body) and
OAuth 2.0 client credentials (a short-lived token fetched, cached and renewed).

Both are `httpx.Auth`: give one to the client an agent's gate, `reviewer run` or an executor sends with
(`httpx.AsyncClient(base_url=..., auth=AwsSigV4Auth("s3", "eu-west-1"))`), and every request, reads,
dry runs and the approved real run alike, is signed where it leaves, by the process that holds the
secret. Whatever credential the request already carried (an agent's own `Authorization`, an SDK's
`X-Amz-Date`) is dropped first: only the holder's signature goes out.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Generator, Iterator
from typing import Any, Final
from urllib.parse import quote_plus

import httpx

from reviewer.queue.bearer import Renewal, RenewedBearer, oauth_refusal

SIGV4_HEADERS: Final = frozenset(
    {"authorization", "x-amz-date", "x-amz-security-token", "x-amz-content-sha256"}
)
"""The headers a SigV4 signature writes: a request's own are dropped before it is signed."""
_SIGNED_AS_SENT: Final = ("content-type", "content-md5")
"""The request's headers, beyond `Host` and `x-amz-*`, the signature covers: every one is sent as signed."""
TOKEN_EARLY: Final = 30.0
"""Seconds before its stated expiry a client-credentials token is renewed, so none expires in flight."""


class RequestAuthError(httpx.RequestError):
    """The credential could not be found or fetched: the message says which and why, never a secret.
    An `httpx.RequestError`, so whatever handles a request that could not be sent handles this one."""


class AwsSigV4Auth(httpx.Auth):
    """AWS Signature Version 4 by botocore's own signer, the credentials from the standard AWS sources
    (environment, shared files, container or instance roles), refreshed as botocore refreshes them.
    `service` is the signing name (`s3`, `iam`, `sns`...); for `s3` the payload's SHA-256 is signed too,
    as S3 requires. Needs the `aws` extra (botocore)."""

    requires_request_body = True

    def __init__(self, service: str, region: str, credentials: Any = None) -> None:
        try:
            import botocore.session
        except ImportError:
            raise RequestAuthError(
                "signing with AWS Signature Version 4 needs botocore: pip install 'reviewer-gate[aws]'"
            ) from None
        self.service = service
        self.region = region
        self._credentials = credentials or botocore.session.get_session().get_credentials()
        if self._credentials is None:
            raise RequestAuthError(
                "no AWS credentials found in the standard places (AWS_ACCESS_KEY_ID and "
                "AWS_SECRET_ACCESS_KEY, AWS_PROFILE and the shared files, a container or instance role)"
            )

    def secrets(self) -> tuple[str, ...]:
        """The secret key and session token now in use: what a child must never be given."""
        frozen = self._credentials.get_frozen_credentials()
        return tuple(secret for secret in (frozen.secret_key, frozen.token) if secret)

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        from botocore.auth import S3SigV4Auth, SigV4Auth
        from botocore.awsrequest import AWSRequest

        for name in SIGV4_HEADERS:
            request.headers.pop(name, None)
        signed_headers = {
            name: value
            for name, value in request.headers.items()
            if name in _SIGNED_AS_SENT or name.startswith("x-amz-")
        }
        signed_headers["host"] = request.headers["host"]
        unsigned = AWSRequest(
            method=request.method, url=str(request.url), data=request.content, headers=signed_headers
        )
        signer = S3SigV4Auth if self.service == "s3" else SigV4Auth
        signer(self._credentials.get_frozen_credentials(), self.service, self.region).add_auth(unsigned)
        for name in SIGV4_HEADERS:
            if name in unsigned.headers:
                request.headers[name] = unsigned.headers[name]
        yield request


class OAuth2ClientCredentials(RenewedBearer):
    """OAuth 2.0's client credentials grant (RFC 6749 section 4.4): a bearer token fetched from
    `token_url` with the client's id and secret (HTTP Basic, as the RFC recommends), kept until shortly
    before it expires, and fetched again then or when the API answers 401 to it.

    The id and secret are form-encoded before Basic, as RFC 6749 section 2.3.1 says, so a secret holding
    `:`, `+`, `%` or a space reaches a provider that decodes them whole. Some providers compare them as
    sent: where encoding changes them and the provider refuses the client, they are sent once more as
    they are, and whichever form it took is kept."""

    def __init__(
        self,
        token_url: str,
        client_id: str,
        client_secret: str,
        *,
        scope: str | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        super().__init__()
        self.token_url = token_url
        self._client = (client_id, client_secret)
        self._scope = scope
        self._clock = clock
        self._token: str | None = None
        self._expires_at = 0.0
        encoded = (quote_plus(client_id), quote_plus(client_secret))
        self._forms: list[tuple[str, str]] = [encoded] if encoded == self._client else [encoded, self._client]
        """The forms of the client's credentials to try, in order; one, once a provider took it."""

    def _token_requests(self) -> Iterator[tuple[httpx.Request, tuple[str, str]]]:
        """The grant's request in each form of the credentials still to try, with that form."""
        form = {"grant_type": "client_credentials", **({"scope": self._scope} if self._scope else {})}
        for credentials in self._forms:
            request = httpx.Request("POST", self.token_url, data=form, headers={"accept": "application/json"})
            yield next(httpx.BasicAuth(*credentials).auth_flow(request)), credentials

    def _took(self, response: httpx.Response, credentials: tuple[str, str]) -> bool:
        """Whether the provider gave a token for `credentials` (kept, and that form with it); False when
        it refused the client and another form is left to try; `RequestAuthError` otherwise."""
        where = f"the token endpoint {self.token_url}"
        if response.status_code == 401 and credentials != self._forms[-1]:
            return False
        if response.status_code != 200:
            refusal = oauth_refusal(response)  # its code alone: the description is the provider's free text
            code = f" ({refusal.code})" if refusal.code else ""
            raise RequestAuthError(f"{where} answered {response.status_code}{code} to the client credentials")
        try:
            answer = response.json()
            token = answer["access_token"]
            lifetime = float(answer.get("expires_in", 300))
        except (ValueError, KeyError, TypeError):
            raise RequestAuthError(f"{where} answered no access_token") from None
        if not 0 < lifetime < 10 * 365 * 86400:  # NaN, infinite or absurd: the RFC's "SHOULD" default
            lifetime = 300.0
        if not isinstance(token, str) or not token or any(c in token for c in "\r\n\0"):
            raise RequestAuthError(f"{where} answered an access_token that is not a header value")
        self._token = token
        self._expires_at = self._clock() + max(lifetime - TOKEN_EARLY, 0.0)
        self._forms = [credentials]
        return True

    def token(self) -> str | None:
        return self._token

    def due(self) -> bool:
        return self._token is None or self._clock() >= self._expires_at

    def renewal(self) -> Renewal:
        for token_request, credentials in self._token_requests():
            token_response = yield token_request
            if self._took(token_response, credentials):
                return
