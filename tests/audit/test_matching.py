"""The matcher on rows made by hand: the run's window, one request id for one row, and a write no
approved call made keeping a run from being verified however well its calls matched."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from reviewer.audit.matching import SentCall, Window, match_audit
from reviewer.audit.rows import AuditRow

START = datetime(2026, 12, 2, 1, 0, tzinfo=UTC)
END = START + timedelta(minutes=1)
WINDOW = Window(START, END, slack=timedelta(seconds=5))
CALL = SentCall(1, "close", "PATCH", "/v1/tickets/t1", (), 200, ("id-1",))


def row(second: float, method: str = "PATCH", path: str = "/v1/tickets/t1", **fields: object) -> AuditRow:
    fields.setdefault("status", 200)
    return AuditRow(f"log:{second}", START + timedelta(seconds=second), method, path, **fields)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("second", "held"),
    [(-5.001, False), (-5, True), (0, True), (60, True), (65, True), (65.001, False)],
)
def test_the_window_runs_from_claim_to_report_widened_by_the_slack(second: float, held: bool) -> None:
    assert WINDOW.holds(START + timedelta(seconds=second)) is held


def test_an_entry_without_a_time_is_held_in_the_window() -> None:
    assert WINDOW.holds(None)
    result = match_audit(
        [CALL], [row(1, request_ids=("id-1",)), AuditRow("log:9", None, "POST", "/x")], WINDOW
    )
    assert [one.row.where for one in result.unplanned] == ["log:9"]


def test_writes_outside_the_window_are_not_the_runs_business_unless_they_carry_its_id() -> None:
    """Another client's write an hour later is no concern of this run; a write an hour later under
    the run's own request id is: someone borrowed it."""
    entries = [
        row(1, request_ids=("id-1",)),
        row(3600, "POST", "/v1/tickets"),
        row(3601, "DELETE", "/v1/tickets/t2", request_ids=("id-1",)),
    ]
    result = match_audit([CALL], entries, WINDOW)
    assert result.rows_in_window == 2
    assert [(one.row.method, one.notes) for one in result.unplanned] == [
        ("DELETE", ("reuses call 1's request id",))
    ]


def test_one_request_id_one_row_the_one_that_agrees() -> None:
    """Two entries carry the call's id: the one whose method, path and status class agree is the
    call's, whichever came first; the other is a write no approved call made."""
    entries = [
        row(1, "DELETE", "/v1/tickets/t2", status=204, request_ids=("id-1",)),
        row(2, request_ids=("id-1",)),
    ]
    result = match_audit([CALL], entries, WINDOW)
    assert [(one.verdict, one.row.where if one.row else None) for one in result.calls] == [
        ("matched", "log:2")
    ]
    assert [one.row.where for one in result.unplanned] == ["log:1"]
    assert result.matched == 1 and not result.verified


def test_a_single_row_under_the_id_that_disagrees_differs() -> None:
    result = match_audit([CALL], [row(1, status=500, request_ids=("id-1",))], WINDOW)
    assert [(one.verdict, one.differences) for one in result.calls] == [
        ("differs", ("status: run 200, log 500",))
    ]
    assert not result.verified


def test_an_unplanned_write_keeps_a_run_whose_calls_all_matched_from_being_verified() -> None:
    clean = match_audit([CALL], [row(1, request_ids=("id-1",))], WINDOW)
    assert clean.verified and clean.summary.endswith("0 writes in the audit log no approved call made")
    noisy = match_audit([CALL], [row(1, request_ids=("id-1",)), row(2, "POST", "/v1/tickets")], WINDOW)
    assert noisy.matched == len(noisy.calls) == 1 and noisy.complete
    assert not noisy.verified
    assert noisy.summary == "audit: 1 of 1 calls matched; 1 writes in the audit log no approved call made"


def test_a_read_is_not_unplanned_and_a_log_with_nothing_in_the_window_cannot_verify() -> None:
    read = row(2, "GET", is_write=False)
    assert match_audit([CALL], [row(1, request_ids=("id-1",)), read], WINDOW).verified
    empty = match_audit([], [row(3600, "POST", "/v1/tickets")], WINDOW)
    assert (empty.rows_in_window, empty.complete, empty.verified) == (0, False, False)


def test_a_log_of_kept_writes_looks_for_no_refused_call_and_shows_one_the_api_kept() -> None:
    """The sample API keeps no entry of a refused write: the 409 is not looked for (not "missing"). An
    API that answered 409 and wrote anyway leaves an entry with the call's request id: a write no
    approved call made."""
    from datetime import UTC, datetime, timedelta

    import msgspec as json

    from reviewer.audit.checks import run_against
    from reviewer.audit.inputs import AuditInput
    from reviewer.audit.json_lines import read_sample
    from reviewer.audit.matching import SentCall, Window
    from reviewer.audit.registry import AuditSource

    now = datetime.now(UTC)
    created = SentCall(1, "create", "POST", "/v1/tickets", (), 201, ("rid-1",), now)
    refused = SentCall(2, "delete", "DELETE", "/v1/tickets/t3", (), 409, ("rid-2",), now)

    def log(*entries: tuple[str, str, str]) -> AuditSource:
        rows = [
            {
                "at": now.isoformat(),
                "method": m,
                "path": p,
                "status": 201 if m == "POST" else 204,
                "request_id": i,
            }
            for m, p, i in entries
        ]
        body = json.json.encode({"entries": rows})
        return AuditSource("sample", read_sample, AuditInput("/v1/audit", body=body))

    window = Window(now - timedelta(seconds=1), now + timedelta(seconds=1))
    honest = run_against(log(("POST", "/v1/tickets", "rid-1")), [created, refused], window)
    assert ([call.verdict for call in honest.calls], honest.unplanned) == (["matched"], ())
    kept_anyway = log(("POST", "/v1/tickets", "rid-1"), ("DELETE", "/v1/tickets/t3", "rid-2"))
    lying = run_against(kept_anyway, [created, refused], window)
    assert [(write.row.method, write.row.request_ids) for write in lying.unplanned] == [
        ("DELETE", ("rid-2",))
    ]
    assert not lying.verified
