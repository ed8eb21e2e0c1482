"""`stripe:` Stripe events: a `GET /v1/events` list (`data`), or one event a line.

An event caused by an API request carries it as `request.id` (Stripe's `Request-Id` answer header)
and `request.idempotency_key` (the client's `Idempotency-Key`); an event Stripe made by itself (a
renewal, a payout) has no request and is not a client's write. Stripe has no dry run to mark: test
mode (`livemode: false`) is a separate account, not a dry run.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from reviewer.audit.fields import BadField, dig, document_entries, rows_from, text_field, time_field
from reviewer.audit.inputs import AuditInput
from reviewer.audit.rows import AuditRow, MalformedLine


def read_stripe(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    return rows_from(document_entries(source, ("data",)), _row)


def _row(where: str, event: Mapping[str, Any]) -> AuditRow:
    kind = text_field(event, "type")
    if kind is None:
        raise BadField("type is missing")
    request = dig(event, "request")
    if isinstance(request, str):  # API versions before 2017-05-25 give the request id alone
        ids: tuple[str, ...] = (request,)
    elif isinstance(request, Mapping):
        ids = tuple(
            value
            for value in (text_field(event, "request.id"), text_field(event, "request.idempotency_key"))
            if value
        )
    elif request is None:
        ids = ()
    else:
        raise BadField("request is neither an object nor an id")
    resource = text_field(event, "data.object.object") or ""
    object_id = text_field(event, "data.object.id")
    return AuditRow(
        where=where,
        time=time_field(event, "created"),
        method="",
        path=f"{resource} {object_id}" if object_id else resource,
        request_ids=ids,
        actor=text_field(event, "account"),
        is_write=bool(ids),
        action=kind,
        events_per_request=True,
    )
