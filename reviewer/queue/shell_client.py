"""`ShellQueue`: the queue API as a shell command asks it, one request after another, then exit.

`reviewer list`, `show`, `approve` and `reject` run once and end: a synchronous httpx client, its
answers read as the views of `reviewer.queue.answers`, and no event loop, no pydantic. The app and the
agents, which stay and wait, use the asynchronous `reviewer.queue.client.QueueClient`; both connect as
`connection_options` says (the same token checks, trust, timeouts and retries) and raise the errors of
`reviewer.queue.refusals`. The token travels only in the `Authorization` header.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Final

import httpx
import msgspec

from reviewer.plan.proposal import PROPOSAL_ID_PATTERN
from reviewer.queue.answers import (
    IdentityFields,
    LinkFields,
    PageFields,
    RecordFields,
    StateFields,
    View,
    decoded,
)
from reviewer.queue.refusals import QueueError, is_untrusted, refusal, unreachable
from reviewer.queue.trust import trusted_certificates

if TYPE_CHECKING:
    from reviewer.plan.proposal import Proposal

DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_RETRIES: Final = 3
RETRY_DELAY: Final = 0.2
"""Seconds before the first retry of a request the transport lost; doubled for each next one."""
KEEPALIVE_EXPIRY: Final = 2.0
"""Seconds an idle connection is kept for the next request: under the service's keep-alive (5 s), so
a poll is not sent down a connection the service is closing at that moment (the retry would cover
it, but only after a reset and a delay)."""
_PROPOSAL_ID: Final = re.compile(PROPOSAL_ID_PATTERN)
_DOT_SEGMENTS: Final = frozenset({".", ".."})


def connection_options(token: str | httpx.Auth, timeout: float) -> dict[str, Any]:
    """What an httpx client of the queue is made with: the bearer token (refused when it could not
    be a header's), or the provider session's renewing auth; the machine's trust; no redirects."""
    headers = {"Accept": "application/json"}
    if isinstance(token, str):
        if not token or any(character.isspace() for character in token) or not token.isprintable():
            raise ValueError("the token is empty or contains whitespace or control characters")
        headers["Authorization"] = f"Bearer {token}"
    return {
        "auth": None if isinstance(token, str) else token,
        "headers": headers,
        "timeout": timeout,
        "follow_redirects": False,
        "limits": httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY),
        "verify": trusted_certificates(),
    }


def retry_delays(retries: int, delay: float) -> list[float]:
    """The wait before each retry of a request safe to repeat: `delay`, then doubling."""
    return [delay * 2**attempt for attempt in range(retries)]


def segment(proposal_id: str) -> str:
    """A proposal id as one URL path segment; ids outside the format's pattern are refused here."""
    if proposal_id in _DOT_SEGMENTS:
        raise ValueError(f"{proposal_id!r} is not a proposal id")
    return id_part(proposal_id)


def id_part(text: str) -> str:
    """`text` when some proposal id could hold it (the format's characters, 1 to 128 of them):
    what is not is refused before any request, as no id holds it (a newline included)."""
    if not _PROPOSAL_ID.fullmatch(text):
        raise ValueError(f"{text[:60]!r} is not a proposal id ([A-Za-z0-9._-], 1 to 128 characters)")
    return text


class ShellQueue:
    """The queue's reads and decisions for a command that asks a few things and exits.

    Every request is safe to repeat (reads, and decisions under their Idempotency-Key), so each is
    retried on transport errors, as `QueueClient` retries them."""

    def __init__(
        self,
        base_url: str,
        token: str | httpx.Auth,
        *,
        transport: httpx.BaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._delays = retry_delays(retries, RETRY_DELAY)
        self._http = httpx.Client(
            base_url=self.base_url, transport=transport, **connection_options(token, timeout)
        )

    def __repr__(self) -> str:
        return f"ShellQueue(base_url={self.base_url!r})"

    def __enter__(self) -> ShellQueue:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self._http.close()

    def _request(self, method: str, path: str, *, expect: int = 200, **kwargs: Any) -> bytes:
        for delay in [*self._delays, None]:
            try:
                response = self._http.request(method, path, **kwargs)
            except httpx.TransportError as error:
                if delay is not None and not is_untrusted(error):
                    time.sleep(delay)
                    continue
                raise unreachable(self.base_url, error) from error
            if response.status_code != expect:
                raise refusal(response)
            return response.content
        raise AssertionError("unreachable")

    def _get(self, path: str, view: type[View], **kwargs: Any) -> View:
        return self._read(self._request("GET", path, **kwargs), view, path)

    def _read(self, content: bytes, view: type[View], path: str) -> View:
        try:
            return decoded(content, view)
        except (msgspec.DecodeError, msgspec.ValidationError) as error:
            raise QueueError(
                f"the queue at {self.base_url} answered {path} with what no queue sends ({error})"
            ) from None

    def whoami(self) -> IdentityFields:
        return self._get("/v1/whoami", IdentityFields)

    def list_page(
        self, state: str | None, cursor: str | None, limit: int, filters: Mapping[str, str] | None = None
    ) -> PageFields:
        """A page of the list, newest submission first, narrowed by `filters` (the list's query words)."""
        params = {"limit": str(limit), **({"state": state} if state else {}), **(filters or {})}
        if cursor is not None:
            params["cursor"] = cursor
        return self._get("/v1/proposals", PageFields, params=params)

    def record(self, proposal_id: str) -> RecordFields:
        return self._get(f"/v1/proposals/{segment(proposal_id)}", RecordFields)

    def revision(self, proposal_id: str, revision: int) -> Proposal:
        """One revision, whole, decoded with the proposal format's own checks."""
        from reviewer.plan.proposal import parse_proposal

        content = self._request("GET", f"/v1/proposals/{segment(proposal_id)}/revisions/{int(revision)}")
        return parse_proposal(content, f"{proposal_id} revision {revision} from the queue")

    def review_link(self, proposal_id: str) -> LinkFields:
        """The review page of the latest revision (a queue serving pages, `serve --web-origin`)."""
        return self._get(f"/v1/proposals/{segment(proposal_id)}/link", LinkFields)

    def decide(
        self,
        proposal_id: str,
        revision: int,
        plan_sha256: str,
        decision: str,
        reason: str = "",
        statement: str | None = None,
        signature: str | None = None,
        break_glass: bool = False,
    ) -> StateFields:
        """Decide once: a lost answer is retried under the same Idempotency-Key. A field not given is
        left out (a queue of a release before change windows refuses `break_glass`)."""
        request: dict[str, object] = {
            "revision": revision,
            "plan_sha256": plan_sha256,
            "decision": decision,
            "reason": reason,
        }
        if statement is not None and signature is not None:
            request.update(statement=statement, signature=signature)
        if break_glass:
            request["break_glass"] = True
        path = f"/v1/proposals/{segment(proposal_id)}/decisions"
        content = self._request(
            "POST",
            path,
            expect=201,
            content=msgspec.json.encode(request),
            headers={"Content-Type": "application/json", "Idempotency-Key": str(uuid.uuid4())},
        )
        return self._read(content, StateFields, path)
