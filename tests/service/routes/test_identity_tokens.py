"""The queue's check of identity tokens, in this process against a JWKS served on loopback: a key the
provider rotated in is fetched when a token first names it (the cached set is used otherwise, and a
forged key id fetches at most once per cooldown); a token not valid yet is refused."""

from __future__ import annotations

import http.server
import json
import time
from collections.abc import Iterator
from pathlib import Path

import jwt
import pytest
from cryptography.hazmat.primitives.asymmetric import rsa

from reviewer.service.oidc import Endpoints, IdentityTokens, ProviderSettings, TokenRefused
from tests.serving import serve_in_thread, stop_serving

ISSUER = "https://idp.example"


class Keys:
    """A JWKS endpoint whose key set the test changes, counting the fetches."""

    def __init__(self, folder: Path) -> None:
        self.jwks: dict[str, list[dict[str, str]]] = {"keys": []}
        self.fetches = 0
        keys = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                keys.fetches += 1
                body = json.dumps(keys.jwks).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: object) -> None:
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/jwks"
        serve_in_thread(self.server)

    def add(self, kid: str) -> rsa.RSAPrivateKey:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        jwk = jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key(), as_dict=True)
        jwk.update(kid=kid, use="sig", alg="RS256")
        self.jwks["keys"].append(jwk)
        return key


@pytest.fixture
def keys(tmp_path: Path) -> Iterator[Keys]:
    served = Keys(tmp_path)
    yield served
    stop_serving(served.server)
    served.server.server_close()


def checker(keys: Keys, cooldown: float) -> IdentityTokens:
    settings = ProviderSettings(issuer=ISSUER, client_id="reviewer-cli", reviewers_group="reviewers")
    endpoints = Endpoints(ISSUER, keys.url, f"{ISSUER}/token", None)
    return IdentityTokens(settings, endpoints, time.time, key_refresh_cooldown=cooldown)


def token(key: rsa.RSAPrivateKey, kid: str, **claims: object) -> str:
    now = int(time.time())
    body = {
        "iss": ISSUER,
        "aud": "reviewer-cli",
        "sub": "alice",
        "email": "alice@example.com",
        "email_verified": True,
    }
    body |= {"groups": ["reviewers"], "iat": now, "exp": now + 300, **claims}
    return jwt.encode(body, key, algorithm="RS256", headers={"kid": kid})


def test_a_key_rotated_in_is_fetched_when_a_token_first_names_it(keys: Keys) -> None:
    first = keys.add("2026-11")
    tokens = checker(keys, cooldown=0)
    assert tokens.check(token(first, "2026-11")).name == "alice@example.com"
    assert tokens.check(token(first, "2026-11")).reviewer
    assert keys.fetches == 1  # the set is cached
    second = keys.add("2026-12")
    assert tokens.check(token(second, "2026-12")).subject == "alice"
    assert keys.fetches == 2


def test_forged_key_ids_fetch_the_set_at_most_once_per_cooldown(keys: Keys) -> None:
    first = keys.add("2026-11")
    tokens = checker(keys, cooldown=3600)
    tokens.check(token(first, "2026-11"))
    forger = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    for attempt in range(5):
        with pytest.raises(TokenRefused, match="names a key the provider does not publish"):
            tokens.check(token(forger, f"forged-{attempt}"))
    assert keys.fetches == 1


def test_a_token_not_valid_yet_is_refused(keys: Keys) -> None:
    key = keys.add("2026-11")
    with pytest.raises(TokenRefused, match="not valid yet"):
        checker(keys, cooldown=0).check(token(key, "2026-11", nbf=int(time.time()) + 3600))


def test_an_algorithm_that_does_not_fit_the_key_is_refused_not_a_server_error(keys: Keys) -> None:
    """ES256 naming an RSA key that publishes no `alg`: PyJWT's key type error is a refusal."""
    from cryptography.hazmat.primitives.asymmetric import ec

    keys.add("2026-11")
    del keys.jwks["keys"][0]["alg"]
    now = int(time.time())
    claims = {"iss": ISSUER, "aud": "reviewer-cli", "sub": "mallory", "iat": now, "exp": now + 300}
    forged = jwt.encode(claims, ec.generate_private_key(ec.SECP256R1()), "ES256", headers={"kid": "2026-11"})
    with pytest.raises(TokenRefused, match="does not fit|signature"):
        checker(keys, cooldown=0).check(forged)


def test_an_email_the_provider_does_not_say_it_verified_is_no_name(keys: Keys) -> None:
    key = keys.add("2026-11")
    unverified = token(key, "2026-11", email_verified=None)
    with pytest.raises(TokenRefused, match="not verified"):
        checker(keys, cooldown=0).check(unverified)


@pytest.mark.parametrize("endpoint", ["jwks_uri", "token_endpoint", "device_authorization_endpoint"])
def test_a_provider_that_serves_its_keys_or_tokens_in_clear_is_refused(endpoint: str) -> None:
    import httpx

    from reviewer.service.oidc import ProviderUnusable, discover

    document = {
        "issuer": ISSUER,
        "jwks_uri": f"{ISSUER}/jwks",
        "token_endpoint": f"{ISSUER}/token",
        "device_authorization_endpoint": f"{ISSUER}/device",
        endpoint: "http://idp.example/in-clear",
    }
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json=document))
    with httpx.Client(transport=transport) as client, pytest.raises(ProviderUnusable, match=endpoint):
        discover(ISSUER, client)


def test_a_token_issued_in_the_future_is_refused(keys: Keys) -> None:
    key = keys.add("2026-11")
    later = int(time.time()) + 3600
    with pytest.raises(TokenRefused, match="not valid yet"):
        checker(keys, cooldown=0).check(token(key, "2026-11", iat=later, exp=later + 300))


def test_a_token_issued_longer_ago_than_a_session_lasts_is_refused(keys: Keys) -> None:
    """Not expired by its `exp`, but issued before the longest session the queue allows began."""
    key = keys.add("2026-11")
    tokens = checker(keys, cooldown=0)
    now = int(time.time())
    long_ago = now - int(tokens.settings.session) - 120
    with pytest.raises(TokenRefused, match="the session ended"):
        tokens.check(token(key, "2026-11", iat=long_ago, exp=now + 300))


def test_a_token_signed_with_another_algorithm_than_its_key_declares_is_refused(keys: Keys) -> None:
    """The key's `alg` as published decides; a key that declares none serves any of its type's."""
    key = keys.add("2026-11")
    now = int(time.time())
    claims = {
        "iss": ISSUER,
        "aud": "reviewer-cli",
        "sub": "alice",
        "email": "alice@example.com",
        "email_verified": True,
        "groups": ["reviewers"],
        "iat": now,
        "exp": now + 300,
    }
    pss = jwt.encode(claims, key, algorithm="PS256", headers={"kid": "2026-11"})
    with pytest.raises(TokenRefused, match="the provider's key is for RS256, and the token says PS256"):
        checker(keys, cooldown=0).check(pss)
    del keys.jwks["keys"][0]["alg"]
    assert checker(keys, cooldown=0).check(pss).subject == "alice"


def test_an_encryption_key_under_the_signing_keys_id_does_not_decide_its_algorithm(keys: Keys) -> None:
    """A provider publishes an encryption key (`use: enc`, RSA-OAEP) under its signing key's id: the
    signing key's own `alg` decides, so its RS256 tokens are taken."""
    key = keys.add("2026-11")
    encryption = dict(keys.jwks["keys"][0], use="enc", alg="RSA-OAEP")
    keys.jwks["keys"].append(encryption)
    assert checker(keys, cooldown=0).check(token(key, "2026-11")).subject == "alice"
