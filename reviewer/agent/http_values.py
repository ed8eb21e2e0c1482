"""The HTTP values a write tool deals in: the request it would send, and the answer it gives back.

A leaf of the agent library: everything else in it builds on these, and they import nothing from it.
"""

from __future__ import annotations

import json
import secrets
import urllib.parse
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from reviewer.plan.hosts import fully_unquoted
from reviewer.plan.placeholders import PLACEHOLDER, Reference, placeholder
from reviewer.plan.proposal import OutcomeStatus, Request


def path_problem(path: str) -> str | None:
    """Why a request path cannot be approved as it stands, or None.

    A `?` or `#` in a path, written or percent-encoded, makes the request that runs another than the
    one shown: an HTTP client cuts the path at a `#` (`DELETE /v1/tickets/#t4` goes to the collection),
    a `?` starts a query the dry run's own parameter would then stand beside or replace, and a server
    may decode `%23`/`%3F` back into them. The query belongs in `HttpRequest.query`.
    """
    decoded = fully_unquoted(path)
    for mark in "?#":
        if mark in decoded:
            return (
                f"its path {path[:200]!r} holds {mark!r}"
                + ("" if mark in path else " (percent-encoded)")
                + ": the request that runs would not be the one approved; a query belongs in the "
                "request's query, and a path argument may not hold ? or #"
            )
    return None


def path_with(template: str, **arguments: object) -> str:
    """`template` with each `{name}` replaced by its argument percent-encoded as one path segment, so a
    model-supplied `a/b` stays one segment (`a%2Fb`) and cannot walk the path. A placeholder
    (`<id from call 1>`) stays as it is: the run puts the value in when it is known.

        path_with("/v1/tickets/{id}", id=ticket_id)
    """
    return template.format_map({name: _segment(value) for name, value in arguments.items()})


def _segment(value: object) -> str:
    text = str(value)
    return text if PLACEHOLDER.fullmatch(text) else urllib.parse.quote(text, safe="")


def new_request_id() -> str:
    """A request id of 128 random bits: no other client can guess the id of a request it has not seen
    (one that has seen it is caught by verification: one id, one log entry)."""
    return secrets.token_hex(16)


@dataclass(frozen=True)
class HttpRequest:
    """One HTTP request as a tool means it: the path is relative to the API's base URL."""

    method: str
    path: str
    query: Mapping[str, Any] | None = None
    body: Any = None
    content_type: str | None = None
    """How `body` is written (`reviewer.plan.bodies`): None for JSON; a form's `[[name, value], ...]`
    or `bytes_body(raw)` with the content type sent."""
    headers: Mapping[str, str] | None = None
    """The headers that carry meaning, by lower-case name (`reviewer.plan.request_headers`)."""
    text: list[str] | None = None
    """A JSON or form body's exact text, placeholders written as in `body`
    (`reviewer.plan.exact_bodies`): sent as it is, once filled in; None to write `body` out."""

    def to_proposal(self) -> Request:
        return Request(
            method=self.method,
            path=self.path,
            query=dict(self.query) if self.query else None,
            body=self.body,
            content_type=self.content_type,
            headers=dict(self.headers) if self.headers else None,
            text=list(self.text) if self.text is not None else None,
        )

    def parts(self) -> tuple[Any, ...]:
        """Where a placeholder may stand in this request: the path, the query, the body and the headers."""
        return (self.path, self.query, self.body, self.headers, self.text)

    def with_parts(self, path: str, query: Mapping[str, Any] | None, body: Any) -> HttpRequest:
        """This request with another path, query and body, its method, content type, headers and text
        kept (a text that no longer reads as the body is refused when it is sent)."""
        return HttpRequest(self.method, path, query, body, self.content_type, self.headers, self.text)


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
    dry_seq: int | None = field(default=None, compare=False)
    """The plan seq of a dry-run call: a field its answer does not hold reads as that call's
    placeholder (`ticket["id"]` is `<id from call 1>` under the record backend), since only its real
    write will say. None for a real answer."""

    @property
    def ok(self) -> bool:
        return self.status in ("ok", "recorded")

    def __str__(self) -> str:
        """The answer as the model reads it (frameworks turn a tool's return value into text)."""
        shown = {
            name: value for name, value in asdict(self).items() if value is not None and name != "dry_seq"
        }
        return json.dumps(shown, ensure_ascii=False, default=str)

    def __getitem__(self, key: str) -> Any:
        if isinstance(self.result, Mapping) and key in self.result:
            return self.result[key]
        if self.dry_seq is not None and isinstance(key, str):
            stands_for = placeholder(key, self.dry_seq)
            if Reference.parse(stands_for) is not None:
                return stands_for
        raise AnswerFieldMissing(key, self)

    def get(self, key: str, default: Any = None) -> Any:
        try:
            return self[key]
        except KeyError:
            return default


class AnswerFieldMissing(KeyError):
    """A field the answer does not hold, named with the fields it does (a bare `KeyError: 'id'` says
    nothing to a model)."""

    def __init__(self, key: object, answer: CallAnswer) -> None:
        super().__init__(key)
        held = sorted(map(str, answer.result))[:20] if isinstance(answer.result, Mapping) else []
        self.message = (
            f"the answer ({answer.status}{f' {answer.http_status}' if answer.http_status else ''}) has no "
            f"field {str(key)[:80]!r}; "
            + (f"its fields: {', '.join(name[:40] for name in held)}" if held else "it carries no result")
        )

    def __str__(self) -> str:
        return self.message
