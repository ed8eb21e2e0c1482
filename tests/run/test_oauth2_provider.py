"""`--api-auth oauth2:TOKEN_URL` against a real provider (npm's oidc-provider, its client credentials
grant): the token is fetched with the client's id and secret as RFC 6749 encodes them, sent as a bearer
token an API checks at the provider (token introspection), kept across requests, and fetched again when
the API stops taking it."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

import httpx
import pytest

from reviewer.agent import OAuth2ClientCredentials, RequestAuthError
from tests.service.oidc import Provider, running_provider
from tests.serving import serving_in_thread

RUNNER_CLIENT = "ticket-runner"
RUNNER_SECRET = "r:u/n+n%er secret"
"""The provider script's confidential client: a secret with a colon, a plus, a percent and a space."""


class IntrospectingApi:
    """An API on loopback that takes a bearer token only when the provider says it is active and holds
    the scope tickets:write; `refuse` makes it turn a token away as though it had been revoked."""

    def __init__(self, issuer: str) -> None:
        self.issuer = issuer
        self.tokens_seen: list[str] = []
        self.refuse: set[str] = set()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                token = self.headers.get("Authorization", "").removeprefix("Bearer ")
                api.tokens_seen.append(token)
                status = 200 if token not in api.refuse and api.active(token) else 401
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.end_headers()
                self.wfile.write(json.dumps({"ok": status == 200}).encode())

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def active(self, token: str) -> bool:
        """The provider's word on the token (RFC 7662), asked with the resource's own credentials."""
        basic = (quote_plus(RUNNER_CLIENT), quote_plus(RUNNER_SECRET))
        answer = httpx.post(f"{self.issuer}/token/introspection", data={"token": token}, auth=basic)
        found = answer.json()
        return bool(found.get("active")) and "tickets:write" in str(found.get("scope", "")).split()


@pytest.fixture
def provider(tmp_path: Path) -> Iterator[Provider]:
    with running_provider(tmp_path) as running:
        yield running


@pytest.fixture
def api(provider: Provider) -> Iterator[IntrospectingApi]:
    served = IntrospectingApi(provider.issuer)
    with serving_in_thread(served.server):
        yield served


def send(api: IntrospectingApi, auth: OAuth2ClientCredentials, times: int) -> list[int]:
    async def run() -> list[int]:
        async with httpx.AsyncClient(base_url=api.url, auth=auth) as client:
            return [(await client.post("/v1/tickets", json={"title": "x"})).status_code for _ in range(times)]

    return asyncio.run(run())


def test_a_token_from_the_provider_opens_the_api_and_is_kept_across_requests(
    provider: Provider, api: IntrospectingApi
) -> None:
    auth = OAuth2ClientCredentials(
        f"{provider.issuer}/token", RUNNER_CLIENT, RUNNER_SECRET, scope="tickets:write"
    )
    assert send(api, auth, 3) == [200, 200, 200]
    assert len(set(api.tokens_seen)) == 1 and api.tokens_seen[0], api.tokens_seen


def test_a_token_the_api_stops_taking_is_fetched_again_once(
    provider: Provider, api: IntrospectingApi
) -> None:
    auth = OAuth2ClientCredentials(
        f"{provider.issuer}/token", RUNNER_CLIENT, RUNNER_SECRET, scope="tickets:write"
    )
    assert send(api, auth, 1) == [200]
    api.refuse.add(api.tokens_seen[0])
    assert send(api, auth, 1) == [200]
    first, refused, fresh = api.tokens_seen
    assert first == refused != fresh


def test_a_refused_client_is_a_refusal_not_a_request(provider: Provider, api: IntrospectingApi) -> None:
    """The provider turns the client away, in its own error code: nothing reaches the API."""
    auth = OAuth2ClientCredentials(f"{provider.issuer}/token", RUNNER_CLIENT, "wrong", scope="tickets:write")
    with pytest.raises(RequestAuthError, match=r"answered 401 \(invalid_client\) to the client credentials"):
        send(api, auth, 1)
    assert api.tokens_seen == []


def test_a_token_the_api_never_takes_is_fetched_again_once_not_in_a_loop(
    provider: Provider, api: IntrospectingApi
) -> None:
    """A scope the provider does not grant (it leaves it out of the token): a token just fetched that
    the API refuses is the answer; a kept one it refuses is fetched again once, and that 401 stands."""
    auth = OAuth2ClientCredentials(f"{provider.issuer}/token", RUNNER_CLIENT, RUNNER_SECRET, scope="admin")
    assert send(api, auth, 2) == [401, 401]
    first, kept, fresh = api.tokens_seen
    assert first == kept != fresh
