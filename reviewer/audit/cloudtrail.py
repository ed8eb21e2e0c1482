"""`cloudtrail:` AWS CloudTrail: a log file's `Records`, or `aws cloudtrail lookup-events` output.

A record names the API call (`eventName` at `eventSource`), not an HTTP request, so it is matched by
the API's own `requestID` (the `x-amzn-RequestId` of the answer). A dry run is answered with the error
`Client.DryRunOperation` and logged like any call: it is never a write, nor is a `readOnly` call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

import msgspec

from reviewer.audit.fields import BadField, dig, document_entries, rows_from, text_field, time_field
from reviewer.audit.inputs import AuditInput
from reviewer.audit.rows import AuditRow, MalformedLine

DRY_RUN_ERROR: Final = "Client.DryRunOperation"
READ_PREFIXES: Final = ("Get", "Describe", "List", "Lookup", "Head", "Search", "BatchGet")


def read_cloudtrail(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    records = document_entries(source, ("Records", "Events"))
    return rows_from(records, lambda where, record: _row(where, _inner_record(record)))


def _inner_record(record: Mapping[str, Any]) -> Mapping[str, Any]:
    """lookup-events wraps each record as a JSON string under `CloudTrailEvent`."""
    inner = record.get("CloudTrailEvent")
    if inner is None:
        return record
    try:
        decoded = msgspec.json.decode(inner) if isinstance(inner, str) else None
    except msgspec.DecodeError:
        decoded = None
    if not isinstance(decoded, dict):
        raise BadField("CloudTrailEvent is not a JSON object in a string")
    return decoded


def _row(where: str, record: Mapping[str, Any]) -> AuditRow:
    name = text_field(record, "eventName")
    if name is None:
        raise BadField("eventName is missing")
    read_only = dig(record, "readOnly")
    is_write = not read_only if isinstance(read_only, bool) else not name.startswith(READ_PREFIXES)
    request_id = text_field(record, "requestID")
    error = text_field(record, "errorCode")
    return AuditRow(
        where=where,
        time=time_field(record, "eventTime"),
        method="",
        path=text_field(record, "eventSource") or "",
        status=None,
        request_ids=(request_id,) if request_id else (),
        actor=text_field(record, "userIdentity.arn") or text_field(record, "userIdentity.principalId"),
        user_agent=text_field(record, "userAgent"),
        is_dry_run=error == DRY_RUN_ERROR,
        is_write=is_write,
        action=name,
        error=error if error != DRY_RUN_ERROR else None,
    )
