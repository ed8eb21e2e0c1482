"""`access-log:`, `jsonl:` and `sample:`: logs whose entries are flat JSON objects, read by field names.

`access-log:` reads JSON lines in the names of DESIGN 16's nginx `log_format` (`time`, `method`,
`uri`, `status`, `request_id`); `jsonl:` reads any JSON lines by a field mapping; `sample:` reads the
sample API's `GET /v1/audit` answer. A request whose query asks for a dry run (`dryRun=All`) is a
dry run, never a write, whatever its method.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from typing import Any

from reviewer.audit.fields import (
    BadField,
    Entry,
    dig,
    document_entries,
    json_entries,
    split_uri,
    status_field,
    text_field,
    time_field,
)
from reviewer.audit.inputs import AuditInput
from reviewer.reading.audit_rows import WRITE_METHODS, AuditRow, MalformedLine, has_dry_run_param


class BadFieldMapping(ValueError):
    """A field mapping that names a field no row has (`--audit-field NAME=FIELD`)."""


@dataclass(frozen=True)
class FieldNames:
    """Which field of an entry holds each part of a row (dotted for nested: `request.id`).

    `uri` holds the path and query together (nginx's `$request_uri`); where a log keeps them apart,
    name `path` (and `query`) instead. `dry_run` names a field that is true for a dry run.
    """

    time: str = "time"
    method: str = "method"
    uri: str | None = "uri"
    path: str | None = None
    query: str | None = None
    status: str = "status"
    request_id: str = "request_id"
    actor: str | None = "actor"
    user_agent: str | None = "user_agent"
    dry_run: str | None = None

    def mapped(self, mapping: Mapping[str, str]) -> FieldNames:
        """These names with `mapping`'s changes (`{"time": "ts"}`); an unknown name is refused."""
        known = {item.name for item in fields(self)}
        unknown = sorted(set(mapping) - known)
        if unknown:
            raise BadFieldMapping(
                f"no row field named {', '.join(unknown)}; the fields are {', '.join(sorted(known))}"
            )
        changes: dict[str, Any] = dict(mapping)
        if "path" in mapping and "uri" not in mapping:
            changes["uri"] = None
        return replace(self, **changes)


ACCESS_LOG_FIELDS = FieldNames()
SAMPLE_FIELDS = FieldNames(time="at", uri=None, path="path")


def row_of(where: str, entry: Mapping[str, Any], names: FieldNames) -> AuditRow:
    """One flat entry as a row; `BadField` when a field is missing or of the wrong kind."""
    method = text_field(entry, names.method)
    if method is None:
        raise BadField(f"{names.method} is missing")
    if names.uri is not None:
        path, query = split_uri(text_field(entry, names.uri) or "")
    else:
        path = text_field(entry, names.path or "path") or ""
        query = (text_field(entry, names.query) if names.query else None) or ""
    if not path:
        raise BadField(f"{names.uri or names.path} is missing")
    request_id = text_field(entry, names.request_id)
    method = method.upper()
    return AuditRow(
        where=where,
        time=time_field(entry, names.time),
        method=method,
        path=path,
        query=query,
        status=status_field(entry, names.status),
        request_ids=(request_id,) if request_id else (),
        actor=text_field(entry, names.actor) if names.actor else None,
        user_agent=text_field(entry, names.user_agent) if names.user_agent else None,
        is_dry_run=has_dry_run_param(query)
        or (names.dry_run is not None and dig(entry, names.dry_run) is True),
        is_write=method in WRITE_METHODS,
    )


def rows_of(
    entries: Iterator[Entry | MalformedLine], names: FieldNames
) -> Iterator[AuditRow | MalformedLine]:
    """Each entry as a row by `names`; an entry that does not read as one is a `MalformedLine`."""
    for item in entries:
        if isinstance(item, MalformedLine):
            yield item
            continue
        where, entry = item
        try:
            yield row_of(where, entry, names)
        except BadField as error:
            yield MalformedLine(where, str(error))


def read_access_log(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """A reverse proxy's JSON access log, one request a line (DESIGN 16's nginx format by default)."""
    return rows_of(json_entries(source), ACCESS_LOG_FIELDS.mapped(mapping))


def read_jsonl(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """Any JSON lines log, by a field mapping (the access log's names where the mapping says nothing)."""
    return rows_of(json_entries(source), ACCESS_LOG_FIELDS.mapped(mapping))


def read_sample(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """The sample API's audit log (`GET /v1/audit`: `{"entries": [...]}`): the writes it kept."""
    return rows_of(document_entries(source, ("entries",)), SAMPLE_FIELDS.mapped(mapping))
