"""What a run's report says of its verification against an audit source: the source's name without a
credential, each call's verdict, and the writes nobody approved with their actor, every string from
the log made visible and within the queue's limits."""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from pydantic import TypeAdapter

from reviewer.audit.checks import verify_run
from reviewer.audit.inputs import AuditInput, AuditSourceUnreadable
from reviewer.audit.matching import AuditMatch, CallInLog, SentCall, Unplanned
from reviewer.audit.registry import AuditSource, audit_source
from reviewer.audit.reported import TEXT_LIMIT, reported_audit, unreadable_audit
from reviewer.audit.rows import AuditRow, MalformedLine
from reviewer.queue.messages import MAX_UNPLANNED_LISTED, AuditVerification

AT = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
CALL = SentCall(1, "create_ticket", "POST", "/v1/tickets", (), 201, ("rid-1",))
MATCHED = AuditRow("access.log:3", AT, "POST", "/v1/tickets", status=201, request_ids=("rid-1",))


def hostile_row(index: int = 0) -> AuditRow:
    return AuditRow(
        where=f"access.log:{10 + index}",
        time=AT,
        method="DELETE",
        path="/v1/tickets/t2\x1b[2J" + "x" * 2_000,
        query="force=1",
        status=204,
        request_ids=("other\u202e-id",),
        actor="mallory\x1b]0;owned\x07",
    )


def match(unplanned: tuple[AuditRow, ...], **counts: int) -> AuditMatch:
    return AuditMatch(
        calls=(CallInLog(CALL, "matched", MATCHED, "request id"),),
        unplanned=tuple(Unplanned(row) for row in unplanned),
        rows_read=counts.get("rows_read", 5),
        rows_in_window=counts.get("rows_in_window", 5),
        dry_runs_in_window=0,
        malformed_count=counts.get("malformed_count", 0),
        malformed=(MalformedLine("access.log:7", "not JSON"),) if counts.get("malformed_count") else (),
    )


def test_the_writes_nobody_approved_are_reported_with_their_actor_made_visible_and_clipped() -> None:
    reported = reported_audit(match((hostile_row(),)), "access-log:/var/log/nginx/api.json")
    TypeAdapter(AuditVerification).validate_python(reported, strict=True)  # the queue takes it
    assert reported["source"] == "access-log:/var/log/nginx/api.json"
    assert reported["calls"] == [
        {"seq": 1, "verdict": "matched", "where": "access.log:3", "matched_by": "request id"}
    ]
    (write,) = reported["unplanned"]
    assert write["method"] == "DELETE" and write.get("status") == 204
    assert write.get("actor") == "mallory\\x1b]0;owned\\x07"
    assert write.get("request_id") == "other\\u202e-id"
    assert write["path"].startswith("/v1/tickets/t2\\x1b[2J") and len(write["path"]) == TEXT_LIMIT
    assert write.get("time") == AT.isoformat() and write.get("where") == "access.log:10"
    assert reported["unplanned_count"] == 1 and reported["complete"]
    assert "problem" not in reported


def test_past_the_listed_writes_the_rest_are_counted() -> None:
    rows = tuple(hostile_row(index) for index in range(MAX_UNPLANNED_LISTED + 5))
    reported = reported_audit(match(rows), "k8s:audit.log")
    assert len(reported["unplanned"]) == MAX_UNPLANNED_LISTED
    assert reported["unplanned_count"] == MAX_UNPLANNED_LISTED + 5


def test_a_log_that_cannot_vouch_says_why() -> None:
    empty = reported_audit(match((), rows_in_window=0, rows_read=40), "access-log:a.log")
    assert not empty["complete"] and empty.get("problem") == "no entries in the run's window (40 read)"
    broken = reported_audit(match((), malformed_count=3), "access-log:a.log")
    assert broken.get("problem") == "3 lines could not be read, first access.log:7 (not JSON)"
    unread = unreadable_audit("sample:https://api.example/v1/audit", "answered 401, not 200")
    assert unread == {
        "source": "sample:https://api.example/v1/audit",
        "complete": False,
        "calls": [],
        "unplanned": [],
        "unplanned_count": 0,
        "problem": "could not be read: answered 401, not 200",
    }


def test_a_url_sources_name_leaves_its_credentials_out() -> None:
    """A token in the URL's query or user info never reaches the report (which carries the name)."""
    for spec in (
        "jsonl:https://logs.example/api?access_token=s3cr3t",
        "jsonl:https://u:s3cr3t@logs.example/api",
    ):
        source = audit_source(spec)
        assert source.name == "jsonl:https://logs.example/api"
        assert "s3cr3t" not in str(reported_audit(match(()), source.name))


class _Run:
    """A real run that sent nothing, as `verify_run` reads it."""

    approval = SimpleNamespace(
        proposal=SimpleNamespace(
            target=SimpleNamespace(base_url="http://127.0.0.1:1"), dry_run=SimpleNamespace(request_ids=None)
        )
    )

    def executed_calls(self) -> list[Any]:
        return []

    def request_ids(self) -> list[dict[str, Any]]:
        return []

    def tool_spans(self) -> list[dict[str, Any]]:
        return []


def broken_reader(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    raise RuntimeError("a package's reader with a bug")
    yield  # a generator, as readers are


def test_a_reader_that_fails_in_its_own_way_leaves_the_report_saying_so() -> None:
    """A kind a package added may raise anything: the run's report still goes, saying the log was not read."""
    source = AuditSource("plugged", broken_reader, AuditInput("/var/log/x.log"))
    result, reported = verify_run(_Run(), source)
    assert result is None and not reported["complete"]
    assert (
        reported.get("problem")
        == "could not be read: its reader failed: RuntimeError: a package's reader with a bug"
    )


TOKEN_URL = "https://logs.example/api/audit?access_token=s3cr3t-query&day=today"


def quoting_reader(error: type[Exception]) -> Any:
    """A reader that fails with a message quoting its whole location and its headers, as an httpx
    error quotes the URL it was sent to."""

    def read(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
        raise error(f"GET {source.location} failed, headers {dict(source.headers)}")
        yield

    return read


def test_a_readers_error_reaches_the_report_without_the_locations_secrets() -> None:
    """A token in the URL's query, in its user info or in a header never reaches the report, whatever
    the reader's error quotes: the source is named by its credential-free name."""
    for error in (RuntimeError, AuditSourceUnreadable):
        for url in (TOKEN_URL, "https://reader:s3cr3t-user@logs.example/api/audit"):
            headers = {"Authorization": "Bearer s3cr3t-header"}
            source = AuditSource("plugged", quoting_reader(error), AuditInput(url, headers))
            _, reported = verify_run(_Run(), source)
            problem = reported.get("problem") or ""
            assert "s3cr3t" not in problem, problem
            assert "GET https://logs.example/api/audit failed" in problem
            assert reported["source"] == "plugged:https://logs.example/api/audit"


def test_an_unreadable_source_says_so_without_its_secrets_wherever_it_is_shown() -> None:
    """`rows()` itself blanks them: `reviewer run` and `mcp-gate` print its error when they refuse."""
    source = AuditSource(
        "plugged", quoting_reader(AuditSourceUnreadable), AuditInput(TOKEN_URL, {"X-Key": "s3cr3t-header"})
    )
    with pytest.raises(AuditSourceUnreadable) as raised:
        list(source.rows())
    assert "s3cr3t" not in str(raised.value) and "https://logs.example/api/audit" in str(raised.value)


EXCLUDED_LINE = (
    "note: 1 audit entry excluded as the dry run's own requests, by request ids the proposal names "
    "(the proposal's word, not the API's)"
)


def test_an_entry_left_out_as_the_dry_runs_own_is_counted_and_said_to_rest_on_the_proposal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An nginx log whose first entry carries a request id the proposal names as its dry run's: the
    entry is left out of the writes, the report counts it, and `reviewer verify` says that rests on
    the ids the proposal names, not on the API. A log with no such entry says nothing of it."""
    from reviewer.audit.checks import run_against
    from reviewer.audit.commands import _print
    from reviewer.audit.matching import Window
    from reviewer.tui.screens.audit_source import checked_audit

    window = Window(AT, AT + timedelta(minutes=1))
    log = tmp_path / "access.log"
    log.write_text(
        nginx_line(1, "POST", "/v1/tickets?dryRun=All", 201, "dry-1")
        + nginx_line(2, "POST", "/v1/tickets", 201, "rid-1"),
        encoding="utf-8",
    )
    source = audit_source(f"access-log:{log}")
    result = run_against(source, [CALL], window, ["dry-1"])
    assert (result.verified, result.gate_dry_runs) == (True, 1)
    reported = reported_audit(result, source.name)
    TypeAdapter(AuditVerification).validate_python(reported, strict=True)
    assert reported.get("dry_run_entries_excluded") == 1
    assert checked_audit(dict(reported)).get("dry_run_entries_excluded") == 1
    _print(result, source.name, window)
    assert EXCLUDED_LINE in capsys.readouterr().out.splitlines()

    result = run_against(source, [CALL], window, ["another-id"])
    assert result.gate_dry_runs == 0
    assert "dry_run_entries_excluded" not in reported_audit(result, source.name)
    _print(result, source.name, window)
    assert "excluded as the dry run's own" not in capsys.readouterr().out


def test_a_report_from_before_the_count_still_loads_and_a_count_past_the_bound_does_not() -> None:
    older = {
        "source": "access-log:a.log",
        "complete": True,
        "calls": [],
        "unplanned": [],
        "unplanned_count": 0,
    }
    TypeAdapter(AuditVerification).validate_python(older, strict=True)
    with pytest.raises(ValueError):
        TypeAdapter(AuditVerification).validate_python({**older, "dry_run_entries_excluded": -1})


def nginx_line(second: int, method: str, uri: str, status: int, request_id: str) -> str:
    """One line as the nginx format of docs/audit-logs.md writes it."""
    time = (AT + timedelta(seconds=second)).isoformat()
    return (
        json.dumps({"time": time, "method": method, "uri": uri, "status": status, "request_id": request_id})
        + "\n"
    )
