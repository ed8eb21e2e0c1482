"""Which fields of the proposal format a queue reads, and what an agent leaves out for a queue that
reads fewer.

A queue refuses a field it does not know (the format forbids unknown fields), so a plan carrying a
field a later release added fails on an earlier queue: after a rollback, or during a rolling upgrade
while a replica still runs the earlier release. A queue says what it reads (`GET /v1`, its
`proposal_fields`); before submitting, an agent leaves out each field of the dry run's account of
itself (`dry_run.*`, outside the plan's digest) that the queue does not read, so the reviewer
approves the same plan and digest. A queue from before `GET /v1` names the field it refused in its
422, and the agent leaves that one out and submits again. A field the digest covers is never left
out: the queue's refusal stands, naming it.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from functools import cache
from typing import Any, Final

import msgspec

from reviewer.plan.proposal import Proposal

OMITTABLE: Final = "dry_run."
"""The fields an agent may leave out for a queue that does not read them: the dry run's account of
itself is outside the plan's digest (`plan_sha256`), and a queue that cannot read it shows less of
the dry run, never another plan."""

_REFUSED: Final = re.compile(r"\$((?:\.\w+|\[\d+\])*): Object contains unknown field [`'\"](\w+)[`'\"]")


@cache
def proposal_fields() -> tuple[str, ...]:
    """Every field of the format this release reads, as dotted paths (`dry_run.request_ids`,
    `calls[].request.headers`), sorted: what `GET /v1` advertises."""
    return tuple(sorted(_paths(msgspec.inspect.type_info(Proposal), "")))


def _paths(info: msgspec.inspect.Type, prefix: str) -> Iterator[str]:
    if isinstance(info, msgspec.inspect.UnionType):
        for member in info.types:
            yield from _paths(member, prefix)
    elif isinstance(info, msgspec.inspect.StructType):
        for field in info.fields:
            path = f"{prefix}{field.name}"
            yield path
            yield from _paths(field.type, f"{path}.")
    elif isinstance(info, (msgspec.inspect.ListType, msgspec.inspect.VarTupleType)):
        yield from _paths(info.item_type, f"{prefix.rstrip('.')}[].")
    elif isinstance(info, msgspec.inspect.Metadata):
        yield from _paths(info.type, prefix)


class _DryRunPart(msgspec.Struct):
    """The one part of a plan read to fit it to a queue (the calls are skipped, never built)."""

    dry_run: dict[str, Any] = {}


def fit_for_queue(body: bytes, read: frozenset[str] | None) -> bytes:
    """The plan's JSON without the dry-run fields a queue reading `read` would refuse (`None`: the
    queue did not say, and the body goes as it is). A body that is not a plan goes as it is too: the
    queue's refusal names what is wrong with it."""
    if read is None:
        return body
    try:
        dry_run = msgspec.json.decode(body, type=_DryRunPart).dry_run
    except (msgspec.ValidationError, msgspec.DecodeError):
        return body
    unread = list(_unread(dry_run, "dry_run", read))
    return without_fields(body, unread) if unread else body


def _unread(value: dict[str, Any], path: str, read: frozenset[str]) -> Iterator[str]:
    """The fields under `path` the queue does not read. Only a struct's fields are fields: a map the
    format holds (the sandbox proof's `query`, its parameter names as keys) is read whole."""
    for key, item in value.items():
        field = f"{path}.{key}"
        if field not in read:
            yield field
        elif isinstance(item, dict) and any(known.startswith(f"{field}.") for known in read):
            yield from _unread(item, field, read)


def refused_field(message: str) -> str | None:
    """The field a queue's 422 says it does not know (`$.dry_run: Object contains unknown field
    'request_ids'` is `dry_run.request_ids`), when an agent may leave it out; None otherwise."""
    found = _REFUSED.search(message)
    if found is None:
        return None
    field = f"{found.group(1).lstrip('.')}.{found.group(2)}".lstrip(".")
    return field if field.startswith(OMITTABLE) and "[" not in field else None


def without_fields(body: bytes, fields: Iterable[str]) -> bytes:
    """The plan's JSON without these dry-run fields (each `OMITTABLE`); the rest as it was."""
    document = msgspec.json.decode(body)
    for field in fields:
        assert field.startswith(OMITTABLE), field
        *parents, name = field.split(".")
        holder = document
        for parent in parents:
            holder = holder.get(parent) if isinstance(holder, dict) else None
        if isinstance(holder, dict):
            holder.pop(name, None)
    return msgspec.json.encode(document)
