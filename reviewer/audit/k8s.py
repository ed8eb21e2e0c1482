"""`k8s:` Kubernetes audit events (`audit.k8s.io/v1` `Event`, one a line, as the log backend writes them).

A request is logged once per stage; only its last stage (`ResponseComplete`, or `Panic`) is a row, so
one request is one row. `auditID` is the request's id: the API server takes it from the client's
`Audit-ID` header. A dry run (`?dryRun=All` in `requestURI`) is never a write: the API server honours
the parameter for every verb that writes, so its presence is the API's own word.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any, Final

from reviewer.audit.fields import (
    BadField,
    Entry,
    dig,
    json_entries,
    rows_from,
    split_uri,
    status_field,
    text_field,
    time_field,
)
from reviewer.audit.inputs import AuditInput
from reviewer.audit.rows import AuditRow, MalformedLine, has_dry_run_param

VERB_METHODS: Final = {
    "create": "POST",
    "update": "PUT",
    "patch": "PATCH",
    "delete": "DELETE",
    "deletecollection": "DELETE",
    "get": "GET",
    "list": "GET",
    "watch": "GET",
}
WRITE_VERBS: Final = frozenset({"create", "update", "patch", "delete", "deletecollection"})
FINAL_STAGES: Final = frozenset({"ResponseComplete", "Panic"})


def read_k8s(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """Each request's final audit event as a row (an `EventList` line is read event by event)."""
    return rows_from(_final_events(json_entries(source)), _row)


def _final_events(entries: Iterator[Entry | MalformedLine]) -> Iterator[Entry | MalformedLine]:
    """The events of each line (one, or an `EventList`'s items) at their last stage, one per request."""
    for item in entries:
        if isinstance(item, MalformedLine):
            yield item
            continue
        where, entry = item
        listed = entry.get("kind") == "EventList"
        events = entry.get("items") if listed else [entry]
        for index, event in enumerate(events if isinstance(events, list) else []):
            at = f"{where}[{index}]" if listed else where
            if not isinstance(event, dict):
                yield MalformedLine(at, "an EventList item that is not an object")
            elif event.get("stage") in FINAL_STAGES:
                yield at, event


def _row(where: str, event: Mapping[str, Any]) -> AuditRow:
    verb = text_field(event, "verb")
    uri = text_field(event, "requestURI")
    if verb is None or uri is None:
        raise BadField("verb or requestURI is missing")
    path, query = split_uri(uri)
    audit_id = text_field(event, "auditID")
    source_ips = dig(event, "sourceIPs")
    actor = text_field(event, "user.username")
    if actor is not None and isinstance(source_ips, list) and source_ips:
        actor = f"{actor} from {source_ips[0]}"
    return AuditRow(
        where=where,
        time=time_field(event, "stageTimestamp") or time_field(event, "requestReceivedTimestamp"),
        method=VERB_METHODS.get(verb, verb.upper()),
        path=path,
        query=query,
        status=status_field(event, "responseStatus.code"),
        request_ids=(audit_id,) if audit_id else (),
        actor=actor,
        user_agent=text_field(event, "userAgent"),
        is_dry_run=has_dry_run_param(query),
        dry_run_param=has_dry_run_param(query),
        is_write=verb in WRITE_VERBS,
        action=verb,
    )
