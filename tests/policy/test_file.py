"""The policy file and the quorum rule, without HTTP."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.policy.file import Policy, PolicyError, parse_policy, read_policy
from reviewer.policy.quorum import Requirement as Rule
from reviewer.policy.quorum import Vote, refuse_vote, tally
from tests.policies import signed_in_production

EXAMPLE = f"""\
# Who must approve what, per target environment.

{signed_in_production(2, "alice", "bob", "carol")}
[environments."eu west"]
approvals = 1
signatures = true
"""


def test_the_example_reads_as_written() -> None:
    policy = parse_policy(EXAMPLE)
    production = policy.requirement_for("production")
    assert production == Rule(2, True, (("alice", "bob", "carol"),))
    assert policy.requirement_for("eu west") == Rule(1, True)
    assert policy.requirement_for("staging") == Rule(1, False)
    assert policy.requirement_for(None) == Rule(1, False)


def test_signatures_may_name_a_passkey_and_the_passkey_wins_when_requirements_meet() -> None:
    policy = parse_policy('[environments.production]\nsignatures = "passkey"\n')
    passkey = policy.requirement_for("production")
    assert passkey == Rule(1, "passkey")
    assert Rule(2, True).stricter(passkey) == Rule(2, "passkey")
    assert passkey.stricter(Rule(1, False)).signatures == "passkey"
    assert Rule(1, False).stricter(Rule(1, True)).signatures is True


def test_an_environment_name_cannot_dodge_its_rule_by_case_or_spaces() -> None:
    policy = parse_policy(EXAMPLE)
    assert policy.requirement_for(" Production ") == policy.requirement_for("production")
    assert policy.requirement_for("PRODUCTION").approvals == 2


def test_no_file_means_one_approval_unsigned_by_anyone() -> None:
    assert Policy().requirement_for("production") == Rule(1, False)
    assert parse_policy("").trivial


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("[default]\napprovals = 0\n", "line 2: approvals must be a whole number from 1 to 20"),
        ("[default]\napprovals = true\n", "line 2: approvals must be"),
        (
            '\n[environments.prod]\nsignatures = "yes"\n',
            'line 3: signatures must be true, false or "passkey"',
        ),
        ('[environments.prod]\napprovals = 1\nreviewrs = ["a"]\n', "line 3: unknown key 'reviewrs'"),
        ("[environments.prod]\nreviewers = []\n", "line 2: reviewers must be a list"),
        ('[environments.prod]\nreviewers = ["al ice"]\n', "line 2: 'al ice' is not a reviewer's name"),
        (
            '[environments.prod]\napprovals = 3\nreviewers = ["a", "b"]\n',
            "line 2: 3 approvals can never be met by 2 listed reviewers",
        ),
        ("[enviroments.prod]\napprovals = 1\n", "line 1: unknown table or key 'enviroments'"),
        (
            "[default]\napprovals = 1\n\n[environment.production]\n",
            "line 4: unknown table [environment.NAME]",
        ),
        ("[environments.Prod]\n[environments.prod]\n", "line 2: environment 'prod' is named twice"),
        ('[environments."eu west"]\napprovals = -1\n', "line 2: approvals must be"),
        ("[default]\napprovals = = 2\n", "(at line 2, column 13)"),
        ("environments = 3\n", "line 1: environments must be tables"),
    ],
)
def test_a_mistake_names_the_line(text: str, message: str) -> None:
    with pytest.raises(PolicyError) as refused:
        parse_policy(text, "policy.toml")
    assert str(refused.value).startswith("policy.toml")
    assert message in str(refused.value)


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(PolicyError, match="cannot read the policy file"):
        read_policy(tmp_path / "policy.toml")


# --- the quorum rule ---------------------------------------------------------------------------


def approve(name: str) -> Vote:
    return Vote(name, "approve")


def test_one_approval_of_two_stays_pending_with_who_approved() -> None:
    result = tally([approve("alice")], 2)
    assert result.state == "pending" and result.approvals == ("alice",)
    assert result.describe() == "1 of 2 approvals (alice)"


def test_a_second_reviewer_approves() -> None:
    result = tally([approve("alice"), approve("bob")], 2)
    assert result.state == "approved" and result.describe() == "2 of 2 approvals (alice, bob)"


def test_the_same_reviewer_twice_does_not_count_twice() -> None:
    result = tally([approve("alice"), approve("alice")], 2)
    assert result.state == "pending" and result.approvals == ("alice",)


@pytest.mark.parametrize("again", ["alice.", "ALICE", "a1ice", "al-ice", "alice_"])
def test_names_that_differ_by_separators_case_or_a_digit_for_a_letter_are_one_reviewer(again: str) -> None:
    result = tally([approve("alice"), approve(again)], 2)
    assert result.state == "pending" and result.approvals == ("alice",)
    assert refuse_vote(Rule(approvals=2), [approve("alice")], again) == "already_approved"
    assert tally([approve("alice"), approve("alice2")], 2).state == "approved"


def test_a_rejection_after_one_approval_rejects() -> None:
    result = tally([approve("alice"), Vote("bob", "reject", "not on a Friday")], 2)
    assert result.state == "rejected" and result.rejected_by == "bob" and result.reason == "not on a Friday"


def test_nothing_yet_is_pending() -> None:
    assert tally([], 1).describe() == "0 of 1 approval"


@settings(max_examples=300)
@given(
    votes=st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.sampled_from(["approve", "reject"]))),
    required=st.integers(1, 4),
)
def test_tally_matches_its_definition(votes: list[tuple[str, str]], required: int) -> None:
    result = tally([Vote(name, decision) for name, decision in votes], required)  # type: ignore[arg-type]
    distinct: list[str] = []
    expected = "pending"
    for name, decision in votes:
        if decision == "reject":
            expected = "rejected"
            break
        if name not in distinct:
            distinct.append(name)
        if len(distinct) == required:
            expected = "approved"
            break
    assert result.state == expected
    assert len(set(result.approvals)) == len(result.approvals) <= required


def test_who_may_add_a_vote() -> None:
    rule = Rule(2, True, (("alice", "bob"),))
    assert refuse_vote(rule, [], "alice") is None
    assert refuse_vote(rule, [], "mallory") == "not_listed"
    assert refuse_vote(rule, [approve("alice")], "alice") == "already_approved"
    assert refuse_vote(rule, [approve("alice")], "bob") is None
    assert refuse_vote(Rule(), [], "anyone") is None
