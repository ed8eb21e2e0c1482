"""How the service answers: JSON bodies without nulls, and every refusal as an `ErrorBody` with
token-shaped text redacted (messages quote what the caller sent)."""

from __future__ import annotations

from typing import Any

from fastapi import Response
from pydantic import BaseModel

from reviewer.queue.messages import ErrorBody
from reviewer.service.auth import redact_tokens
from reviewer.service.errors import ServiceError, Unavailable


def errors(*statuses: int) -> dict[int | str, dict[str, Any]]:
    """The documented refusals of a route; 401 and 422 (our ErrorBody, not FastAPI's) are on every one."""
    return {status: {"model": ErrorBody} for status in sorted({401, 422, *statuses})}


def json_body(schema_ref: str) -> dict[str, Any]:
    """The OpenAPI request body of a route that reads its own body: required JSON of `schema_ref`."""
    schema = {"$ref": f"#/components/schemas/{schema_ref}"}
    return {"requestBody": {"required": True, "content": {"application/json": {"schema": schema}}}}


def json_response(
    model: BaseModel, status_code: int = 200, headers: dict[str, str] | None = None
) -> Response:
    return Response(
        model.model_dump_json(exclude_none=True), status_code, headers, media_type="application/json"
    )


def error_json(body: ErrorBody, status_code: int, headers: dict[str, str] | None = None) -> Response:
    """Every error body the service writes: messages quote what the caller sent, so tokens are redacted."""
    return Response(
        redact_tokens(body.model_dump_json(exclude_none=True)),
        status_code,
        headers,
        media_type="application/json",
    )


def error_response(error: ServiceError) -> Response:
    body = ErrorBody(error=error.code, message=error.message, **error.details)
    headers = {}
    if error.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if isinstance(error, Unavailable) and error.retry_after is not None:
        headers["Retry-After"] = str(error.retry_after)
    return error_json(body, error.status, headers or None)
