"""An API's OpenAPI document as `reviewer run` reads it: which operation a request is, its name and
effect, the dry-run parameter it declares, the values its answer produces, and its answer's shape.

Only the operator's own copy of the document is read (`--openapi FILE`), never one the API serves:
what passes as a read, and what a call is named in the review, is the operator's decision.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final, cast, get_args

from reviewer.plan.dry_run_params import names_dry_run
from reviewer.plan.json_paths import follow_ref
from reviewer.plan.proposal import Effect
from reviewer.run.errors import RunRefused

METHOD_EFFECTS: Final[Mapping[str, Effect]] = {
    "GET": "read",
    "HEAD": "read",
    "OPTIONS": "read",
    "POST": "create",
    "PUT": "update",
    "PATCH": "update",
    "DELETE": "delete",
}
"""What a request does when nothing says otherwise: reads pass through, every other method is a write."""
EFFECT_EXTENSION: Final = "x-reviewer-effect"
"""An operation may say its effect itself (a POST that deletes: `x-reviewer-effect: delete`)."""
_RESPONSE_BODY: Final = "$response.body#/"


@dataclass(frozen=True)
class Operation:
    """One operation of the document, as the gate names and answers it."""

    operation_id: str
    method: str
    template: str
    effect: Effect
    dry_run_query: dict[str, str | None] | None
    """The dry-run query parameter it declares (its value when the document gives one), or None."""
    produces: tuple[str, ...]
    """Fields of its answer that later calls use (named by the document's links), dotted for nesting."""
    response_schema: Mapping[str, Any] | None
    _pattern: re.Pattern[str]

    def path_parameters(self, path: str) -> dict[str, str] | None:
        match = self._pattern.fullmatch(path)
        return None if match is None else dict(match.groupdict())


class ApiDocument:
    """The operations of an OpenAPI document, matched against the paths requests arrive with (relative to
    the API's base URL, as the document's paths are)."""

    def __init__(self, operations: list[Operation], title: str = "") -> None:
        # A literal segment wins over a template (/tickets/search before /tickets/{id}).
        self.operations = sorted(operations, key=lambda item: (item.template.count("{"), -len(item.template)))
        self.title = title
        """The document's `info.title`: what tells a known API (Kubernetes) by name."""

    @classmethod
    def load(cls, path: str) -> ApiDocument:
        try:
            document = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            raise RunRefused(f"--openapi {path}: cannot read it as JSON: {error}") from None
        if not isinstance(document, dict) or not isinstance(document.get("paths"), dict):
            raise RunRefused(f"--openapi {path}: not an OpenAPI document (no paths)")
        operations = [
            _operation(document, template, method.upper(), spec)
            for template, item in document["paths"].items()
            if isinstance(item, dict)
            for method, spec in item.items()
            if method.upper() in METHOD_EFFECTS and isinstance(spec, dict)
        ]
        if not operations:
            raise RunRefused(f"--openapi {path}: the document declares no operation")
        info = document.get("info")
        title = info.get("title") if isinstance(info, dict) else None
        return cls(operations, title if isinstance(title, str) else "")

    def match(self, method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
        """The operation a request is, with its path parameters; None when the document has none."""
        for operation in self.operations:
            if operation.method == method:
                parameters = operation.path_parameters(path)
                if parameters is not None:
                    return operation, parameters
        return None

    def dry_run_query(self) -> dict[str, str | None] | None:
        """The one dry-run parameter the document's writes declare (the first write that declares one).

        Kubernetes' own document declares `dryRun` without the value that asks for a dry run; as a
        known API it is given `All`.
        """
        for operation in self.operations:
            if operation.effect != "read" and operation.dry_run_query:
                declared = operation.dry_run_query
                if declared == {"dryRun": None} and self.title.startswith("Kubernetes"):
                    return {"dryRun": "All"}
                return declared
        return None


def _operation(document: Mapping[str, Any], template: str, method: str, spec: Mapping[str, Any]) -> Operation:
    declared = spec.get(EFFECT_EXTENSION)
    effect: Effect = cast(Effect, declared) if declared in get_args(Effect) else METHOD_EFFECTS[method]
    operation_id = spec.get("operationId")
    if not isinstance(operation_id, str) or not operation_id:
        operation_id = f"{method} {template}"
    responses: Mapping[str, Any] = spec["responses"] if isinstance(spec.get("responses"), dict) else {}
    success = sorted(str(code) for code in responses if str(code).startswith("2"))
    answers = [responses[code] for code in success]
    return Operation(
        operation_id=operation_id,
        method=method,
        template=template,
        effect=effect,
        dry_run_query=_dry_run_query(document, spec),
        produces=_linked_fields(document, answers) or _default_produces(effect),
        response_schema=_json_schema(document, follow_ref(document, answers[0]) if answers else None),
        _pattern=_path_pattern(template),
    )


def _default_produces(effect: str) -> tuple[str, ...]:
    return ("id",) if effect == "create" else ()


def _path_pattern(template: str) -> re.Pattern[str]:
    pieces = re.split(r"\{([^{}/]+)\}", template)
    pattern = ""
    for index, piece in enumerate(pieces):
        if index % 2:
            name = re.sub(r"\W", "_", piece)
            pattern += f"(?P<{name}>[^/]+)" if f"(?P<{name}>" not in pattern else "[^/]+"
        else:
            pattern += re.escape(piece)
    return re.compile(pattern)


def _dry_run_query(document: Mapping[str, Any], spec: Mapping[str, Any]) -> dict[str, str | None] | None:
    for parameter in spec.get("parameters") or []:
        parameter = follow_ref(document, parameter)
        if not isinstance(parameter, Mapping) or parameter.get("in") != "query":
            continue
        name = parameter.get("name")
        if isinstance(name, str) and names_dry_run(name):
            return {name: _declared_value(document, parameter)}
    return None


def _declared_value(document: Mapping[str, Any], parameter: Mapping[str, Any]) -> str | None:
    """The value a dry-run parameter takes, as the document gives it: a single enum value, the example,
    the default (a boolean as `true`)."""
    schemas = [parameter, follow_ref(document, parameter.get("schema"))]
    for schema in list(schemas):
        if isinstance(schema, Mapping):
            schemas += [
                follow_ref(document, option) for option in schema.get("anyOf") or schema.get("oneOf") or []
            ]
    for schema in schemas:
        if not isinstance(schema, Mapping):
            continue
        enum = [value for value in schema.get("enum") or [] if value is not None]
        candidates = [
            *(enum if len(enum) == 1 else []),
            *(schema.get("examples") or []),
            schema.get("example"),
        ]
        candidates.append(schema.get("default"))
        for value in candidates:
            if isinstance(value, bool):
                return "true" if value else None
            if isinstance(value, str | int) and str(value):
                return str(value)
    if any(isinstance(schema, Mapping) and schema.get("type") == "boolean" for schema in schemas):
        return "true"
    return None


def _linked_fields(document: Mapping[str, Any], responses: list[Any]) -> tuple[str, ...]:
    """The answer's fields the document's links pass to later operations (`$response.body#/id`)."""
    found: list[str] = []
    for response in responses:
        response = follow_ref(document, response)
        links = response.get("links") if isinstance(response, Mapping) else None
        for link in (links or {}).values():
            link = follow_ref(document, link)
            if not isinstance(link, Mapping):
                continue
            values = list((link.get("parameters") or {}).values()) + [link.get("requestBody")]
            for value in values:
                if isinstance(value, str) and value.startswith(_RESPONSE_BODY):
                    name = ".".join(part for part in value[len(_RESPONSE_BODY) :].split("/") if part)
                    if name and name not in found:
                        found.append(name)
    return tuple(found)


def _json_schema(document: Mapping[str, Any], response: Any) -> Mapping[str, Any] | None:
    content = response.get("content") if isinstance(response, Mapping) else None
    media = (content or {}).get("application/json") if isinstance(content, Mapping) else None
    schema = follow_ref(document, media.get("schema")) if isinstance(media, Mapping) else None
    return schema if isinstance(schema, Mapping) and schema else None
