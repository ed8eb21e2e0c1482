"""Request bodies: read once with the size limit and the Content-Type rule, then parsed into an API
message or a proposal, with every refusal a `ServiceError` that names the problem.

A body is read by the route itself (not by FastAPI's body parameters) so that the 413 comes while
reading, the 415 before a byte is read, and a report can be refused before its body is read at all.
"""

from __future__ import annotations

from typing import Any, TypeVar

import msgspec
from fastapi import Request
from pydantic import BaseModel, ValidationError
from starlette.requests import ClientDisconnect

from reviewer.plan.bodies import is_json
from reviewer.plan.proposal import (
    MAX_BODY_BYTES,
    MAX_DEPTH,
    ProposalError,
    ProposalNotJSON,
    locate_limit_violation,
    parse_proposal,
    plan_sha256,
    value_within_limits,
)
from reviewer.plan.sanitize import safe_text
from reviewer.queue.messages import ExecutionReport
from reviewer.service.errors import BodyNotReceived, Invalid, InvalidJSON, NotJSON, TooLarge
from reviewer.service.json_numbers import refuse_altered_numbers
from reviewer.service.store import Submission

Model = TypeVar("Model", bound=BaseModel)


async def read_body(request: Request, limit: int = MAX_BODY_BYTES) -> bytearray:
    """The request body, refused with 413 as soon as it passes `limit` (before it is all in memory),
    and with 415 before a byte is read when its Content-Type says it is not JSON."""
    content_type = request.headers.get("content-type")
    if not is_json(content_type):
        raise NotJSON(
            f"the body is sent as {safe_text(content_type or '')[:100]!r}; send JSON with "
            "Content-Type: application/json"
        )
    declared = request.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        raise TooLarge(f"the body is {int(declared):,} bytes; at most {limit:,} are accepted")
    # One growing buffer, not a list of chunks joined at the end: the join would hold the body twice.
    body = bytearray()
    try:
        async for chunk in request.stream():
            if len(body) + len(chunk) > limit:
                raise TooLarge(f"the body is over {limit:,} bytes; at most {limit:,} are accepted")
            body += chunk
    except ClientDisconnect:
        raise BodyNotReceived("the body did not arrive whole; send the request again") from None
    return body


def parse_message(raw: bytes | bytearray, model: type[Model]) -> Model:
    """A JSON body as an API message, with the proposal format's limits on depth, strings and integers."""
    refuse_altered_numbers(raw)
    try:
        value = msgspec.json.decode(raw)
    except msgspec.DecodeError as error:
        raise InvalidJSON(f"the body is not valid JSON ({error})") from None
    except RecursionError:
        raise Invalid(f"the body nests deeper than {MAX_DEPTH} levels") from None
    if not value_within_limits(value, 1):
        raise Invalid(locate_limit_violation(value))
    if isinstance(value, dict):
        integral_floats_as_integers(value, model)
    try:
        return model.model_validate(value, strict=True)
    except ValidationError as error:
        raise Invalid(validation_message(error.errors())) from None


class _ReportLists(msgspec.Struct):
    """An execution report's two long lists, each element left as the bytes it was sent as."""

    calls: list[msgspec.Raw] = []
    audit_log: list[msgspec.Raw] | None = None


def parse_report(raw: bytes | bytearray) -> ExecutionReport:
    """An execution report whose calls and audit lines stay the bytes they were sent as.

    A report's lists are free-form JSON and may fill the 64 MB limit. Decoding them whole into
    objects (and pydantic copying each dict) cost six times the body; here each element is decoded
    alone, checked against the limits, and kept as its canonical JSON bytes (`msgspec.Raw`), which is
    what the Idempotency-Key's fingerprint needs; the store keeps the body as sent. Everything else is
    validated by the pydantic model, as every other message is.
    """
    refuse_altered_numbers(raw)
    try:
        shell = msgspec.json.decode(raw, type=dict[str, msgspec.Raw])
    except msgspec.ValidationError:
        raise Invalid("$: the body is not a JSON object") from None
    except msgspec.DecodeError as error:
        raise InvalidJSON(f"the body is not valid JSON ({error})") from None
    lists: dict[str, list[msgspec.Raw] | None] = {}
    unknown: list[int] = []
    for field in ("calls", "audit_log"):
        if field not in shell:
            continue
        try:
            items = msgspec.json.decode(shell[field], type=list[msgspec.Raw] | None)
        except msgspec.ValidationError:
            raise Invalid(f"$.{field}: Input should be a valid list") from None
        except msgspec.DecodeError as error:
            raise InvalidJSON(f"the body is not valid JSON ({error})") from None
        lists[field] = (
            None
            if items is None
            else [
                _checked_element(item, f"$.{field}[{index}]", unknown if field == "calls" else None)
                for index, item in enumerate(items)
            ]
        )
    header = {name: msgspec.json.decode(value) for name, value in shell.items() if name not in lists}
    if not value_within_limits(header, 1):
        raise Invalid(locate_limit_violation(header))
    integral_floats_as_integers(header, ExecutionReport)
    try:
        checked = ExecutionReport.model_validate(
            {
                **header,
                **{name: [] for name, items in lists.items() if items is not None},
                **{name: None for name, items in lists.items() if items is None},
            },
            strict=True,
        )
    except ValidationError as error:
        raise Invalid(validation_message(error.errors())) from None
    if sorted(checked.unknown_outcomes) != sorted(unknown):
        raise Invalid(
            f"$.unknown_outcomes: lists {sorted(checked.unknown_outcomes)}, but the calls whose outcome "
            f"status is unknown are {sorted(unknown)}; a report names every call that may have been performed"
        )
    # The lists as canonical JSON bytes for the fingerprint, never as objects.
    return checked.model_copy(update={name: items for name, items in lists.items()})


def _checked_element(item: msgspec.Raw, at: str, unknown: list[int] | None = None) -> msgspec.Raw:
    """One call or audit line: a JSON object within the limits (it sits at depth 3 of the body),
    as its canonical JSON (keys sorted), so an Idempotency-Key's fingerprint ignores key order.
    A call whose outcome is `unknown` adds its seq to `unknown`."""
    try:
        value = msgspec.json.decode(item)
    except RecursionError:
        raise Invalid(f"{at}: nests deeper than {MAX_DEPTH} levels") from None
    if not isinstance(value, dict):
        raise Invalid(f"{at}: Input should be a valid dictionary")
    if not value_within_limits(value, 3):
        raise Invalid(locate_limit_violation(value, at, depth=3))
    outcome = value.get("outcome")
    if unknown is not None and isinstance(outcome, dict) and outcome.get("status") == "unknown":
        seq = value.get("seq")
        unknown.append(seq if isinstance(seq, int) and not isinstance(seq, bool) else 0)
    return msgspec.Raw(msgspec.json.encode(value, order="sorted"))


def integral_floats_as_integers(value: dict[str, Any], model: type[BaseModel]) -> None:
    """`1.0` for an integer field is the integer 1, as JSON Schema (and the published document) says.

    pydantic's strict mode refuses it, and its lax mode would also read the string "1" as 1; so the
    message's own integer fields take an integral float as its integer, and nothing else changes.
    """
    for name, field in model.model_fields.items():
        given = value.get(name)
        if field.annotation is int and isinstance(given, float) and given.is_integer():
            value[name] = int(given)


def validation_message(errors: Any) -> str:
    """pydantic's errors as `$.field: problem; ...`, the form `parse_proposal` uses too."""
    parts = []
    for error in list(errors)[:5]:
        location = "$" + "".join(
            f"[{part}]" if isinstance(part, int) else f".{part}" for part in error["loc"]
        )
        parts.append(f"{location}: {error['msg']}")
    return "; ".join(parts)


def submission(raw: bytes | bytearray) -> Submission:
    """Validate a proposal and compute its digest, the same function the terminal app uses.

    The parsed calls keep slices of the bytes they came from, so those must be immutable: one copy.
    """
    refuse_altered_numbers(raw)
    raw = bytes(raw)
    try:
        proposal = parse_proposal(raw, "proposal")
    except ProposalNotJSON as error:  # bad syntax or not UTF-8, wherever in the body
        raise InvalidJSON(f"the body is not valid JSON ({error.problem})") from None
    except ProposalError as error:
        raise Invalid(str(error)) from None
    if proposal.proposal_id in (".", ".."):
        raise Invalid("proposal: $.proposal_id: '.' and '..' cannot be used as a URL path segment")
    return Submission(
        proposal_id=proposal.proposal_id,
        revision=proposal.revision,
        plan_sha256=plan_sha256(proposal),
        title=proposal.title,
        agent_name=proposal.agent.name,
        call_count=len(proposal.calls),
        body=raw,
        proposal=proposal,
    )
