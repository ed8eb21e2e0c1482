"""The sandbox check: before a server dry run is trusted, prove on a sandbox copy of the API that the
API honours its dry-run parameter.

Most APIs drop a query parameter they do not know and perform the write, answering exactly as a dry
run would: nothing in the answer tells the two apart. So the check does what an operator would do by
hand: list a collection on the sandbox, send it a create carrying the dry-run parameter, and list it
again. A changed listing (or the created item readable by its id) means the API kept the write, and the
dry run stops before it begins; an unchanged one is recorded with the plan (`dry_run.sandbox`: what was
checked, against which URL, when), and the server's oks on calls carrying that parameter read as
validated. It never carries the API's own credential: the sandbox has its own `headers`.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import httpx

from reviewer.agent.errors import SandboxCheckFailed, SandboxKeptWrite
from reviewer.plan.proposal import SandboxProof

DEFAULT_CREATE_BODY: Final[Mapping[str, Any]] = {"title": "reviewer sandbox check"}
"""What the check creates when it is given nothing: a body many ticket-like collections accept. An API
that refuses it makes the check fail (a refused create proves nothing), and says so."""


@dataclass(frozen=True)
class SandboxCheck:
    """A collection on a sandbox copy of the API (`https://sandbox.api.example/v1/tickets`), the body
    a create there takes, and the sandbox's own headers (its credential, never the API's)."""

    collection: str
    body: Any = field(default_factory=lambda: dict(DEFAULT_CREATE_BODY))
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    timeout: float = 30.0

    def __post_init__(self) -> None:
        try:
            url = httpx.URL(self.collection)
        except httpx.InvalidURL as error:
            raise ValueError(f"sandbox {self.collection!r} is not a URL: {error}") from None
        if url.scheme not in ("http", "https") or not url.host:
            raise ValueError(f"sandbox {self.collection!r}: give the http(s) URL of a collection")
        if url.userinfo or url.query or url.fragment:
            raise ValueError(
                "sandbox: give the collection's URL alone, without a user, password, query or fragment "
                "(it is recorded with the plan; the sandbox's credential goes in headers)"
            )

    async def prove(self, dry_run_query: Mapping[str, str], *, now: datetime | None = None) -> SandboxProof:
        """List the collection, create in it with `dry_run_query`, list it again; the proof, or
        `SandboxKeptWrite` when the create was kept and `SandboxCheckFailed` when nothing was proven."""
        parameter = urllib.parse.urlencode(dry_run_query)
        checked_at = (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")
        async with httpx.AsyncClient(
            headers=dict(self.headers), follow_redirects=False, timeout=self.timeout
        ) as client:
            before = await self._listing(client)
            created = await self._send(
                client, "POST", self.collection, params=dict(dry_run_query), json=self.body
            )
            if not created.is_success:
                raise SandboxCheckFailed(
                    self.collection,
                    f"the create sent with {parameter} was answered {created.status_code} "
                    f"({self._without_secrets(created.text[:200])!r}), and a refused create proves "
                    "nothing; give a body the collection accepts",
                )
            after = await self._listing(client)
            if after != before:
                raise SandboxKeptWrite(self.collection, parameter, _what_changed(before, after))
            created_id = _created_id(created)
            if created_id is not None:
                item = f"{self.collection.rstrip('/')}/{urllib.parse.quote(created_id, safe='')}"
                if (await self._send(client, "GET", item)).is_success:
                    raise SandboxKeptWrite(
                        self.collection, parameter, f"the created {created_id!r} reads back"
                    )
        return SandboxProof(url=self.collection, query=dict(dry_run_query), checked_at=checked_at)

    def _without_secrets(self, text: str) -> str:
        """The sandbox's words with any header value it echoed (its credential) blanked out."""
        for value in self.headers.values():
            for secret in {value, value.rpartition(" ")[2]}:
                if len(secret) >= 4:
                    text = text.replace(secret, "<withheld>")
        return text

    async def _listing(self, client: httpx.AsyncClient) -> Any:
        response = await self._send(client, "GET", self.collection)
        if not response.is_success:
            raise SandboxCheckFailed(
                self.collection, f"listing the collection was answered {response.status_code}"
            )
        try:
            return response.json()
        except ValueError:
            raise SandboxCheckFailed(self.collection, "listing the collection gave no JSON") from None

    async def _send(self, client: httpx.AsyncClient, method: str, url: str, **options: Any) -> httpx.Response:
        try:
            return await client.request(method, url, **options)
        except httpx.HTTPError as error:
            raise SandboxCheckFailed(
                self.collection, f"{method} {url} failed ({type(error).__name__})"
            ) from None


def _created_id(response: httpx.Response) -> str | None:
    """The id the create's answer names, when it is a JSON object with a plain `id`."""
    try:
        body = response.json()
    except ValueError:
        return None
    value = body.get("id") if isinstance(body, dict) else None
    if isinstance(value, bool) or not isinstance(value, str | int) or value == "":
        return None
    return str(value)


def _what_changed(before: Any, after: Any) -> str:
    if isinstance(before, list) and isinstance(after, list):
        return f"the collection listed {len(before)} item(s) before and {len(after)} after"
    return "the collection's listing changed"
