"""The sandbox check: before a server dry run is trusted, prove on a sandbox copy of the API that the
API honours its dry-run parameter.

Most APIs drop a query parameter they do not know and perform the write, answering exactly as a dry
run would: nothing in the answer tells the two apart. So the check does what an operator would do by
hand: list a collection on the sandbox, send it a create carrying the dry-run parameter, list it again
and read the created item back by the id the create answered. A changed listing, or the item reading
back, means the API kept the write, and the dry run stops before it begins. The proof is strict: it holds
only when the listing is whole (no sign of a next page) and unchanged AND the created id reads back
404/410; a create that names no id, a paginated listing or any other read-back answer proves nothing,
and the dry run stops too. A proof is recorded with the plan (`dry_run.sandbox`: what was checked,
against which URL, when), and the server's oks on calls carrying that parameter read as validated. It
never carries the API's own credential: the sandbox has its own `headers`.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, Final

import httpx

from reviewer.agent.errors import SandboxCheckFailed, SandboxKeptWrite
from reviewer.plan.json_paths import at_path
from reviewer.plan.proposal import SandboxProof
from reviewer.redaction import header_secrets, redact

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
    id_field: str = "id"
    """Where the create's answer names the new item's id: a key of its JSON object, or a dotted path
    (`data.id`); `id` is looked in too."""

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
                    f"({self._quoted(created.text)!r}), and a refused create proves "
                    "nothing; give a body the collection accepts",
                )
            after = await self._listing(client)
            if after.items != before.items:
                raise SandboxKeptWrite(self.collection, parameter, _what_changed(before.items, after.items))
            created_id = self._created_id(created)
            if created_id is None:
                raise SandboxCheckFailed(
                    self.collection,
                    f"the create's answer names no id (looked in {self._id_fields_said()}), so the check "
                    "cannot read the item back to show it was not kept; an unchanged listing alone proves "
                    "nothing",
                )
            item = f"{self.collection.rstrip('/')}/{urllib.parse.quote(created_id, safe='')}"
            read_back = await self._send(client, "GET", item)
            said_id = self._quoted(created_id, limit=80)
            if read_back.is_success:
                raise SandboxKeptWrite(self.collection, parameter, f"the created {said_id!r} reads back")
            if read_back.status_code not in (404, 410):
                raise SandboxCheckFailed(
                    self.collection,
                    f"reading the created {said_id!r} back was answered {read_back.status_code}, "
                    "not 404 or 410, which proves nothing",
                )
            for listing in (before, after):
                if listing.paginated:
                    raise SandboxCheckFailed(
                        self.collection,
                        f"the listing is paginated ({listing.paginated}): a kept item could be on "
                        "another page, so an unchanged first page proves nothing; give a collection "
                        "that lists whole",
                    )
        return SandboxProof(url=self.collection, query=dict(dry_run_query), checked_at=checked_at)

    def _quoted(self, text: str, limit: int = 200) -> str:
        """The sandbox's words, any header value it echoed (its credential) blanked out first, in the
        plain and the JSON-escaped form, longest first (a whole header value before the token in it), and
        only then clipped to `limit` characters: clipping first could cut a secret in two and leave its
        head visible."""
        secrets = {secret for secret in header_secrets(self.headers) if len(secret) >= 4}
        return redact(text, secrets)[:limit]

    def _created_id(self, response: httpx.Response) -> str | None:
        """The id the create's answer names, at `id_field` or else at `id`."""
        try:
            body = response.json()
        except ValueError:
            return None
        for path in dict.fromkeys((self.id_field, "id")):
            value = at_path(body, path)
            if not isinstance(value, bool) and isinstance(value, str | int) and value != "":
                return str(value)
        return None

    def _id_fields_said(self) -> str:
        return " and ".join(f"`{path}`" for path in dict.fromkeys((self.id_field, "id")))

    async def _listing(self, client: httpx.AsyncClient) -> _Listing:
        response = await self._send(client, "GET", self.collection)
        if not response.is_success:
            raise SandboxCheckFailed(
                self.collection, f"listing the collection was answered {response.status_code}"
            )
        try:
            items = response.json()
        except ValueError:
            raise SandboxCheckFailed(self.collection, "listing the collection gave no JSON") from None
        return _Listing(items, _pagination_sign(response, items))

    async def _send(self, client: httpx.AsyncClient, method: str, url: str, **options: Any) -> httpx.Response:
        try:
            return await client.request(method, url, **options)
        except httpx.HTTPError as error:
            raise SandboxCheckFailed(
                self.collection, f"{method} {self._quoted(url, limit=300)} failed ({type(error).__name__})"
            ) from None


@dataclass(frozen=True)
class _Listing:
    """A listing's JSON, and the sign that it is one page of more (empty when it lists whole)."""

    items: Any
    paginated: str


_NEXT_PAGE_FIELDS: Final = ("next", "next_page", "nextPage", "has_more", "hasMore")
_TOTAL_FIELDS: Final = ("total", "total_count", "totalCount", "count")


def _pagination_sign(response: httpx.Response, body: Any) -> str:
    """What shows the listing is one page of more: a `Link` header with rel=next, a next-page field
    that is set, or a total (`X-Total-Count` or a `total` field) above the items listed; "" for none."""
    if "next" in response.links:
        return "a Link header with rel=next"
    listed = _items_listed(body)
    shown = "an unknown number" if listed is None else str(listed)
    header_total = response.headers.get("X-Total-Count", "")
    if header_total.strip().isdigit() and (listed is None or int(header_total) > listed):
        return f"X-Total-Count {int(header_total)}, {shown} listed"
    if not isinstance(body, dict):
        return ""
    for name in _NEXT_PAGE_FIELDS:
        if body.get(name) not in (None, False, ""):
            return f"its {name!r} field is set"
    for name in _TOTAL_FIELDS:
        total = body.get(name)
        if isinstance(total, int) and not isinstance(total, bool) and (listed is None or total > listed):
            return f"its {name!r} field counts {total}, {shown} listed"
    return ""


def _items_listed(body: Any) -> int | None:
    """How many items a listing shows: a list's length, or the length of the one list a JSON object
    holds (`{"tickets": [...]}`); None when it cannot tell."""
    if isinstance(body, list):
        return len(body)
    if isinstance(body, dict):
        lists = [value for value in body.values() if isinstance(value, list)]
        if len(lists) == 1:
            return len(lists[0])
    return None


def _what_changed(before: Any, after: Any) -> str:
    if isinstance(before, list) and isinstance(after, list):
        return f"the collection listed {len(before)} item(s) before and {len(after)} after"
    return "the collection's listing changed"
