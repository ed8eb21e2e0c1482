"""Escalation steps in the policy file, their durations and which are due, without a queue."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.policy.durations import DurationError, duration_words, parse_duration
from reviewer.policy.escalation import MAX_STEPS, EscalationStep, due_steps
from reviewer.policy.file import PolicyError, parse_policy
from tests.policies import ONE_APPROVAL

LADDER = """\
[default]
approvals = 1

[environments.production]
approvals = 2

[[environments.production.escalation]]
after = "10m"

[[environments.production.escalation]]
after = "1h30m"

[[rules]]
name = "deletes"
when = "plan.counts.destructive > 0"
approvals = 2
"""


def test_the_steps_read_in_order_with_their_lines_and_only_where_declared() -> None:
    policy = parse_policy(LADDER)
    assert policy.ladder_for("production") == (EscalationStep(600, 8), EscalationStep(5400, 11))
    assert policy.ladder_for("PRODUCTION") == policy.ladder_for("production")
    assert policy.ladder_for(None) == () and policy.ladder_for("staging") == ()
    assert policy.escalates and not parse_policy(ONE_APPROVAL).escalates
    assert "[environments.production] 2 approvals; escalates after 10m, 1h30m" in policy.describe()
    assert policy.rules[0].line == 13, "a rule after the steps keeps its own line"


def test_default_may_escalate_too() -> None:
    policy = parse_policy('[[default.escalation]]\nafter = "2d"\n')
    assert policy.ladder_for("anywhere") == (EscalationStep(2 * 86400, 2),)


@pytest.mark.parametrize(
    ("steps", "message"),
    [
        (
            ['after = "30m"', 'after = "10m"'],
            "line 5: escalation step 2 (after 10m) is not later than step 1 (after 30m): steps go in "
            "increasing order",
        ),
        (['after = "10m"', 'after = "600s"'], "line 5: escalation step 2 (after 600s) is not later"),
        (['after = "ten minutes"'], "line 3: escalation step 1: after: 'ten minutes' is not a duration"),
        (['after = "0m"'], "line 3: escalation step 1: after: '0m': a duration is more than 0"),
        (['after = "1.5h"'], "line 3: escalation step 1: after: '1.5h' is not a duration"),
        (["after = 600"], 'line 3: escalation step 1 needs after = a duration like "10m"'),
        (['after = "10m"\nwho = "bob"'], "line 4: unknown key 'who' in escalation step 1; expected after"),
        ([""], "line 2: escalation step 1 needs after"),
    ],
)
def test_a_bad_step_is_refused_naming_its_line(steps: list[str], message: str) -> None:
    text = "[environments.production]\n" + "".join(
        f"[[environments.production.escalation]]\n{step}\n" for step in steps
    )
    with pytest.raises(PolicyError) as refused:
        parse_policy(text, "policy.toml")
    assert f"policy.toml {message}" in str(refused.value)


def test_escalation_written_as_a_value_and_too_many_steps_are_refused() -> None:
    with pytest.raises(PolicyError, match=r"line 2: escalation steps are tables: \[\[environments\.p\."):
        parse_policy('[environments.p]\nescalation = "10m"\n', "policy.toml")
    many = "".join(f'[[environments.p.escalation]]\nafter = "{minutes}m"\n' for minutes in range(1, 13))
    with pytest.raises(PolicyError, match=f"line 1: 12 escalation steps; at most {MAX_STEPS}"):
        parse_policy(many, "policy.toml")


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("10m", 600), ("1h30m", 5400), ("90m", 5400), ("216h", 216 * 3600), ("2d", 172800), ("45s", 45)],
)
def test_durations_read_as_written(text: str, seconds: int) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize("text", ["", "10", "m", "-10m", "1.5h", "10 m", "30m1h", "10M", "1h0m0s0"])
def test_what_is_not_a_duration_is_refused(text: str) -> None:
    with pytest.raises(DurationError):
        parse_duration(text)


@settings(max_examples=200)
@given(st.integers(min_value=1, max_value=999_999 * 60))
def test_a_duration_in_words_reads_back_the_same(seconds: int) -> None:
    assert parse_duration(duration_words(seconds)) == seconds


def test_the_steps_due_are_those_whose_time_came_each_of_them() -> None:
    ladder = (EscalationStep(600, 1), EscalationStep(1800, 2))
    assert due_steps(ladder, 1000.0, 1599.9) == []
    assert due_steps(ladder, 1000.0, 1600.0) == [1]
    assert due_steps(ladder, 1000.0, 5000.0) == [1, 2], "a queue down past both still pages step 1"
