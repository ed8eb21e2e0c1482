"""What the policy asks of a proposal: the environment from the base URL, rules in CEL, fail-closed."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reviewer.plan.proposal import parse_proposal
from reviewer.policy.expressions import ExpressionError, compile_expression
from reviewer.policy.file import PolicyError, parse_policy
from reviewer.policy.verdict import evaluate, needs
from tests.builders import proposal_document
from tests.forked_commands import run_reviewer
from tests.policies import DELETES_IN_PRODUCTION, ONE_APPROVAL, kept_writes, staging_approved_by_policy

SAMPLES = Path(__file__).resolve().parents[2] / "sample_proposals"

STAGING = staging_approved_by_policy("https://api.staging.example")
"""The staging the verdicts are read in: its small plans a rule approves."""

POLICY = f"""\
[default]
approvals = 1

[environments.production]
base_urls = ["https://api.prod.example/*", "https://k8s-prod-eu1.internal.example:6443/*"]
approvals = 1

{STAGING}
{DELETES_IN_PRODUCTION}
{kept_writes()}
[[rules]]
name = "one staging ticket"
when = 'environment == "staging" && size(plan.calls) == 1 && plan.calls.all(c, c.effect == "create")'
approve = true
"""


def plan(base_url: str | None, environment: str | None, *, effect: str = "delete", **fields: Any) -> Any:
    target = {"api": "tickets", **({"base_url": base_url} if base_url else {})}
    if environment is not None:
        target["environment"] = environment
    document = proposal_document(
        [{"tool": "remove", "effect": effect, "args": {"id": "t1"}, "outcome": {"status": "ok"}}],
        target=target,
        dry_run={"via": "server", "write_requests": 1, "writes_kept": 0},
        **fields,
    )
    return parse_proposal(msgspec.json.encode(document))


def test_the_base_url_decides_whatever_the_plan_says_and_a_mismatch_is_an_alarm() -> None:
    verdict = evaluate(parse_policy(POLICY), plan("https://api.prod.example/v1", "staging"))
    assert verdict.environment == "production"
    assert verdict.requirement.approvals == 2
    assert [name for name, _ in verdict.alarms] == ["environment_mismatch"]
    assert "'staging'" in verdict.alarms[0][1]
    assert needs(verdict) == "needs 2 approvals: rule `deletes in production`"


@pytest.mark.parametrize("written", ["prоduction", "produ\u200bction", None, "PRODUCTION"])
def test_look_alike_and_missing_names_with_a_production_base_url_get_production(written: str | None) -> None:
    verdict = evaluate(parse_policy(POLICY), plan("https://api.prod.example/v1", written))
    assert verdict.environment == "production" and verdict.requirement.approvals == 2


@pytest.mark.parametrize(
    "written",
    [
        "prоduction",
        "produ\u200bction",
        "ｐｒｏｄｕｃｔｉｏｎ",
        "PRODUCTİON",
        "prŏduction",
        "pr0duction",
        "pr0ducti0n",
    ],
)
def test_a_look_alike_name_without_a_base_url_gets_production_and_is_flagged(written: str) -> None:
    verdict = evaluate(parse_policy(POLICY), plan(None, written))
    assert verdict.environment == "production" and verdict.requirement.approvals == 2
    assert [name for name, _ in verdict.alarms] == ["environment_lookalike"]


@pytest.mark.parametrize(
    "base_url",
    ["http://api.prod.example/v1", "https://api.prod.example:8443/v1", "https://API.prod.example.:444/v1"],
)
def test_a_production_host_on_another_scheme_or_port_is_an_alarm(base_url: str) -> None:
    verdict = evaluate(parse_policy(POLICY), plan(base_url, None, effect="create"))
    assert verdict.environment is None
    assert [name for name, _ in verdict.alarms] == ["environment_other_port"]
    assert "api.prod.example is production's" in verdict.alarms[0][1]


def test_a_plan_that_matches_nothing_gets_the_default() -> None:
    verdict = evaluate(parse_policy(POLICY), plan("https://elsewhere.example", "qa", effect="update"))
    assert verdict.environment is None and verdict.requirement.approvals == 1 and not verdict.alarms


def test_a_production_name_on_a_base_url_production_does_not_own_is_production_and_flagged() -> None:
    verdict = evaluate(parse_policy(POLICY), plan("https://elsewhere.example", "production"))
    assert verdict.environment == "production"
    assert [name for name, _ in verdict.alarms] == ["environment_unowned"]


def test_kept_writes_reject_before_any_human() -> None:
    proposal = plan("https://api.staging.example", "staging", effect="update")
    kept = msgspec.structs.replace(proposal, dry_run=msgspec.structs.replace(proposal.dry_run, writes_kept=1))
    verdict = evaluate(parse_policy(POLICY), kept)
    assert verdict.outcome == "reject" and verdict.decided_by == "policy:kept writes"
    assert verdict.reason == "the API ignored the dry-run flag; fix the tool before asking a human"


def test_a_write_around_the_dry_run_is_a_count_and_an_alarm_a_rule_reads() -> None:
    """A plan whose dry run had a write around the gate (`writes_around`, from the audit source)
    matches a rule on the count and one on the alarm's name; a plan without it matches neither."""
    policy = parse_policy(
        '[[rules]]\nname = "around"\nwhen = "plan.dry_run.writes_around > 0 && \'writes_around\' in alarms"\n'
        'reject = "something wrote around the gate during the dry run"\n'
    )
    proposal = plan("https://api.staging.example", "staging", effect="update")
    around = msgspec.structs.replace(
        proposal, dry_run=msgspec.structs.replace(proposal.dry_run, writes_around=2)
    )
    verdict = evaluate(policy, around)
    assert verdict.decided_by == "policy:around"
    assert [match.error for match in verdict.matched] == [None]
    assert verdict.reason == "something wrote around the gate during the dry run"
    assert evaluate(policy, proposal).decided_by != "policy:around"


def test_approval_by_policy_only_where_the_environment_allows_it() -> None:
    policy = parse_policy(POLICY)
    staging = evaluate(policy, plan("https://api.staging.example/v1", "staging", effect="create"))
    assert staging.outcome == "approve" and staging.decided_by == "policy:one staging ticket"
    elsewhere = parse_policy(POLICY.replace("allow_policy_approval = true", ""))
    refused = evaluate(elsewhere, plan("https://api.staging.example/v1", "staging", effect="create"))
    assert refused.outcome == "human"
    assert "does not allow it" in refused.matched[0].asks


def test_approval_by_policy_is_left_to_a_human_where_it_would_need_a_signature_the_queue_cannot_make() -> (
    None
):
    policy = parse_policy(
        POLICY.replace("allow_policy_approval = true", "allow_policy_approval = true\nsignatures = true")
    )
    proposal = plan("https://api.staging.example/v1", "staging", effect="create")
    assert evaluate(policy, proposal).outcome == "human"
    assert evaluate(policy, proposal, signing=True).outcome == "approve"


def test_a_matching_rule_that_asks_less_than_its_environment_keeps_the_environment_s_quorum() -> None:
    """The strictest requirement wins field by field: production asks 2 approvals, a rule that
    matches its deletes asks only for signatures, and a production delete still needs 2 (and now
    signed ones), not the rule's default of 1."""
    policy = parse_policy(
        POLICY.replace(
            "approvals = 1\n\n[environments.staging]", "approvals = 2\n\n[environments.staging]"
        ).replace(
            "when = 'environment == \"production\" && plan.counts.delete > 0'\napprovals = 2",
            "when = 'environment == \"production\" && plan.counts.delete > 0'\nsignatures = true",
        )
    )
    verdict = evaluate(policy, plan("https://api.prod.example/v1", "production"))
    assert verdict.environment == "production" and verdict.outcome == "human"
    assert [match.rule for match in verdict.matched] == ["deletes in production"]
    assert verdict.requirement.approvals == 2 and verdict.requirement.signatures


def test_an_environment_alarm_keeps_a_human_in_the_loop() -> None:
    verdict = evaluate(parse_policy(POLICY), plan(None, "ѕtaging", effect="create"))  # Cyrillic ѕ
    assert verdict.environment == "staging" and verdict.outcome == "human"


def test_a_rule_that_raises_fails_closed_and_says_which() -> None:
    policy = parse_policy(
        POLICY
        + """
[[rules]]
name = "big refunds"
when = 'plan.calls.exists(c, c.args.amount_cents > 100000)'
approve = true
"""
    )
    verdict = evaluate(policy, plan("https://api.staging.example/v1", "staging", effect="create"))
    assert verdict.outcome == "human"
    failed = [match for match in verdict.matched if match.error]
    assert [match.rule for match in failed] == ["big refunds"] and "amount_cents" in (failed[0].error or "")
    assert "rule `big refunds` failed" in needs(verdict)


def test_a_rule_of_the_wrong_type_fails_closed() -> None:
    policy = parse_policy(POLICY + '\n[[rules]]\nname = "typo"\nwhen = "plan.counts.delete"\napprovals = 3\n')
    verdict = evaluate(policy, plan(None, None))
    assert verdict.outcome == "human" and verdict.matched[-1].rule == "typo"
    assert "not true or false" in (verdict.matched[-1].error or "")


@pytest.mark.parametrize(
    "expression",
    [
        "plan.calls.all(c, plan.calls.exists(d, d.seq == c.seq))",
        "plan.calls.map(c, plan.calls).size() > 0",
        "plan.calls.map(c, plan.calls.map(d, d.args)).size() > 0",
        "plan.calls.filter(c, plan.counts.delete > 0).size() > 0",
        " || ".join(["plan.calls.exists(c, c.seq == 1)"] * 9),
        "x" * 2001,
    ],
)
def test_an_expression_that_would_run_forever_or_build_huge_values_is_refused_at_load(
    expression: str,
) -> None:
    with pytest.raises(ExpressionError):
        compile_expression(expression)


def test_a_walk_inside_a_call_s_arguments_is_allowed_and_marks_the_rule_as_reading_them() -> None:
    """Walking one call's own arguments is not a walk over the plan inside another: allowed at load."""
    assert compile_expression('plan.calls.exists(c, c.args.exists(k, k == "force"))').reads_args


def test_a_rule_is_refused_with_its_line() -> None:
    text = (
        POLICY
        + '\n[[rules]]\nname = "nested"\nwhen = "plan.calls.all(c, plan.calls.all(d, true))"\napprovals = 2\n'
    )
    with pytest.raises(PolicyError) as refused:
        parse_policy(text, "policy.toml")
    line = text.splitlines().index('when = "plan.calls.all(c, plan.calls.all(d, true))"') + 1
    assert refused.value.mistakes[0].startswith(
        f"policy.toml line {line}: rule 'nested': when: a walk over the plan"
    )


def test_every_mistake_on_its_own_line() -> None:
    text = (
        "[default]\napprovals = 0\n\n[environment.production]\napprovals = 2\n\n"
        '[[rules]]\nname = "x"\nwhen = "1 +"\nreject = "no"\n'
    )
    with pytest.raises(PolicyError) as refused:
        parse_policy(text, "p.toml")
    assert [mistake.split(":")[0] for mistake in refused.value.mistakes] == [
        "p.toml line 2",
        "p.toml line 4",
        "p.toml line 9",
    ]


def test_unknown_names_and_functions_are_refused_at_load() -> None:
    with pytest.raises(ExpressionError, match="unknown name 'enviroment'"):
        compile_expression('enviroment == "production"')
    with pytest.raises(ExpressionError, match="unknown function 'exec'"):
        compile_expression('exec("rm") == true')


def test_the_rules_read_the_screen_s_alarms_by_name() -> None:
    policy = parse_policy(
        '[[rules]]\nname = "unvalidated"\nwhen = \'"not_validated" in alarms\'\napprovals = 2\n'
    )
    recorded = plan(None, None, effect="update")
    recorded = msgspec.structs.replace(
        recorded, dry_run=msgspec.structs.replace(recorded.dry_run, via="record")
    )
    assert evaluate(policy, recorded).requirement.approvals == 2
    assert evaluate(policy, plan(None, None, effect="update")).requirement.approvals == 1


def test_deletes_in_production_on_the_samples_by_policy_explain(tmp_path: Path) -> None:
    """The samples that delete in production (the Kubernetes scale-down) need 2 approvals; the one
    whose dry run kept its writes is rejected before any human; the rest need one."""
    policy = tmp_path / "policy.toml"
    policy.write_text(POLICY)
    samples = sorted(path for path in SAMPLES.glob("*.json") if not path.name.endswith(".execution.json"))
    result = run_reviewer(
        [sys.executable, "-m", "reviewer", "policy", "explain", str(policy), *map(str, samples)],
        capture_output=True,
        text=True,
        check=True,
    )
    lines = {line.split(":")[0]: line for line in result.stdout.splitlines() if not line.startswith(" ")}
    assert lines["k8s-shop-scale-down.server.json"].endswith(
        "[production] needs 2 approvals: rule `deletes in production`"
    )
    assert "rejected by policy:kept writes" in lines["crm-dedupe.writes-kept.json"]
    two = sorted(name for name, line in lines.items() if "2 approvals" in line)
    assert two == ["k8s-shop-scale-down.server.json"]


REFUNDS = """\
[default]
approvals = 1

[[rules]]
name = "big refunds"
when = 'plan.calls.exists(c, c.tool == "refund" && %s)'
approvals = 3
signatures = true
reviewers = ["alice", "bob", "carol"]
"""


def refunds(*amounts: Any) -> Any:
    calls = [
        {"tool": "refund", "effect": "create", "args": {"amount_cents": amount}, "outcome": {"status": "ok"}}
        for amount in amounts
    ]
    return parse_proposal(msgspec.json.encode(proposal_document(calls)))


@pytest.mark.parametrize(
    ("condition", "amounts"),
    [
        ("c.args.amount_cents > 100000", ("5", 500000)),  # a string where a number was
        ("c.args.amount_cents > 100000", (None, 500000)),
        ("c.args.missing > 100000", (500000,)),  # a field no call has
        ("100 / (c.args.amount_cents - 5) > 0", (5, 500000)),  # division by zero
    ],
)
def test_a_rule_made_to_throw_asks_everything_it_asks_when_it_matches(
    condition: str, amounts: tuple[Any, ...]
) -> None:
    policy = parse_policy(REFUNDS % condition)
    matching = evaluate(parse_policy(REFUNDS % "c.args.amount_cents == 500000"), refunds(500000))
    verdict = evaluate(policy, refunds(*amounts))
    assert verdict.outcome == "human"
    assert verdict.requirement == matching.requirement
    assert (verdict.requirement.approvals, verdict.requirement.signatures) == (3, True)
    assert verdict.requirement.reviewers == (("alice", "bob", "carol"),)
    assert verdict.matched[0].error and "rule `big refunds` failed (" in needs(verdict)
    assert "so it asks as if it held" in needs(verdict)


def test_a_reject_rule_made_to_throw_rejects_and_an_approve_rule_leaves_it_to_a_human() -> None:
    rules = f"""\
{STAGING}
[[rules]]
name = "no huge refunds"
when = 'plan.calls.exists(c, c.args.amount_cents > 1000000)'
reject = "refunds over 10,000 need the finance desk"

[[rules]]
name = "small refunds"
when = 'plan.calls.all(c, c.args.amount_cents < 100)'
approve = true
"""
    document = proposal_document(
        [{"tool": "refund", "effect": "create", "args": {"amount_cents": "5"}, "outcome": {"status": "ok"}}],
        target={"api": "refunds", "base_url": "https://api.staging.example/v1"},
    )
    proposal = parse_proposal(msgspec.json.encode(document))
    verdict = evaluate(parse_policy(ONE_APPROVAL + rules), proposal, signing=True)
    assert verdict.outcome == "reject" and verdict.decided_by == "policy:no huge refunds"
    assert "failed to evaluate" in (verdict.reason or "")
    approving_only = rules.split("[[rules]]")[0] + "[[rules]]" + rules.split("[[rules]]")[2]
    verdict = evaluate(parse_policy(ONE_APPROVAL + approving_only), proposal, signing=True)
    assert verdict.outcome == "human" and verdict.matched[0].error


def test_policy_explain_says_which_rule_failed_and_asks_all_of_it(tmp_path: Path) -> None:
    policy, proposal = tmp_path / "policy.toml", tmp_path / "refunds.json"
    policy.write_text(REFUNDS % "c.args.amount_cents > 100000")
    calls = [
        {"tool": "refund", "effect": "create", "args": {"amount_cents": amount}, "outcome": {"status": "ok"}}
        for amount in ("5", 500000)
    ]
    proposal.write_bytes(msgspec.json.encode(proposal_document(calls)))
    result = run_reviewer(
        [sys.executable, "-m", "reviewer", "policy", "explain", str(policy), str(proposal)],
        capture_output=True,
        text=True,
        check=True,
    )
    first, rule = result.stdout.splitlines()[:2]
    assert "needs 3 approvals, signed, by alice, bob, carol" in first
    assert "rule `big refunds` failed" in first
    assert rule.startswith("  rule 'big refunds': needs 3 approvals and signatures") and "(failed: " in rule


def test_a_rule_on_destructive_counts_a_call_marked_destructive_whatever_its_effect() -> None:
    """An MCP tool hinted destructive (memory's delete_entities) is gated as an update: a rule on
    deletes alone misses it, one on `plan.counts.destructive` does not."""
    rules = POLICY.replace("plan.counts.delete > 0", "plan.counts.destructive > 0")
    marked = plan("https://api.prod.example", None, effect="update")
    call = msgspec.structs.replace(marked.calls[0], destructive=True)
    destructive_update = msgspec.structs.replace(marked, calls=[call])
    assert needs(evaluate(parse_policy(rules), destructive_update)).startswith("needs 2 approvals")
    assert needs(evaluate(parse_policy(POLICY), destructive_update)).startswith("needs 1 approval")
    assert needs(evaluate(parse_policy(rules), marked)).startswith("needs 1 approval")


GUARDED_PRODUCTION = """\
[default]
approvals = 1

[environments.production]
base_urls = ["https://api.prod.example/*"]
signatures = true
reviewers = ["alice", "bob*"]

[[rules]]
name = "deletes"
when = "plan.counts.delete > 0"
approvals = 2

[[rules]]
name = "deletes by the ticket team"
when = "plan.counts.delete > 0"
reviewers = ["bob*", "carol"]
"""
"""Production asks signatures and names its reviewers; two rules that match a delete ask more approvals
and name other reviewers, and neither says anything of signatures."""


def test_the_strictest_match_keeps_what_the_environment_asks_and_narrows_who_may_decide() -> None:
    """The strictest match wins (docs/design.md, "Policies that read the plan"): a rule asking only
    approvals leaves the environment's signatures standing, and two reviewer lists leave only the names
    in both."""
    requirement = evaluate(
        parse_policy(GUARDED_PRODUCTION), plan("https://api.prod.example/v1", None)
    ).requirement
    assert (requirement.approvals, requirement.signatures) == (2, True)
    deciding = ["alice", "bob", "bob.ops", "carol", "mallory"]
    assert [name for name in deciding if requirement.may_decide(name)] == ["bob", "bob.ops"]


MONEY_POLICY = """\
[default]
approvals = 1

[[rules]]
name = "large refunds"
when = '"EUR" in plan.totals && plan.totals["EUR"] > 70000'
approvals = 2
"""


def test_a_policy_asks_more_above_a_total() -> None:
    """`plan.totals` holds the money per currency: the 2,000 refunds move EUR 84,641.64 and need two
    approvals; the 36 refunds move EUR 63,881.17 and need one; a plan without money has no totals."""
    policy = parse_policy(MONEY_POLICY)
    asked = {}
    for name in (
        "billing-refunds-2000.server.json",
        "billing-refunds.outlier.json",
        "k8s-shop-scale-down.server.json",
    ):
        verdict = evaluate(policy, parse_proposal((SAMPLES / name).read_bytes()))
        asked[name] = (verdict.requirement.approvals, [match.rule for match in verdict.matched])
    assert asked == {
        "billing-refunds-2000.server.json": (2, ["large refunds"]),
        "billing-refunds.outlier.json": (1, []),
        "k8s-shop-scale-down.server.json": (1, []),
    }
    assert policy.reads_totals and not parse_policy(POLICY).reads_totals


def test_money_that_cancels_out_still_asks_for_more_and_money_in_is_read_apart() -> None:
    """+2,000,000 and -2,000,000 USD five times each: `plan.totals` is the money out, so the rule on
    large payouts matches, and `plan.totals_in` the money in, which a rule may read on its own."""
    from tests.builders import proposal_document

    calls = [
        {"tool": "refund", "effect": "create", "args": {"amount": amount, "currency": "USD"}}
        for amount in [2_000_000] * 5 + [-2_000_000] * 5
    ]
    proposal = parse_proposal(json.dumps(proposal_document(calls)).encode())
    policy = parse_policy(
        """
[default]
approvals = 1

[[rules]]
name = "large payouts"
when = '"USD" in plan.totals && plan.totals["USD"] > 1000000'
approvals = 2

[[rules]]
name = "money back"
when = '"USD" in plan.totals_in'
approvals = 3
"""
    )
    verdict = evaluate(policy, proposal)
    assert [match.rule for match in verdict.matched] == ["large payouts", "money back"]
    assert verdict.requirement.approvals == 3
