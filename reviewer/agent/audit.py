"""Reading an API's audit log: what it kept, which is how a run learns `writes_kept` and verifies."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import msgspec

if TYPE_CHECKING:
    from reviewer.agent.http_values import HttpRequest


class AuditUnavailable(Exception):
    """The API's audit log could not be read; counts that depend on it are left unknown, not guessed."""


@dataclass(frozen=True)
class HttpAuditLog:
    """An audit log served as JSON at `path`: a list, or an object holding the list under `entries_key`.

    Reading it is a read, so it goes straight through the runner's client in every mode. Lines that
    carry the request's method, path and body (under the names given here) can be attributed to the
    run that sent them, so a run that shares the API with others counts only its own kept writes.
    """

    path: str = "/v1/audit"
    entries_key: str | None = "entries"
    method_field: str = "method"
    path_field: str = "path"
    body_field: str = "body"

    async def read(self, client: httpx.AsyncClient) -> list[dict[str, Any]]:
        try:
            response = await client.get(self.path)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise AuditUnavailable(f"audit log at {self.path}: {error}") from error
        entries = body.get(self.entries_key) if self.entries_key and isinstance(body, dict) else body
        if not isinstance(entries, list):
            raise AuditUnavailable(f"audit log at {self.path}: expected a list of entries")
        return [entry for entry in entries if isinstance(entry, dict)]

    def lines_of(
        self, new_lines: Sequence[dict[str, Any]], sent: Sequence[HttpRequest]
    ) -> list[dict[str, Any]]:
        """The new lines that record one of the `sent` requests (each request claims at most one line).

        When the lines do not carry method, path and body, nothing can be attributed and every new
        line counts: an over-count is safer than missing a write that was kept.
        """
        if any(self._key(line) is None for line in new_lines):
            return list(new_lines)
        unclaimed = [_request_key(request.method, request.path, request.body) for request in sent]
        mine: list[dict[str, Any]] = []
        for line in new_lines:
            key = self._key(line)
            if key in unclaimed:
                unclaimed.remove(key)
                mine.append(line)
        return mine

    def _key(self, line: dict[str, Any]) -> tuple[str, str, bytes] | None:
        method, path = line.get(self.method_field), line.get(self.path_field)
        if not isinstance(method, str) or not isinstance(path, str):
            return None
        return _request_key(method, path, line.get(self.body_field))


class RunAudit:
    """The audit lines one run's own writes left: the log's length before the run, its new lines after.

    Dry runs and real runs both learn what the API kept this way. Without a log or a client, or when
    the log cannot be read before or after, what was kept stays unknown (None), never guessed.
    """

    def __init__(self, log: HttpAuditLog | None, client: httpx.AsyncClient | None) -> None:
        self.log = log
        self.client = client
        self._before: int | None = None

    async def start(self) -> None:
        """Count the lines already there, so the lines the run adds can be told from them."""
        self._before = None
        if self.log is None or self.client is None:
            return
        try:
            self._before = len(await self.log.read(self.client))
        except AuditUnavailable:
            return

    async def kept(self, sent: Iterable[HttpRequest | None]) -> list[dict[str, Any]] | None:
        """The lines added since `start` that record one of the `sent` requests, or None if unknown."""
        if self.log is None or self.client is None or self._before is None:
            return None
        try:
            lines = await self.log.read(self.client)
        except AuditUnavailable:
            return None
        return self.log.lines_of(lines[self._before :], [request for request in sent if request is not None])


def _request_key(method: str, path: str, body: Any) -> tuple[str, str, bytes]:
    canonical_body = msgspec.json.encode(body if body is not None else {}, order="sorted")
    return method.upper(), path.split("?", 1)[0], canonical_body
