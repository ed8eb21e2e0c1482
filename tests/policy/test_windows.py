"""Change windows without a queue: the policy file's windows, whether plans may run at a given time, until
when or from when, across the daylight-saving days of the window's zone, and the refusals at load."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.policy.file import PolicyError, parse_policy
from reviewer.policy.windows import WindowError, next_openings, parse_duration, read_window, standing
from tests.policies import ONE_APPROVAL, WORKING_HOURS_AND_YEAR_END_FREEZE

BERLIN = ZoneInfo("Europe/Berlin")
WINDOWS = parse_policy(WORKING_HOURS_AND_YEAR_END_FREEZE).environments["production"].windows


def berlin(*fields: int) -> datetime:
    return datetime(*fields, tzinfo=BERLIN).astimezone(UTC)  # type: ignore[misc]


def test_the_policy_keeps_each_window_with_its_line() -> None:
    working, freeze = WINDOWS
    assert (working.name, working.kind, working.duration, working.line) == (
        "working hours",
        "allow",
        timedelta(hours=8),
        7,
    )
    assert (freeze.kind, freeze.break_glass_approvals, freeze.line) == ("deny", 2, 14)
    assert working.break_glass_approvals == 2  # the default
    assert parse_policy(ONE_APPROVAL).default.windows == ()


def test_a_tuesday_at_ten_in_berlin_runs_until_five() -> None:
    now = berlin(2027, 1, 12, 10, 0)
    current = standing(WINDOWS, now)
    assert current.open
    assert current.runs_until == berlin(2027, 1, 12, 17, 0)
    assert current.window == "working hours"


def test_a_saturday_runs_from_monday_at_nine() -> None:
    current = standing(WINDOWS, berlin(2027, 1, 9, 10, 0))
    assert not current.open
    assert (current.kind, current.window) == ("allow", "working hours")
    assert current.runs_from == berlin(2027, 1, 11, 9, 0)


def test_the_freeze_names_itself_and_ends_at_the_first_working_hour_after_it() -> None:
    current = standing(WINDOWS, berlin(2026, 12, 29, 10, 0))  # a Tuesday, inside the freeze
    assert not current.open
    assert (current.kind, current.window, current.break_glass_approvals) == ("deny", "year-end freeze", 2)
    # The freeze ends on 2 January at midnight (a Saturday): Monday the 4th at nine is the next opening.
    assert current.runs_from == berlin(2027, 1, 4, 9, 0)


def test_a_run_allowed_before_the_freeze_ends_when_it_begins() -> None:
    # A deny window that opens inside an allow window ends the span: here the allow window ends first.
    current = standing(WINDOWS, berlin(2026, 12, 23, 16, 30))
    assert current.runs_until == berlin(2026, 12, 23, 17, 0)
    night_shift = read_window(
        {"name": "night", "kind": "allow", "schedule": "0 20 * * *", "duration": "12h"}, berlin(2026, 12, 1)
    )
    freeze = WINDOWS[1]
    overlapping = standing((night_shift, freeze), berlin(2026, 12, 23, 23, 0))
    assert overlapping.runs_until == berlin(2026, 12, 24, 0, 0)
    assert overlapping.window == "year-end freeze"


def test_a_window_at_half_past_two_on_the_spring_forward_day_opens_when_the_clock_jumps() -> None:
    """Berlin skips 02:00-03:00 on 28 March 2027: a 02:30 opening is at 03:00 local, for its hour."""
    night = read_window(
        {
            "name": "night",
            "kind": "allow",
            "schedule": "30 2 * * *",
            "duration": "1h",
            "time_zone": "Europe/Berlin",
        },
        berlin(2027, 3, 1),
    )
    jump = datetime(2027, 3, 28, 1, 0, tzinfo=UTC)  # 03:00 CEST, the first instant after the gap
    assert standing([night], jump - timedelta(seconds=1)).runs_from == jump
    assert standing([night], jump).runs_until == jump + timedelta(hours=1)
    assert next_openings([night], berlin(2027, 3, 27, 12, 0)) == [
        jump,
        berlin(2027, 3, 29, 2, 30),
        berlin(2027, 3, 30, 2, 30),
    ]


def test_a_window_at_half_past_two_on_the_fall_back_day_opens_once_the_first_time() -> None:
    night = read_window(
        {
            "name": "night",
            "kind": "allow",
            "schedule": "30 2 * * *",
            "duration": "1h",
            "time_zone": "Europe/Berlin",
        },
        berlin(2027, 10, 1),
    )
    first = datetime(2027, 10, 31, 0, 30, tzinfo=UTC)  # 02:30 CEST; 02:30 CET comes an hour later
    assert next_openings([night], berlin(2027, 10, 30, 12, 0))[0] == first
    assert standing([night], first + timedelta(minutes=59)).open
    assert standing([night], first + timedelta(minutes=61)).runs_from == berlin(2027, 11, 1, 2, 30)


@pytest.mark.parametrize(
    ("field", "value", "words"),
    [
        (
            "time_zone",
            '"Europe/Atlantis"',
            "line 12: window 'working hours': time_zone 'Europe/Atlantis' is not an IANA",
        ),
        (
            "schedule",
            '"0 25 * * *"',
            "line 10: window 'working hours': schedule '0 25 * * *' is not a cron expression",
        ),
        (
            "schedule",
            '"0 9 * *"',
            "line 10: window 'working hours': schedule must be a cron expression of five fields",
        ),
        ("schedule", '"0 0 31 2 *"', "line 10: window 'working hours': schedule '0 0 31 2 *' never opens"),
        ("duration", '"8 hours"', "line 11: window 'working hours': duration '8 hours' is not a duration"),
        ("duration", '"0h"', "line 11: window 'working hours': duration '0h': a duration is more than 0"),
        ("kind", '"maybe"', 'line 9: window \'working hours\': kind must be "allow" or "deny"'),
    ],
)
def test_a_bad_window_stops_the_policy_naming_its_line(field: str, value: str, words: str) -> None:
    text = WORKING_HOURS_AND_YEAR_END_FREEZE.replace(
        {
            "time_zone": 'time_zone = "Europe/Berlin"',
            "schedule": 'schedule = "0 9 * * 1-5"',
            "duration": 'duration = "8h"',
            "kind": 'kind = "allow"',
        }[field],
        f"{field} = {value}",
        1,
    )
    with pytest.raises(PolicyError) as refused:
        parse_policy(text, "policy.toml")
    assert len(refused.value.mistakes) == 1
    assert refused.value.mistakes[0].startswith(f"policy.toml {words}")


def test_an_unknown_key_in_a_window_is_named() -> None:
    with pytest.raises(PolicyError, match=r"line 12: unknown key 'timezone'"):
        parse_policy(
            WORKING_HOURS_AND_YEAR_END_FREEZE.replace(
                'time_zone = "Europe/Berlin"\n', 'timezone = "Europe/Berlin"\n', 1
            ),
            "p",
        )


@pytest.mark.parametrize(
    ("text", "seconds"), [("8h", 28800), ("216h", 777600), ("1h30m", 5400), ("2d", 172800)]
)
def test_durations_read_as_argo_cd_writes_them(text: str, seconds: int) -> None:
    assert parse_duration(text).total_seconds() == seconds


def test_a_duration_of_words_is_refused() -> None:
    with pytest.raises(WindowError, match="not a duration"):
        parse_duration("8h and a bit")


@settings(max_examples=60, deadline=None)
@given(st.integers(min_value=0, max_value=366 * 24 * 60))
def test_runs_from_is_the_first_minute_a_plan_may_run(minutes: int) -> None:
    """Whatever the time, `runs_from` is allowed and the minute before it (if after now) is not."""
    now = berlin(2026, 12, 1, 0, 0) + timedelta(minutes=minutes)
    current = standing(WINDOWS, now)
    if current.open:
        assert current.runs_until is not None and current.runs_until > now
        assert not standing(WINDOWS, current.runs_until).open
        return
    assert current.runs_from is not None and current.runs_from > now
    assert standing(WINDOWS, current.runs_from).open
    assert not standing(WINDOWS, current.runs_from - timedelta(minutes=1)).open


def test_a_leap_day_window_is_read_alike_whatever_the_day_the_file_is_read() -> None:
    """29 February opens more than 400 days after some days of the year: a file holding it must not
    load on a restart in March and be refused on one in January."""
    table = {"name": "leap day", "kind": "deny", "schedule": "0 0 29 2 *", "duration": "1h"}
    for today in (datetime(2027, 1, 1, tzinfo=UTC), datetime(2027, 3, 1, tzinfo=UTC)):
        assert read_window({**table, "time_zone": "UTC"}, today).name == "leap day"
