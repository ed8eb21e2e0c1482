"""`access-log:`, `jsonl:` and `sample:`: logs whose entries are flat JSON objects, read by field names.

`access-log:` reads JSON lines in the names of the nginx `log_format` of docs/audit-logs.md (`time`, `method`,
`uri`, `status`, `request_id`); `jsonl:` reads any JSON lines by a field mapping; `sample:` reads the
sample API's `GET /v1/audit` answer. A request whose query merely asks for a dry run (`dry_run=1`) is
still a write: the log cannot say the API honoured it. It is noted (`dry_run_param`); only a
`dry_run` field the log keeps, or the gate's own request id, makes an entry a dry run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, fields, replace
from datetime import datetime
from typing import Any

import msgspec

from reviewer.audit.fields import (
    BadField,
    Entry,
    decoded,
    dig,
    document_entries,
    json_entries,
    rows_from,
    split_uri,
    status_field,
    text_field,
    time_field,
)
from reviewer.audit.inputs import AuditInput
from reviewer.audit.rows import WRITE_METHODS, AuditRow, MalformedLine, has_dry_run_param


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
    uri = text_field(entry, names.uri) if names.uri is not None else None
    return _row(
        where,
        names,
        LineValues(
            method=text_field(entry, names.method),
            uri=uri,
            path=text_field(entry, names.path or "path") if names.uri is None else None,
            query=text_field(entry, names.query) if names.query else None,
            time=time_field(entry, names.time),
            status=status_field(entry, names.status),
            request_id=text_field(entry, names.request_id),
            actor=text_field(entry, names.actor) if names.actor else None,
            user_agent=text_field(entry, names.user_agent) if names.user_agent else None,
            dry_run=names.dry_run is not None and dig(entry, names.dry_run) is True,
        ),
    )


class LineValues(msgspec.Struct, frozen=True):
    """One entry's values as a row reads them, however they were read: field by field from a dict
    (`row_of`), or decoded at once from a line whose fields have flat names (`typed_rows`, whose
    struct has these attributes under the log's own names)."""

    time: datetime | None = None
    method: str | None = None
    uri: str | None = None
    path: str | None = None
    query: str | None = None
    status: int | None = None
    request_id: str | None = None
    actor: str | None = None
    user_agent: str | None = None
    dry_run: bool | None = None


def _row(where: str, names: FieldNames, values: LineValues) -> AuditRow:
    """The row of one entry's values; `BadField` for what no row can hold."""
    method, path, query, status = values.method, values.path, values.query, values.status
    if not method:
        raise BadField(f"{names.method} is missing")
    if values.uri is not None:
        path, query = split_uri(values.uri)
    if not path:
        raise BadField(f"{names.uri or names.path} is missing")
    if status is not None and not 100 <= status <= 599:
        raise BadField(f"{names.status} {status} is not an HTTP status")
    query = query or ""
    method = method.upper()
    return AuditRow(
        where=where,
        time=values.time,
        method=method,
        path=path,
        query=query,
        status=status,
        request_ids=(values.request_id,) if values.request_id else (),
        actor=values.actor or None,
        user_agent=values.user_agent or None,
        is_dry_run=values.dry_run is True,
        is_write=method in WRITE_METHODS,
        dry_run_param=has_dry_run_param(query),
    )


def typed_rows(source: AuditInput, names: FieldNames) -> Iterator[AuditRow | MalformedLine]:
    """JSON lines whose fields have flat names, decoded straight into a struct of those fields (in C):
    a third of the time of a dict read field by field, which a 1,000,000-line log needs. A field of
    the wrong type makes the line malformed, in msgspec's words (`Expected int, got str - at $.status`)."""
    given = (
        {**vars(names), "path": names.path or "path"} if names.uri is None else {**vars(names), "path": None}
    )
    # A row field the log does not have takes a name no JSON key has, so it decodes as None.
    fields = [(attribute.name, attribute.type, None) for attribute in msgspec.structs.fields(LineValues)]
    line_type = msgspec.defstruct(
        "LogLine",
        fields,
        bases=(LineValues,),
        rename={name: given[name] or f"(not read: {name})" for name, _, _ in fields},
    )
    decode = msgspec.json.Decoder(line_type).decode
    for item in source.lines():
        if isinstance(item, MalformedLine):
            yield item
            continue
        where, line = item
        if not line.strip():
            continue
        entry = decoded(where, line, decode)  # a LineValues, under the log's own field names
        if isinstance(entry, MalformedLine):
            yield entry
            continue
        try:
            yield _row(where, names, entry)
        except BadField as error:
            yield MalformedLine(where, str(error))


def rows_of(
    entries: Iterator[Entry | MalformedLine], names: FieldNames
) -> Iterator[AuditRow | MalformedLine]:
    """Each entry as a row by `names`; an entry that does not read as one is a `MalformedLine`."""
    return rows_from(entries, lambda where, entry: row_of(where, entry, names))


def read_access_log(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """A reverse proxy's JSON access log, one request a line (by default the nginx format of
    docs/audit-logs.md): typed, since a proxy writes each field with one type; nested names are read
    as `jsonl:` reads them."""
    names = ACCESS_LOG_FIELDS.mapped(mapping)
    if any("." in name for name in vars(names).values() if name is not None):
        return rows_of(json_entries(source), names)
    return typed_rows(source, names)


def read_jsonl(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """Any JSON lines log, by a field mapping (the access log's names where the mapping says nothing)."""
    return rows_of(json_entries(source), ACCESS_LOG_FIELDS.mapped(mapping))


def read_sample(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """The sample API's audit log (`GET /v1/audit`: `{"entries": [...]}`): the writes it kept."""
    return rows_of(document_entries(source, ("entries",)), SAMPLE_FIELDS.mapped(mapping))
