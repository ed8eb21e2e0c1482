"""The access-log reader and the matching: malformed lines named, dry runs never writes, logs without ids
matched by method, path and query only where one entry could be it (never by body, never by
nearest time), a log rotated during the run read across files."""

from __future__ import annotations

import gzip
import json
import os
from datetime import UTC, datetime, timedelta
from pathlib import Path

from reviewer.audit.matching import (
    SentCall,
    Window,
    match_audit,
    sent_calls,
    tool_calls,
    unplanned_rows,
)
from reviewer.audit.registry import audit_source
from reviewer.audit.rows import AuditRow, MalformedLine

START = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
WINDOW = Window(START, START + timedelta(minutes=1))


def line(second: int, method: str, uri: str, status: int, request_id: str = "") -> str:
    """One line as the nginx format of docs/audit-logs.md writes it (an absent header is an empty string)."""
    time = (START + timedelta(seconds=second)).isoformat()
    return json.dumps(
        {"time": time, "method": method, "uri": uri, "status": status, "request_id": request_id}
    )


def write(path: Path, *lines: str) -> Path:
    path.write_text("".join(text + "\n" for text in lines), encoding="utf-8")
    return path


def test_a_malformed_line_is_counted_and_named_never_a_match(tmp_path: Path) -> None:
    log = write(
        tmp_path / "access.log",
        line(1, "POST", "/v1/tickets", 201, "id-1"),
        '{"time": "2026-12-02T01:00:02+00:00", "method": "POST", "uri": "/v1/tickets", "st',
        line(3, "POST", "/v1/tickets", 201, "id-2")[:-1] + ', "status": "abc"}',
        "[1, 2]",
    )
    rows = list(audit_source(f"access-log:{log}").rows())
    assert [type(row).__name__ for row in rows] == [
        "AuditRow",
        "MalformedLine",
        "MalformedLine",
        "MalformedLine",
    ]
    assert [row.where for row in rows if isinstance(row, MalformedLine)] == [
        f"{log}:2",
        f"{log}:3",
        f"{log}:4",
    ]
    calls = [
        SentCall(1, "create", "POST", "/v1/tickets", (), 201, ("id-1",)),
        SentCall(2, "create", "POST", "/v1/tickets", (), 201, ("id-2",)),
    ]
    result = match_audit(calls, audit_source(f"access-log:{log}").rows(), WINDOW)
    assert [one.verdict for one in result.calls] == ["matched", "missing"]
    assert (result.malformed_count, result.complete, result.verified) == (3, False, False)


def test_a_dry_run_is_known_by_the_gates_request_id_never_by_a_query_parameter(tmp_path: Path) -> None:
    """Only the entry carrying an id the gate sent a dry-run request with is the gate's dry run; a
    write whose query merely asks for one (`?dry_run=1`, `?validateOnly=true`) is a write, said so,
    because an API that does not know the parameter writes. A second entry under the gate's dry-run
    id is a write too: one id, one entry."""
    log = write(
        tmp_path / "access.log",
        line(1, "POST", "/v1/tickets?dryRun=All", 201, request_id="gate-dry-1"),
        line(2, "PATCH", "/v1/tickets/t2?dry_run=1", 200, request_id="other"),
        line(3, "POST", "/v1/tickets?validateOnly=true", 201),
        line(4, "DELETE", "/v1/tickets/t3?dryRun=All", 204, request_id="gate-dry-1"),
        line(5, "GET", "/v1/tickets", 200),
    )
    result = match_audit([], audit_source(f"access-log:{log}").rows(), WINDOW, dry_run_ids={"gate-dry-1"})
    assert result.dry_runs_in_window == result.gate_dry_runs == 1
    assert [(one.row.method, one.row.query) for one in result.unplanned] == [
        ("DELETE", "dryRun=All"),
        ("PATCH", "dry_run=1"),
        ("POST", "validateOnly=true"),
    ]
    borrowed, *dressed = result.unplanned
    assert "reuses the request id of one of the gate's dry-run requests" in borrowed.notes
    for one in dressed:
        assert one.notes == ("its query asks for a dry run, but it is none of the gate's dry-run requests",)
    assert not result.verified


def test_without_ids_a_call_matches_by_method_path_query_only_where_one_entry_could_be_it(
    tmp_path: Path,
) -> None:
    """Calls the report holds no id for: two identical creates against two entries are ambiguous (time
    never picks between them: either entry could be another client's), each naming both; the query
    must agree; a write whose path differs is unplanned, and a status that differs is said."""
    log = write(
        tmp_path / "access.log",
        line(10, "POST", "/v1/tickets?notify=true", 201),
        line(20, "POST", "/v1/tickets?notify=true", 201),
        line(30, "PATCH", "/v1/tickets/t1", 500),
        line(40, "POST", "/v1/other", 201),
    )
    calls = [
        SentCall(
            1, "create", "POST", "/v1/tickets", (("notify", "true"),), 201, (), START + timedelta(seconds=19)
        ),
        SentCall(
            2, "create", "POST", "/v1/tickets", (("notify", "true"),), 201, (), START + timedelta(seconds=9)
        ),
        SentCall(3, "update", "PATCH", "/v1/tickets/t1", (), 200, ()),
        SentCall(4, "create", "POST", "/v1/tickets", (), 201, ()),
    ]
    result = match_audit(calls, audit_source(f"access-log:{log}").rows(), WINDOW)
    assert [one.verdict for one in result.calls] == ["ambiguous", "ambiguous", "differs", "missing"]
    for ambiguous in result.calls[:2]:
        assert ambiguous.row is None
        assert [row.where.rsplit(":", 1)[1] for row in ambiguous.candidates] == ["1", "2"]
    assert result.calls[2].row is not None and result.calls[2].row.where.endswith(":3")
    assert result.calls[2].differences == ("status: run 200, log 500",)
    assert [row.path for row in unplanned_rows(result.unplanned)] == ["/v1/other"]
    assert not result.verified


def test_an_entry_with_another_request_id_is_never_taken_for_the_call(tmp_path: Path) -> None:
    """Same method, path and time, but the log says another client's id: the call is missing and the
    entry is unplanned."""
    log = write(tmp_path / "access.log", line(1, "POST", "/v1/tickets", 201, "someone-else"))
    call = SentCall(1, "create", "POST", "/v1/tickets", (), 201, ("mine",))
    result = match_audit([call], audit_source(f"access-log:{log}").rows(), WINDOW)
    assert [one.verdict for one in result.calls] == ["missing"]
    assert len(result.unplanned) == 1


def test_a_log_rotated_during_the_run_is_read_across_its_files(tmp_path: Path) -> None:
    older = write(tmp_path / "access.log.1", line(1, "POST", "/v1/tickets", 201, "id-1"))
    newer = write(tmp_path / "access.log", line(2, "DELETE", "/v1/tickets/t3", 204, "id-2"))
    os.utime(older, (1, 1))
    calls = [
        SentCall(1, "create", "POST", "/v1/tickets", (), 201, ("id-1",)),
        SentCall(2, "delete", "DELETE", "/v1/tickets/t3", (), 204, ("id-2",)),
    ]
    result = match_audit(calls, audit_source(f"access-log:{tmp_path}/access.log*").rows(), WINDOW)
    assert [one.verdict for one in result.calls] == ["matched", "matched"]
    assert result.verified
    assert str(newer) in result.calls[1].row.where  # type: ignore[union-attr]


def test_a_log_rotated_twice_in_the_run_is_read_across_its_files_the_compressed_one_too(
    tmp_path: Path,
) -> None:
    """logrotate with `delaycompress`, twice during the run: `access.log.2.gz` (compressed), `.1`, then
    the new file. Each call is found in its own file, and a write in the compressed one no call made
    is named there."""
    compressed = tmp_path / "access.log.2.gz"
    compressed.write_bytes(
        gzip.compress(
            (line(1, "POST", "/v1/tickets", 201, "id-1") + "\n" + line(2, "PUT", "/v1/x", 200)).encode()
        )
    )
    rotated = write(tmp_path / "access.log.1", line(3, "PATCH", "/v1/tickets/t1", 200, "id-2"))
    write(tmp_path / "access.log", line(4, "DELETE", "/v1/tickets/t3", 204, "id-3"))
    for old in (compressed, rotated):
        os.utime(old, (1, 1))
    calls = [
        SentCall(1, "create", "POST", "/v1/tickets", (), 201, ("id-1",)),
        SentCall(2, "update", "PATCH", "/v1/tickets/t1", (), 200, ("id-2",)),
        SentCall(3, "delete", "DELETE", "/v1/tickets/t3", (), 204, ("id-3",)),
    ]
    result = match_audit(calls, audit_source(f"access-log:{tmp_path}/access.log*").rows(), WINDOW)
    assert [one.row.where for one in result.calls if one.row is not None] == [
        f"{compressed}:1",
        f"{rotated}:1",
        f"{tmp_path}/access.log:1",
    ]
    assert [row.where for row in unplanned_rows(result.unplanned)] == [f"{compressed}:2"]


def test_field_names_are_configurable_for_jsonl(tmp_path: Path) -> None:
    log = write(
        tmp_path / "app.jsonl",
        json.dumps(
            {"ts": START.isoformat(), "verb": "put", "route": {"path": "/v1/x"}, "code": 200, "rid": "r1"}
        ),
    )
    mapping = {"time": "ts", "method": "verb", "path": "route.path", "status": "code", "request_id": "rid"}
    (row,) = audit_source(f"jsonl:{log}", mapping).rows()
    assert isinstance(row, AuditRow)
    assert (row.method, row.path, row.status, row.request_ids) == ("PUT", "/v1/x", 200, ("r1",))


def test_a_hostile_report_reads_as_absent_values_never_a_crash() -> None:
    """The report's calls are the agent's free-form JSON: a query that is a list, a status that is text,
    a send time that is not one, an id entry for no call."""
    calls = [
        {
            "seq": 1,
            "tool": "t",
            "request": {"method": "post", "path": "/x", "query": ["a"]},
            "outcome": {"http_status": "201"},
        },
        {"seq": "2", "tool": "t", "request": {"method": "POST", "path": "/y"}},
        {"seq": 3, "tool": "t", "request": "GET /"},
    ]
    request_ids = [{"seq": 1, "request_id": "r1", "sent_at": "yesterday"}, {"seq": 9, "request_id": "r9"}]
    (call,) = sent_calls(calls, request_ids, "/api/")
    assert (call.method, call.path, call.query, call.http_status, call.request_ids, call.sent_at) == (
        "POST",
        "/api/x",
        (),
        None,
        ("r1",),
        None,
    )


def test_a_tool_write_that_is_no_http_request_is_found_by_the_time_it_ran(tmp_path: Path) -> None:
    """An MCP server's or SDK's write carries no request the log can name: the write logged nearest the
    time it ran (to the log's whole second) is its own, one per call; a second write in the same
    second and one a few seconds off are unplanned, and an HTTP call keeps the entry its request id
    names even inside the tool's span."""
    log = write(
        tmp_path / "access.log",
        line(10, "POST", "/v1/tickets", 201),  # the tool's, logged in the second it ran
        line(10, "DELETE", "/v1/tickets/t1", 204, "http-1"),  # the HTTP call's, by its id
        line(10, "PUT", "/v1/tickets/t5", 200),  # a second write in that second: not taken as the tool's
        line(14, "PATCH", "/v1/tickets/t2", 200),  # nobody's
    )
    span = {
        "seq": 2,
        "tool": "open_ticket",
        "sent_at": (START + timedelta(seconds=10.4)).isoformat(),
        "answered_at": (START + timedelta(seconds=10.6)).isoformat(),
    }
    calls = [
        SentCall(1, "delete", "DELETE", "/v1/tickets/t1", (), 204, ("http-1",)),
        *tool_calls([span, {"seq": 3, "tool": "close_ticket"}]),
    ]
    result = match_audit(calls, audit_source(f"access-log:{log}").rows(), WINDOW)
    assert [(one.verdict, one.matched_by) for one in result.calls] == [
        ("matched", "request id"),
        ("matched", "time of the tool call"),
        ("missing", None),  # sent at no known time: nothing can be its own
    ]
    assert result.calls[1].row is not None and result.calls[1].row.method == "POST"
    assert [(row.method, row.path) for row in unplanned_rows(result.unplanned)] == [
        ("PUT", "/v1/tickets/t5"),
        ("PATCH", "/v1/tickets/t2"),
    ]


def test_a_tool_call_claims_one_write_by_time_never_a_second_by_its_empty_request_line() -> None:
    """A log whose writes name no HTTP request (an SDK's, a vendor's events) has rows without method or
    path, as a tool call has none: the call is not matched by that empty request line, and takes one
    write, by time; the other write in that second stays unplanned."""
    at = START + timedelta(seconds=10)
    first, second = AuditRow("sdk.log:1", at, "", ""), AuditRow("sdk.log:2", at, "", "")
    span = {
        "seq": 1,
        "tool": "open_ticket",
        "sent_at": (START + timedelta(seconds=10.4)).isoformat(),
        "answered_at": (START + timedelta(seconds=10.6)).isoformat(),
    }
    result = match_audit(tool_calls([span]), [first, second], WINDOW)
    (call,) = result.calls
    assert (call.verdict, call.matched_by, call.row) == ("matched", "time of the tool call", first)
    assert unplanned_rows(result.unplanned) == [second]


def test_a_tool_call_its_request_id_matched_takes_no_second_write_by_time() -> None:
    """An SDK that names its request: the write with its id is the call's, and the one logged in the
    same second is not taken for it as well."""
    at = START + timedelta(seconds=10)
    own, other = AuditRow("sdk.log:1", at, "", "", request_ids=("sdk-7",)), AuditRow("sdk.log:2", at, "", "")
    sent = SentCall(1, "open_ticket", "", "", (), None, ("sdk-7",), at, at + timedelta(seconds=0.5))
    result = match_audit([sent], [own, other], WINDOW)
    (call,) = result.calls
    assert (call.verdict, call.matched_by, call.row) == ("matched", "request id", own)
    assert unplanned_rows(result.unplanned) == [other]
