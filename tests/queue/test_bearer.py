"""The one way a bearer token is held (`RenewedBearer`): renewed when due, once more after a 401 and
never in a loop, one renewal for many waiting requests; and the one reader of an OAuth refusal."""

from __future__ import annotations

import asyncio

import httpx

from reviewer.queue.bearer import Renewal, RenewedBearer, oauth_refusal

TOKEN_URL = "https://provider.test/token"


class CountedBearer(RenewedBearer):
    """Tokens `t1`, `t2`, ... from the provider's answers; `due` until the first is got."""

    def __init__(self) -> None:
        super().__init__()
        self.current: str | None = None
        self.renewals = 0

    def token(self) -> str | None:
        return self.current

    def due(self) -> bool:
        return self.current is None

    def renewal(self) -> Renewal:
        answer = yield httpx.Request("POST", TOKEN_URL)
        self.renewals += 1
        self.current = answer.json()["access_token"]


class Provider:
    """A token endpoint and an API behind it that takes only the tokens in `taken`."""

    def __init__(self, taken: set[str]) -> None:
        self.issued = 0
        self.taken = taken
        self.seen: list[str] = []

    def __call__(self, request: httpx.Request) -> httpx.Response:
        if str(request.url) == TOKEN_URL:
            self.issued += 1
            return httpx.Response(200, json={"access_token": f"t{self.issued}"})
        self.seen.append(request.headers["authorization"])
        return httpx.Response(200 if request.headers["authorization"].split()[-1] in self.taken else 401)


def test_a_kept_token_refused_is_renewed_once_and_not_in_a_loop() -> None:
    provider, auth = Provider(taken={"t1", "t2"}), CountedBearer()
    with httpx.Client(transport=httpx.MockTransport(provider), auth=auth) as client:
        assert client.get("https://api.test/a").status_code == 200
        provider.taken = {"t2"}  # the API stops taking t1
        assert client.get("https://api.test/b").status_code == 200
        provider.taken = set()  # and then takes nothing
        assert client.get("https://api.test/c").status_code == 401
    assert auth.renewals == 3
    assert provider.seen == ["Bearer t1", "Bearer t1", "Bearer t2", "Bearer t2", "Bearer t3"]


def test_requests_waiting_on_one_renewal_share_it() -> None:
    provider, auth = Provider(taken={"t1"}), CountedBearer()

    async def many() -> list[int]:
        async with httpx.AsyncClient(transport=httpx.MockTransport(provider), auth=auth) as client:
            answers = await asyncio.gather(*(client.get(f"https://api.test/{n}") for n in range(8)))
        return [answer.status_code for answer in answers]

    assert asyncio.run(many()) == [200] * 8
    assert auth.renewals == 1 and provider.issued == 1


def test_a_refusal_says_its_code_and_a_description_made_safe_never_more() -> None:
    answer = httpx.Response(
        400,
        json={
            "error": "invalid_grant",
            "error_description": "expired\x1b[2J[red]x[/red]",
            "refresh_token": "r-secret",
        },
    )
    refusal = oauth_refusal(answer)
    assert refusal.code == "invalid_grant"
    assert "\x1b" not in refusal.words() and "r-secret" not in refusal.words()
    assert refusal.words().startswith("invalid_grant: expired")
    hostile = oauth_refusal(httpx.Response(401, json={"error": "bad\x1b[31m code"}))
    assert hostile.code is None and hostile.words() == "HTTP 401"
    assert oauth_refusal(httpx.Response(502, text="<html>gateway</html>")).words() == "HTTP 502"
