"""The audit column's words for each call of a run held against an audit source: how the call was
matched (request id, request line, time) and whether it was an HTTP request decide them. A tool call
tied by time alone is a warning, never a plain green "matched": another client's write in that second
could be taken for it."""

from __future__ import annotations

from typing import Any

import pytest

from reviewer.tui.screens.audit_source import call_detail, call_verdict, unplanned_writes
from tests.tui.helpers import AUDITED


def audited(*calls: dict[str, Any]) -> Any:
    return {**AUDITED, "calls": list(calls)}


def styles(text: Any) -> set[str]:
    return {str(span.style) for span in text.spans}


@pytest.mark.parametrize(
    ("entry", "http", "column", "role", "detail"),
    [
        (
            {"verdict": "matched", "where": "api.json:8", "matched_by": "request id"},
            True,
            "matched",
            "ok",
            "audit   matched at api.json:8, by request id",
        ),
        (
            {"verdict": "matched", "where": "api.json:9", "matched_by": "method, path, query and time"},
            True,
            "matched line",
            "ok",
            "audit   matched at api.json:9, by method, path and query, the nearest in time "
            "(the log keeps no request id)",
        ),
        (
            {"verdict": "matched", "where": "api.json:10", "matched_by": "time of the tool call"},
            False,
            "near in time",
            "warn",
            "audit   near in time at api.json:10, tied by time alone: another client's write in that "
            "second could be taken for it",
        ),
        (
            {"verdict": "missing"},
            False,
            "missing",
            "danger",
            "audit   no write logged within a second of the time the tool ran",
        ),
        (
            {"verdict": "missing"},
            True,
            "missing",
            "danger",
            "audit   no entry with its request id, nor its method, path and query",
        ),
        (
            {
                "verdict": "ambiguous",
                "where": "api.json:3, api.json:4",
                "matched_by": "method, path, query and time",
            },
            True,
            "ambiguous",
            "danger",
            "audit   ambiguous: api.json:3, api.json:4 could each be it, and no request id tells them apart",
        ),
    ],
)
def test_each_verdict_is_worded_from_how_it_was_matched(
    entry: dict[str, Any], http: bool, column: str, role: str, detail: str
) -> None:
    verification = audited({"seq": 7, **entry})
    verdict = call_verdict(verification, 7)
    assert (verdict.plain, styles(verdict)) == (column, {role})
    shown = call_detail(verification, 7, http=http)
    assert shown.plain.strip() == detail
    assert role in styles(shown)


def test_a_call_the_verification_does_not_list_is_not_checked_never_called_not_http() -> None:
    """A log that could not be read lists no call: each reads "not checked", whatever its kind."""
    verification = audited()
    assert call_verdict(verification, 1).plain == "not checked"
    assert "not checked" in call_detail(verification, 1, http=True).plain


def test_an_unplanned_write_shows_what_makes_it_stand_out() -> None:
    """A write under a borrowed request id carries the matcher's note to the screen, made visible."""
    audited: Any = {
        "source": "access-log:/var/log/nginx/api.json",
        "complete": True,
        "calls": [],
        "unplanned": [
            {
                "method": "DELETE",
                "path": "/v1/tickets/t2",
                "status": 204,
                "time": "2026-12-02T01:00:03",
                "note": "reuses call 1's request id\x1b[2J",
            }
        ],
        "unplanned_count": 1,
    }
    shown = unplanned_writes(audited).plain
    assert "DELETE /v1/tickets/t2 204 by an unnamed actor at 2026-12-02 01:00:03Z" in shown
    assert shown.endswith(": reuses call 1's request id\\x1b[2J")


def test_entries_left_out_as_the_dry_runs_own_are_said_to_rest_on_the_proposal() -> None:
    """The `v` screen's unplanned section ends with the runner's count of entries left out as the dry
    run's own, worded as `reviewer verify` words it; none left out (or a report from before the count)
    says nothing of it."""
    clean: Any = {**AUDITED, "unplanned": [], "unplanned_count": 0}
    shown = unplanned_writes({**clean, "dry_run_entries_excluded": 2})
    assert shown.plain.splitlines()[-1] == (
        "2 audit entries excluded as the dry run's own requests, by request ids the proposal names "
        "(the proposal's word, not the API's)"
    )
    assert "warn" in styles(shown)
    for quiet in (clean, {**clean, "dry_run_entries_excluded": 0}):
        assert "excluded" not in unplanned_writes(quiet).plain
