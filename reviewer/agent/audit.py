"""Reading an API's audit log: what it kept, which is how a run learns `writes_kept` and verifies."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx

from reviewer.agent.errors import AgentError
from reviewer.reading.audit_matching import RequestLine, claim_lines

if TYPE_CHECKING:
    from reviewer.agent.http_values import HttpRequest


class AuditUnavailable(AgentError):
    """The API's audit log could not be read. A real run's counts that depend on it are left unknown,
    not guessed; a dry run that was given the log stops, since only the log proves it kept nothing."""


@dataclass(frozen=True)
class HttpAuditLog:
    """An audit log served as JSON at `path`: a list, or an object holding the list under `entries_key`.

    Reading it is a read, so it goes straight through the runner's client in every mode. Lines that
    carry the request's method and path (and its query, under the names given here) can be attributed
    to the run that sent them, so a run that shares the API with others counts only its own kept
    writes. Never by the body: the line of a create holds what the server added (its `id`).
    """

    path: str = "/v1/audit"
    entries_key: str | None = "entries"
    method_field: str = "method"
    path_field: str = "path"
    query_field: str = "query"

    async def read(self, client: httpx.AsyncClient) -> list[dict[str, Any]]:
        try:
            response = await client.get(self.path)
            response.raise_for_status()
            body = response.json()
        except (httpx.HTTPError, ValueError) as error:
            raise AuditUnavailable(
                f"the audit log at {self.path} cannot be read ({type(error).__name__}: {error}); check its "
                "path, or leave it out and nothing proves what the API kept"
            ) from error
        entries = body.get(self.entries_key) if self.entries_key and isinstance(body, dict) else body
        if not isinstance(entries, list):
            where = f"a list under {self.entries_key!r}" if self.entries_key else "a list"
            raise AuditUnavailable(
                f"{self.path} is not an audit log: expected {where} of entries; check its path"
            )
        return [entry for entry in entries if isinstance(entry, dict)]

    def lines_of(
        self, new_lines: Sequence[dict[str, Any]], sent: Sequence[HttpRequest]
    ) -> list[dict[str, Any]]:
        """The new lines that record one of the `sent` requests (each request claims at most one line).

        A line is a request's when its method and path are the request's, and so is its query when the
        line records one (a server dry run's own parameter included, which is how a kept dry-run write
        is told from another client's real one). When the lines do not carry method and path, nothing
        can be attributed and every new line counts: an over-count is safer than missing a kept write.
        """
        lines = [self._request_line(line) for line in new_lines]
        if any(line is None for line in lines):
            return list(new_lines)
        requests = [RequestLine.of(request.method, request.path, request.query or {}) for request in sent]
        claimed = claim_lines([line for line in lines if line is not None], requests)
        return [new_lines[index] for index in sorted(index for index in claimed if index is not None)]

    def _request_line(self, line: Mapping[str, Any]) -> RequestLine | None:
        """The request an audit line records; None when it names no method and path."""
        method, path = line.get(self.method_field), line.get(self.path_field)
        if not isinstance(method, str) or not isinstance(path, str):
            return None
        query = line.get(self.query_field)
        return RequestLine.of(method, path, query if isinstance(query, Mapping) else None)


class RunAudit:
    """The audit lines one run's own writes left: the log's length before the run, its new lines after.

    Dry runs and real runs both learn what the API kept this way. Without a log or a client what was
    kept stays unknown (None), never guessed. A log that cannot be read leaves it unknown too, unless
    it is `required` (a dry run's proof that it kept nothing): then `AuditUnavailable` is raised.
    """

    def __init__(
        self, log: HttpAuditLog | None, client: httpx.AsyncClient | None, *, required: bool = False
    ) -> None:
        self.log = log
        self.client = client
        self.required = required
        self._before: int | None = None

    async def start(self) -> None:
        """Count the lines already there, so the lines the run adds can be told from them."""
        self._before = None
        if self.log is None or self.client is None:
            return
        try:
            self._before = len(await self.log.read(self.client))
        except AuditUnavailable:
            if self.required:
                raise
            return

    async def kept(self, sent: Iterable[HttpRequest | None]) -> list[dict[str, Any]] | None:
        """The lines added since `start` that record one of the `sent` requests, or None if unknown."""
        if self.log is None or self.client is None or self._before is None:
            return None
        try:
            lines = await self.log.read(self.client)
        except AuditUnavailable:
            if self.required:
                raise
            return None
        return self.log.lines_of(lines[self._before :], [request for request in sent if request is not None])
