"""Reading an API's audit log: what it kept, which is how a run learns `writes_kept` and verifies."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import httpx


class AuditUnavailable(Exception):
    """The API's audit log could not be read; counts that depend on it are left unknown, not guessed."""


@dataclass(frozen=True)
class HttpAuditLog:
    """An audit log served as JSON at `path`: a list, or an object holding the list under `entries_key`.

    Reading it is a read, so it goes straight through the runner's client in every mode.
    """

    path: str = "/v1/audit"
    entries_key: str | None = "entries"

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
