"""The HTTP values a write tool deals in: the request it would send, and the answer it gives back.

A leaf of the agent library: everything else in it builds on these, and they import nothing from it.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

from reviewer.plan.proposal import OutcomeStatus, Request


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request as a tool means it: the path is relative to the API's base URL."""

    method: str
    path: str
    query: Mapping[str, Any] | None = None
    body: Any = None

    def to_proposal(self) -> Request:
        return Request(
            method=self.method,
            path=self.path,
            query=dict(self.query) if self.query else None,
            body=self.body,
        )


@dataclass(frozen=True)
class CallAnswer:
    """What a write tool returns to the agent: the outcome, and the result it may chain on.

    In a dry run, each field the tool `produces` (most often `id`) is a placeholder such as
    `<id from call 1>`, whatever the backend answered: the agent passes it on, the plan shows the
    dependency, and the real run fills in the value the real write produced.
    """

    status: OutcomeStatus
    http_status: int | None = None
    message: str | None = None
    result: Any = None
    note: str | None = None
    """For the model, in words: what this answer proves (a dry run's ok is not a real write; a
    refusal of a call that depends on an earlier one of the same plan is expected chain noise)."""

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "recorded")

    def __str__(self) -> str:
        """The answer as the model reads it (frameworks turn a tool's return value into text)."""
        shown = {name: value for name, value in asdict(self).items() if value is not None}
        return json.dumps(shown, ensure_ascii=False, default=str)

    def __getitem__(self, key: str) -> Any:
        if not isinstance(self.result, Mapping):
            raise KeyError(key)
        return self.result[key]
