"""The proposal format v1: its structures, its limits, and the plan digest an approval names.

The format is declared once, as msgspec structs. A plan of 100,000 calls decodes into them in a
fraction of a second and a fraction of the memory that pydantic models would hold, which is what
lets the terminal app open such a plan at once (see the README, "Why msgspec for proposals").
pydantic remains the schema of the queue API's own messages and of the configuration.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterator
from typing import Annotated, Any, Final, Literal

import msgspec
import rfc8785

FORMAT_V1: Final = "reviewer.proposal/v1"

MAX_BODY_BYTES: Final = 64 * 1024 * 1024
MAX_STRING_CHARS: Final = 1024 * 1024
MAX_DEPTH: Final = 64
MAX_CALLS: Final = 200_000
MAX_SAFE_INTEGER: Final = 2**53 - 1
"""RFC 8785 represents numbers as IEEE doubles: a larger integer would be rounded, so it is refused."""

PROPOSAL_ID_PATTERN: Final = r"^[A-Za-z0-9._-]{1,128}$"

Effect = Literal["create", "update", "delete", "read", "other"]
OutcomeStatus = Literal["ok", "refused", "recorded", "error"]
DryRunVia = Literal["server", "fake", "transport", "record"]


class ProposalError(ValueError):
    """A proposal that cannot be accepted; the message names the source and the field."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class Agent(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    run_id: str | None = None


class Target(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    api: str
    base_url: str | None = None
    environment: str | None = None


class DryRun(msgspec.Struct, forbid_unknown_fields=True):
    via: DryRunVia
    write_requests: Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)] | None = None
    writes_kept: Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)] | None = None


class Request(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    method: str
    path: str
    query: dict[str, Any] | None = None
    body: Any = None


class Outcome(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    status: OutcomeStatus
    http_status: Annotated[int, msgspec.Meta(ge=100, le=599)] | None = None
    message: str | None = None
    result: Any = None


class Call(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    seq: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
    tool: str
    effect: Effect
    args: dict[str, Any] | None = None
    request: Request | None = None
    outcome: Outcome | None = None


class Proposal(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal["reviewer.proposal/v1"]
    proposal_id: Annotated[str, msgspec.Meta(pattern=PROPOSAL_ID_PATTERN)]
    revision: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
    title: str
    agent: Agent
    created_at: str
    target: Target
    dry_run: DryRun
    calls: list[Call]
    task: str | None = None


class JSONFloat(float):
    """A float read from a proposal; tagged so the digest can write it the RFC 8785 way."""


_decoder = msgspec.json.Decoder(Proposal, float_hook=JSONFloat)
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")


def parse_proposal(data: bytes | str, source: str = "proposal") -> Proposal:
    """Decode and check one proposal; every failure is a ProposalError naming `source` and the field."""
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_BODY_BYTES:
        raise ProposalError(
            source, f"is {len(raw):,} bytes; a proposal may be at most {MAX_BODY_BYTES:,} bytes"
        )
    try:
        proposal = _decoder.decode(raw)
    except msgspec.ValidationError as error:
        raise ProposalError(source, field_message(str(error))) from None
    except msgspec.DecodeError as error:
        raise ProposalError(source, f"is not valid JSON ({error})") from None
    except RecursionError:
        raise ProposalError(source, f"nests deeper than {MAX_DEPTH} levels") from None
    _check_shape(proposal, source)
    return proposal


def field_message(message: str) -> str:
    """msgspec says `Expected str, got int - at $.calls[3].tool`; lead with the field instead."""
    problem, _, where = message.partition(" - at ")
    return f"{where.strip('`')}: {problem}" if where else problem


def _check_shape(proposal: Proposal, source: str) -> None:
    if not _RFC3339.match(proposal.created_at):
        raise ProposalError(source, "$.created_at: expected an RFC 3339 time such as 2026-10-15T09:00:00Z")
    if len(proposal.calls) > MAX_CALLS:
        raise ProposalError(
            source, f"$.calls: {len(proposal.calls):,} calls; at most {MAX_CALLS:,} are allowed"
        )
    previous = 0
    for index, call in enumerate(proposal.calls):
        if call.seq <= previous:
            raise ProposalError(
                source,
                f"$.calls[{index}].seq: {call.seq} does not follow {previous}; "
                "seq values must be unique and increasing",
            )
        previous = call.seq
    if not _within_limits(proposal):
        raise ProposalError(source, locate_limit_violation(msgspec.to_builtins(proposal)))


def _within_limits(proposal: Proposal) -> bool:
    """Whether every string, integer and nesting level is within the limits.

    The common case (nothing wrong) runs flat loops without building paths; only when something
    is wrong is the whole proposal walked again, by `locate_limit_violation`, to name where.
    """
    texts = [
        proposal.title,
        proposal.task,
        proposal.created_at,
        proposal.agent.name,
        proposal.agent.run_id,
        *msgspec.structs.astuple(proposal.target),
    ]
    values: list[tuple[Any, int]] = []
    for call in proposal.calls:
        texts.append(call.tool)
        values.append((call.args, 4))
        if call.request is not None:
            texts += (call.request.method, call.request.path)
            values += ((call.request.query, 5), (call.request.body, 5))
        if call.outcome is not None:
            texts.append(call.outcome.message)
            values.append((call.outcome.result, 5))
    if any(text is not None and len(text) > MAX_STRING_CHARS for text in texts):
        return False
    return all(value_within_limits(value, depth) for value, depth in values)


def value_within_limits(value: Any, depth: int) -> bool:
    """Whether a decoded JSON value keeps to the string, integer and nesting limits.

    `depth` is the nesting level `value` sits at (1 for a whole document), so a value inside a
    larger structure is held to the limits of the whole. Answers yes or no, fast; when no,
    `locate_limit_violation` says where.
    """
    stack: list[tuple[Any, int]] = [(value, depth)]
    pop, push = stack.pop, stack.append
    while stack:
        item, level = pop()
        kind = type(item)
        if kind is dict or kind is list:
            if level > MAX_DEPTH:
                return False
            if kind is dict and any(len(key) > MAX_STRING_CHARS for key in item):
                return False
            for child in item.values() if kind is dict else item:
                child_kind = type(child)
                if child_kind is dict or child_kind is list:
                    push((child, level + 1))
                elif child_kind is str:
                    if len(child) > MAX_STRING_CHARS:
                        return False
                elif child_kind is int and not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                    return False
        elif kind is str:
            if len(item) > MAX_STRING_CHARS:
                return False
        elif kind is int and not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            return False
    return True


def locate_limit_violation(value: Any) -> str:
    """`$.path: problem` for the first place a whole document breaks a limit; call only when there is one."""
    for path, problem in _violations(value, "$", 1):
        return f"{path}: {problem}"
    raise AssertionError("a limit violation was found but could not be located")


def _violations(value: Any, path: str, depth: int) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        yield path, f"nests deeper than {MAX_DEPTH} levels"
        return
    if isinstance(value, dict):
        for key, child in value.items():
            if len(key) > MAX_STRING_CHARS:
                yield (
                    path,
                    f"a key is {len(key):,} characters; at most {MAX_STRING_CHARS:,} are allowed",
                )
            yield from _violations(child, f"{path}.{key[:40]}", depth + 1)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _violations(child, f"{path}[{index}]", depth + 1)
    elif isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        yield (
            path,
            f"a string of {len(value):,} characters; at most {MAX_STRING_CHARS:,} are allowed",
        )
    elif (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    ):
        yield (
            path,
            (
                f"the integer {str(value)[:30]} is outside ±(2^53−1); "
                "it cannot be represented exactly, so it is refused rather than rounded"
            ),
        )


def canonical_plan(proposal: Proposal) -> bytes:
    """RFC 8785 canonical JSON of what would execute: the target and each call without its outcome.

    A key that a call (or its target or request) does not carry, or carries as null, is left out,
    so adding an optional field as null never changes the digest. msgspec writes the canonical form
    directly (sorted keys, the same string escapes as RFC 8785, floats through `_canonical_float`);
    only a key outside the Basic Multilingual Plane, where UTF-16 order differs from code point
    order, sends the plan through the slower reference implementation.
    """
    plan = {
        "calls": [msgspec.structs.replace(call, outcome=None) for call in proposal.calls],
        "target": proposal.target,
    }
    encoded = msgspec.json.encode(plan, order="sorted", enc_hook=_canonical_float)
    if _ASTRAL_UTF8_LEAD.search(encoded):
        return rfc8785.dumps(msgspec.to_builtins(plan, enc_hook=float))
    return encoded


_ASTRAL_UTF8_LEAD = re.compile(rb"[\xf0-\xf4]")


def _canonical_float(value: Any) -> msgspec.Raw:
    if isinstance(value, float):
        return msgspec.Raw(rfc8785.dumps(float(value)))
    raise TypeError(f"{type(value).__name__} cannot appear in a proposal")


def plan_sha256(proposal: Proposal) -> str:
    """SHA-256 (hex) of `canonical_plan`: the digest shown to the reviewer and named by an approval."""
    return hashlib.sha256(canonical_plan(proposal)).hexdigest()


def _plain_float(value: Any) -> float:
    if isinstance(value, float):
        return float(value)
    raise TypeError(f"{type(value).__name__} cannot appear in a proposal")


def dumps(value: Any) -> bytes:
    """Any proposal value (or the whole proposal) as compact JSON."""
    return msgspec.json.encode(value, enc_hook=_plain_float)
