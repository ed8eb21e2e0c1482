"""The device authorization grant's polling, as RFC 8628 says, against a scripted token endpoint and an
injected clock: wait the interval before each poll, keep polling while `authorization_pending`, five
seconds slower after each `slow_down`, stop at `access_denied`, `expired_token` or the code's own
`expires_in`; and never print the provider's text raw."""

from __future__ import annotations

import json

import httpx
import jwt
import pytest

from reviewer.queue.messages import ProviderSignIn
from reviewer.queue.sign_in import (
    DeviceCode,
    ProviderSession,
    RenewingAuth,
    SignInFailed,
    device_sign_in,
    poll_device_grant,
)

TOKEN_ENDPOINT = "https://idp.example/token"


class Scripted:
    """A token endpoint answering from a script, and a clock that moves only when the client sleeps."""

    def __init__(self, answers: list[tuple[int, dict[str, str]]]) -> None:
        self.answers = answers
        self.now = 0.0
        self.slept: list[float] = []
        self.polled_at: list[float] = []

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds

    def handle(self, request: httpx.Request) -> httpx.Response:
        if request.url.path == "/device/auth":
            return httpx.Response(
                200,
                json={
                    "device_code": "dc",
                    "user_code": "WDJB-MJHT\x1b]0;pwned\x07",
                    "verification_uri": "https://idp.example/device",
                    "verification_uri_complete": "https://idp.example/device?user_code=WDJB-MJHT",
                    "expires_in": 60,
                },
            )
        form = dict(pair.split("=", 1) for pair in request.content.decode().split("&"))
        assert form["grant_type"] == "urn%3Aietf%3Aparams%3Aoauth%3Agrant-type%3Adevice_code"
        self.polled_at.append(self.now)
        status, body = self.answers.pop(0)
        return httpx.Response(status, content=json.dumps(body))

    def poll(self, interval: float = 5.0, expires_in: float = 600.0) -> dict[str, object]:
        code = DeviceCode("dc", "WDJB-MJHT", "https://idp.example/device", None, expires_in, interval)
        with httpx.Client(transport=httpx.MockTransport(self.handle)) as http:
            return poll_device_grant(
                http, TOKEN_ENDPOINT, "reviewer-cli", code, sleep=self.sleep, clock=lambda: self.now
            )


PENDING = (400, {"error": "authorization_pending"})
SLOW_DOWN = (400, {"error": "slow_down"})
TOKENS = (200, {"id_token": "a.b.c", "refresh_token": "r", "token_type": "Bearer"})


def test_polls_at_the_interval_while_pending_and_slows_down_by_five_seconds_each_time() -> None:
    endpoint = Scripted([PENDING, SLOW_DOWN, PENDING, SLOW_DOWN, TOKENS])
    assert endpoint.poll(interval=2)["refresh_token"] == "r"
    assert endpoint.slept == [2, 2, 7, 7, 12]
    assert endpoint.polled_at == [2, 4, 11, 18, 30]


@pytest.mark.parametrize(
    ("answer", "words"),
    [
        ((400, {"error": "access_denied"}), "the sign-in was declined at the provider"),
        ((400, {"error": "expired_token"}), "the code expired before the sign-in was finished"),
        (
            (401, {"error": "invalid_client", "error_description": "no such client"}),
            "invalid_client: no such",
        ),
    ],
)
def test_stops_at_what_ends_the_grant(answer: tuple[int, dict[str, str]], words: str) -> None:
    endpoint = Scripted([PENDING, answer])
    with pytest.raises(SignInFailed, match=words):
        endpoint.poll()
    assert len(endpoint.polled_at) == 2


def test_stops_when_the_codes_lifetime_runs_out_without_asking_again() -> None:
    endpoint = Scripted([PENDING] * 10)
    with pytest.raises(SignInFailed, match="the code expired"):
        endpoint.poll(interval=5, expires_in=12)
    assert endpoint.polled_at == [5, 10]


def test_the_default_interval_is_five_seconds_and_the_codes_printed_are_made_safe() -> None:
    endpoint = Scripted([TOKENS])
    provider = ProviderSignIn(
        issuer="https://idp.example",
        client_id="reviewer-cli",
        scopes="openid email groups offline_access",
        device_authorization_endpoint="https://idp.example/device/auth",
        token_endpoint=TOKEN_ENDPOINT,
        session_seconds=600,
    )
    printed: list[str] = []
    with httpx.Client(transport=httpx.MockTransport(endpoint.handle)) as http:
        session = device_sign_in(http, provider, printed.append, sleep=endpoint.sleep)
    assert endpoint.slept == [5.0]
    assert session.id_token == "a.b.c" and session.refresh_token == "r"
    assert "\x1b" not in "".join(printed) and "\x07" not in "".join(printed)
    assert printed[0].startswith("To sign in, open this address and enter the code WDJB-MJHT")
    assert printed[1] == "  https://idp.example/device", "the address alone: a terminal selects it whole"
    assert "a.b.c" not in repr(session)


def _session(issued: float, refresh: str) -> ProviderSession:
    token = jwt.encode(
        {"iat": int(issued), "exp": int(issued) + 300, "sub": "alice"}, "k" * 32, algorithm="HS256"
    )
    return ProviderSession("https://idp.example", "reviewer-cli", TOKEN_ENDPOINT, token, refresh, 600)


def test_a_session_another_process_renewed_is_taken_up_rather_than_renewed_again() -> None:
    """The app and a command share the token file: the second to find the session ended reads the
    file again and uses what the first stored, instead of spending the rotated refresh token twice."""
    ended, renewed_elsewhere = _session(1000, "r1"), _session(2000, "r2")
    sent: list[httpx.Request] = []

    def queue(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, json={"name": "alice@example.com", "role": "reviewer"})

    auth = RenewingAuth(ended, lambda session: None, clock=lambda: 2100.0, reload=lambda: renewed_elsewhere)
    with httpx.Client(transport=httpx.MockTransport(queue), auth=auth) as http:
        http.get("https://queue.example/v1/whoami")
    assert [request.url.path for request in sent] == ["/v1/whoami"]  # no renewal at the provider
    assert sent[0].headers["Authorization"] == f"Bearer {renewed_elsewhere.id_token}"


def test_a_session_file_whose_identity_token_cannot_be_read_is_refused_in_words(tmp_path) -> None:
    from reviewer.queue.config import TokenFileUnsafe, read_credential, write_session_file

    path = write_session_file(_session(1000, "r1"), tmp_path / "reviewer" / "token")
    path.write_text(path.read_text().replace('"id_token":"', '"id_token":"garbage.'))
    with pytest.raises(TokenFileUnsafe, match="does not hold a sign-in: run `reviewer login` again"):
        read_credential(path)


def test_a_session_s_identity_token_is_decoded_once_however_many_requests_ask_whether_it_is_due(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every request asks whether the session is due for renewal: its token is read once, not twice
    a request."""
    session = _session(1000, "r1")
    decoded: list[str] = []
    decode = jwt.decode

    def counting(token: str, *args: object, **options: object) -> object:
        decoded.append(token)
        return decode(token, *args, **options)  # type: ignore[arg-type]

    monkeypatch.setattr(jwt, "decode", counting)
    auth = RenewingAuth(session, lambda session: None, clock=lambda: 1100.0)
    transport = httpx.MockTransport(lambda request: httpx.Response(200, json={"name": "alice"}))
    with httpx.Client(transport=transport, auth=auth) as http:
        for _ in range(5):
            http.get("https://queue.example/v1/whoami")
    assert decoded == [session.id_token]
