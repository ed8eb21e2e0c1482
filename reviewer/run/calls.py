"""A request that reaches the gate, as a plan call: its tool name, effect, arguments and request.

With an OpenAPI document a call is named by its `operationId` and its arguments are the path
parameters and the body's fields; without one it is `METHOD /path` and its arguments the body's
fields, its effect its method's, but for a POST to an object an earlier call of the plan produced (a
path ending in its placeholder, `/v1/customers/<id from call 1>`, as Stripe's SDK modifies): that
changes the object, an update, never less than a POST's floor. A query parameter named like the
dry-run flag is dropped: the flag belongs to the runner. The headers that carry meaning
(`reviewer.plan.request_headers`) are part of the request and, under `headers`, of the arguments, so
the reviewer reads them and a policy can decide on them.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from reviewer.agent.http_values import HttpRequest
from reviewer.agent.tools import WriteTool
from reviewer.plan.bodies import fields_as_arguments
from reviewer.plan.dry_run_params import without_dry_run_params
from reviewer.plan.placeholders import Reference
from reviewer.plan.proposal import Effect
from reviewer.run.answers import AnswerForm
from reviewer.run.openapi import METHOD_EFFECTS, ApiDocument, Operation


class UndeclaredOperation(Exception):
    """A request to an operation the operator's OpenAPI document does not have."""

    def __init__(self, method: str, path: str) -> None:
        super().__init__(
            f"reviewer run: {method} {path[:200]} is not an operation of the API's OpenAPI document, so the "
            "gate does not pass it on; use one of the document's operations"
        )


@dataclass(frozen=True)
class GateCall:
    """One request to the gate, named and described as the plan records it."""

    tool: str
    effect: Effect
    args: dict[str, Any]
    request: HttpRequest
    produces: tuple[str, ...]
    operation: Operation | None = None
    answer_form: AnswerForm | None = None
    """How its answer is written in the API's own protocol (`reviewer.run.answers`); None for JSON."""

    @property
    def is_read(self) -> bool:
        return self.effect == "read"

    def write_tool(self) -> WriteTool:
        """The library's write tool for this one call: the dry run records it and the real run checks
        it against the plan exactly as they do a Python agent's tools."""
        request = self.request
        return WriteTool(
            name=self.tool, effect=self.effect, build=lambda **_: request, produces=self.produces
        )


def describe(
    method: str,
    path: str,
    query: Mapping[str, Any],
    body: Any,
    document: ApiDocument | None,
    content_type: str | None = None,
    headers: Mapping[str, str] | None = None,
    text: list[str] | None = None,
) -> GateCall:
    """The call a request is (its body written as `content_type` says, `reviewer.plan.bodies`, with
    the headers that carry meaning, `reviewer.plan.request_headers`, and a JSON or form body's exact
    `text`, `reviewer.plan.exact_bodies`); `UndeclaredOperation` when a document is given and does not
    have it."""
    query = without_dry_run_params(query)
    headers = dict(headers) if headers else None
    request = HttpRequest(method, path, query or None, body, content_type, headers, text)
    fields = fields_as_arguments(content_type, body)
    if document is None:
        effect: Effect = METHOD_EFFECTS[method]
        if method == "POST" and Reference.parse(path.rstrip("/").rsplit("/", 1)[-1]) is not None:
            effect = "update"
        return GateCall(
            f"{method} {path}",
            effect,
            _arguments({}, fields, headers),
            request,
            ("id",) if method == "POST" else (),
        )
    found = document.match(method, path)
    if found is None:
        raise UndeclaredOperation(method, path)
    operation, parameters = found
    return GateCall(
        operation.operation_id,
        operation.effect,
        _arguments(parameters, fields, headers),
        request,
        operation.produces,
        operation,
    )


def _arguments(path_parameters: dict[str, str], body: Any, headers: dict[str, str] | None) -> dict[str, Any]:
    """What the reviewer and a policy read as the call's arguments: path parameters, then the body's
    fields (the body whole under `body` when it is not an object or a field would shadow a path
    parameter or `headers`), then the headers the plan holds under `headers`."""
    held = {"headers": headers} if headers else {}
    if body is None:
        return {**path_parameters, **held}
    if isinstance(body, dict) and not set(body) & {*path_parameters, *held}:
        return {**path_parameters, **body, **held}
    return {**path_parameters, "body": body, **held}
