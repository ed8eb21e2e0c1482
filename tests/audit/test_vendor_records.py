"""The Kubernetes, CloudTrail and Stripe readers, on records shaped exactly as each vendor's documentation
shows them (Kubernetes' auditing task page, CloudTrail's record contents and `lookup-events` output,
Stripe's Event object and `GET /v1/events` list). No emulator here writes these logs: the records are
written out by hand from those pages, dry-run markers included.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reviewer.audit.matching import SentCall, Window, match_audit, unplanned_rows
from reviewer.audit.registry import audit_source
from reviewer.audit.rows import AuditRow, MalformedLine

START = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(minutes=1))


def k8s_event(audit_id: str, verb: str, uri: str, code: int, stage: str = "ResponseComplete") -> dict:
    return {
        "kind": "Event",
        "apiVersion": "audit.k8s.io/v1",
        "level": "Metadata",
        "auditID": audit_id,
        "stage": stage,
        "requestURI": uri,
        "verb": verb,
        "user": {"username": "admin", "groups": ["system:masters", "system:authenticated"]},
        "sourceIPs": ["10.0.0.5"],
        "userAgent": "kubectl/v1.30.0 (linux/amd64) kubernetes/7c48c2b",
        "objectRef": {"resource": "deployments", "namespace": "shop", "name": "web", "apiGroup": "apps"},
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": "2026-12-02T01:00:10.000000Z",
        "stageTimestamp": "2026-12-02T01:00:10.020000Z",
        "annotations": {"authorization.k8s.io/decision": "allow", "authorization.k8s.io/reason": ""},
    }


def rows_of(spec: str) -> list[AuditRow | MalformedLine]:
    return list(audit_source(spec).rows())


def test_kubernetes_events_by_audit_id_dry_runs_and_stages(tmp_path: Path) -> None:
    """One request, logged at RequestReceived and ResponseComplete, is one row; `dryRun=All` in the
    requestURI is a dry run, never a write; the patch the run sent with `Audit-ID` matches by it."""
    uri = "/apis/apps/v1/namespaces/shop/deployments/web"
    log = tmp_path / "audit.log"
    events = [
        k8s_event("d1", "patch", uri + "?dryRun=All&fieldManager=kubectl", 200),
        k8s_event("a1", "patch", uri, 200, stage="RequestReceived"),
        k8s_event("a1", "patch", uri, 200),
        k8s_event("z9", "delete", "/api/v1/namespaces/shop/pods/web-1", 200),
        k8s_event("g1", "get", uri, 200),
    ]
    log.write_text("".join(json.dumps(event) + "\n" for event in events), encoding="utf-8")
    rows = [row for row in rows_of(f"k8s:{log}") if isinstance(row, AuditRow)]
    assert [(row.action, row.is_dry_run, row.counts_as_write) for row in rows] == [
        ("patch", True, False),
        ("patch", False, True),
        ("delete", False, True),
        ("get", False, False),
    ]
    assert rows[1].method == "PATCH" and rows[1].actor == "admin from 10.0.0.5"
    call = SentCall(1, "scale", "PATCH", uri, (), 200, ("a1",))
    result = match_audit([call], audit_source(f"k8s:{log}").rows(), WINDOW)
    assert [(one.verdict, one.matched_by) for one in result.calls] == [("matched", "request id")]
    assert [row.path for row in unplanned_rows(result.unplanned)] == ["/api/v1/namespaces/shop/pods/web-1"]
    assert result.dry_runs_in_window == 1


CLOUDTRAIL_DRY_RUN = {
    "eventVersion": "1.08",
    "userIdentity": {
        "type": "IAMUser",
        "principalId": "AIDAEXAMPLEPRINCIPAL",
        "arn": "arn:aws:iam::123456789012:user/Alice",
        "accountId": "123456789012",
        "accessKeyId": "AKIAIOSFODNN7EXAMPLE",
        "userName": "Alice",
    },
    "eventTime": "2026-12-02T01:00:05Z",
    "eventSource": "ec2.amazonaws.com",
    "eventName": "TerminateInstances",
    "awsRegion": "us-east-1",
    "sourceIPAddress": "203.0.113.5",
    "userAgent": "aws-cli/2.15.0 Python/3.11.6",
    "errorCode": "Client.DryRunOperation",
    "errorMessage": "Request would have succeeded, but DryRun flag is set.",
    "requestParameters": {"instancesSet": {"items": [{"instanceId": "i-0abcd1234efgh5678"}]}},
    "responseElements": None,
    "requestID": "dry-1111-2222",
    "eventID": "e1",
    "readOnly": False,
    "eventType": "AwsApiCall",
    "managementEvent": True,
    "recipientAccountId": "123456789012",
    "eventCategory": "Management",
}
CLOUDTRAIL_REAL = {
    **CLOUDTRAIL_DRY_RUN,
    "eventTime": "2026-12-02T01:00:20Z",
    "requestID": "real-3333-4444",
    "eventID": "e2",
    "responseElements": {"instancesSet": {"items": [{"instanceId": "i-0abcd1234efgh5678"}]}},
}
del CLOUDTRAIL_REAL["errorCode"], CLOUDTRAIL_REAL["errorMessage"]
CLOUDTRAIL_READ = {**CLOUDTRAIL_REAL, "eventName": "DescribeInstances", "readOnly": True, "requestID": "r-5"}


def test_cloudtrail_records_and_lookup_events(tmp_path: Path) -> None:
    """`Client.DryRunOperation` is a dry run; a `readOnly` call is no write; the run's call matches by
    the API's own `requestID` (the `x-amzn-RequestId` it answered); `lookup-events` output reads the same."""
    records = tmp_path / "123456789012_CloudTrail_us-east-1_20261202T0100Z_x.json"
    records.write_text(json.dumps({"Records": [CLOUDTRAIL_DRY_RUN, CLOUDTRAIL_REAL, CLOUDTRAIL_READ]}))
    lookup = tmp_path / "lookup.json"
    lookup.write_text(
        json.dumps(
            {
                "Events": [
                    {
                        "EventId": record["eventID"],
                        "EventName": record["eventName"],
                        "ReadOnly": "false",
                        "AccessKeyId": "AKIAIOSFODNN7EXAMPLE",
                        "EventTime": "2026-12-02T01:00:05+00:00",
                        "EventSource": "ec2.amazonaws.com",
                        "Username": "Alice",
                        "Resources": [{"ResourceType": "AWS::EC2::Instance", "ResourceName": "i-0abcd"}],
                        "CloudTrailEvent": json.dumps(record),
                    }
                    for record in (CLOUDTRAIL_DRY_RUN, CLOUDTRAIL_REAL, CLOUDTRAIL_READ)
                ]
            }
        )
    )
    for spec in (f"cloudtrail:{records}", f"cloudtrail:{lookup}"):
        rows = [row for row in rows_of(spec) if isinstance(row, AuditRow)]
        assert [(row.is_dry_run, row.counts_as_write) for row in rows] == [
            (True, False),
            (False, True),
            (False, False),
        ]
        assert rows[1].actor == "arn:aws:iam::123456789012:user/Alice"
        call = SentCall(1, "terminate", "POST", "/", (), 200, ("mine-0", "real-3333-4444"))
        result = match_audit([call], audit_source(spec).rows(), WINDOW)
        assert [(one.verdict, one.matched_by) for one in result.calls] == [("matched", "request id")], spec
        assert result.unplanned == () and result.dry_runs_in_window == 1


def stripe_event(event_id: str, kind: str, request: dict | None, created: int) -> dict:
    return {
        "id": event_id,
        "object": "event",
        "api_version": "2024-06-20",
        "created": created,
        "data": {"object": {"id": "cus_NffrFeUfNV2Hib", "object": "customer", "email": "jenny@example.com"}},
        "livemode": False,
        "pending_webhooks": 0,
        "request": request,
        "type": kind,
    }


def test_stripe_events_by_request_id_and_idempotency_key(tmp_path: Path) -> None:
    """The run's create is found by the Idempotency-Key it sent (`request.idempotency_key`); another
    request's event in the window is unplanned; an event Stripe made by itself (`request.id` null) is
    no client's write. Stripe keeps no dry runs (test mode is another account), so none is marked."""
    at = int(START.timestamp()) + 10
    listing = {
        "object": "list",
        "url": "/v1/events",
        "has_more": False,
        "data": [
            stripe_event("evt_3", "invoice.created", {"id": None, "idempotency_key": None}, at + 2),
            stripe_event("evt_2", "customer.updated", {"id": "req_other", "idempotency_key": None}, at + 1),
            stripe_event("evt_1", "customer.created", {"id": "req_1", "idempotency_key": "key-mine"}, at),
        ],
    }
    events = tmp_path / "events.json"
    events.write_text(json.dumps(listing))
    rows = [row for row in rows_of(f"stripe:{events}") if isinstance(row, AuditRow)]
    assert [(row.action, row.counts_as_write, row.is_dry_run) for row in rows] == [
        ("invoice.created", False, False),
        ("customer.updated", True, False),
        ("customer.created", True, False),
    ]
    call = SentCall(1, "create_customer", "POST", "/v1/customers", (), 200, ("key-mine",))
    result = match_audit([call], audit_source(f"stripe:{events}").rows(), WINDOW)
    assert [(one.verdict, one.row.action if one.row else None) for one in result.calls] == [
        ("matched", "customer.created")
    ]
    assert [row.action for row in unplanned_rows(result.unplanned)] == ["customer.updated"]


def test_cloudtrail_records_with_an_error_or_another_event_differ(tmp_path: Path) -> None:
    """A record found by the call's request id is matched only when it says what the call did: an
    `errorCode` for a call that succeeded differs, and so does another `eventName` than the `Action`
    the call asked for, or a read-only event for a write."""
    denied = {**CLOUDTRAIL_REAL, "requestID": "r-denied", "errorCode": "AccessDeniedException"}
    other = {**CLOUDTRAIL_REAL, "requestID": "r-other", "eventName": "StopInstances"}
    read = {**CLOUDTRAIL_READ, "requestID": "r-read"}
    records = tmp_path / "records.json"
    records.write_text(json.dumps({"Records": [CLOUDTRAIL_REAL, denied, other, read]}))
    action = (("Action", "TerminateInstances"),)
    calls = [
        SentCall(1, "terminate", "POST", "/", action, 200, ("real-3333-4444",)),
        SentCall(2, "terminate", "POST", "/", action, 200, ("r-denied",)),
        SentCall(3, "terminate", "POST", "/", action, 200, ("r-other",)),
        SentCall(4, "terminate", "POST", "/", (), 200, ("r-read",)),
    ]
    result = match_audit(calls, audit_source(f"cloudtrail:{records}").rows(), WINDOW)
    assert [one.verdict for one in result.calls] == ["matched", "differs", "differs", "differs"]
    assert result.calls[1].differences == (
        "error: the run's call succeeded, the log says AccessDeniedException",
    )
    assert result.calls[2].differences == ("operation: run TerminateInstances, log StopInstances",)
    assert result.calls[3].differences == ("operation: run POST, log DescribeInstances (a read)",)
    assert not result.verified


def test_stripe_events_of_another_kind_differ_and_a_borrowed_key_is_unplanned(tmp_path: Path) -> None:
    """A Stripe event under the call's idempotency key is matched only when its type is what the call
    did: a `customer.deleted` for a create, or a `charge.created` for a customer's create, differs.
    Further events of the same request that agree are the request's (Stripe logs several); one that
    does not agree is a write no approved call made, reusing the call's id."""
    at = int(START.timestamp()) + 10
    listing = {
        "object": "list",
        "data": [
            stripe_event("evt_1", "customer.created", {"id": "req_1", "idempotency_key": "key-1"}, at),
            stripe_event("evt_2", "customer.updated", {"id": "req_1", "idempotency_key": "key-1"}, at),
            stripe_event("evt_3", "customer.deleted", {"id": "req_1", "idempotency_key": "key-1"}, at),
            stripe_event("evt_4", "customer.deleted", {"id": "req_2", "idempotency_key": "key-2"}, at),
            {
                **stripe_event("evt_5", "charge.created", {"id": "req_3", "idempotency_key": "key-3"}, at),
                "data": {"object": {"id": "ch_1", "object": "charge"}},
            },
        ],
    }
    events = tmp_path / "events.json"
    events.write_text(json.dumps(listing))
    calls = [
        SentCall(1, "create_customer", "POST", "/v1/customers", (), 200, ("key-1",)),
        SentCall(2, "create_customer", "POST", "/v1/customers", (), 200, ("key-2",)),
        SentCall(3, "create_customer", "POST", "/v1/customers", (), 200, ("key-3",)),
    ]
    result = match_audit(calls, audit_source(f"stripe:{events}").rows(), WINDOW)
    assert [(one.verdict, one.row.action if one.row else None) for one in result.calls] == [
        ("matched", "customer.created"),
        ("differs", "customer.deleted"),
        ("differs", "charge.created"),
    ]
    assert result.calls[1].differences == ("event: run POST /v1/customers, log customer.deleted",)
    assert "another kind of object" in result.calls[2].differences[0]
    (borrowed,) = result.unplanned
    assert (borrowed.row.action, borrowed.notes) == ("customer.deleted", ("reuses call 1's request id",))
    assert not result.verified
