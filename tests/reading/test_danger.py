"""Danger graded at a glance: the bundled samples read apart by kind and severity, production makes
deletes and money worse, the worst comes first, and every label fits the queue's danger column."""

from __future__ import annotations

from decimal import Decimal
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.analysis import ALARM_NAMES, Analysis
from reviewer.reading.danger import (
    KINDS,
    LABEL_WIDTH,
    MONEY_AT_A_GLANCE,
    UNTESTED_WORDS,
    WORD_WIDTH,
    Severity,
    danger_order,
    grade,
    in_production,
    worst,
)

SAMPLES = Path(__file__).resolve().parents[2] / "reviewer" / "sample_proposals"


def sample_grade(name: str) -> str:
    """The worst grade of a bundled sample as the queue's danger column shows it."""
    proposal = parse_proposal((SAMPLES / name).read_bytes(), name)
    analysis = Analysis(proposal)
    money = max((total.out for total in analysis.totals), default=Decimal(0))
    ratios = analysis.ratios
    grades = grade(
        analysis.alarm_names,
        proposal.target.environment,
        money_out=money,
        destroys=ratios.destructive > ratios.deletes,
        via=proposal.dry_run.via,
    )
    first = worst(grades)
    return first.label() if first else ""


def test_the_samples_read_apart_by_kind_and_severity() -> None:
    """What used to be eight identical `!`: kept writes stop, deletes in production stop; deletes in
    staging, hidden characters, an outlier, money in production and a plan nothing validated are
    dangers, the last in the words of how its dry run ran (the same merge tried three ways reads
    three ways)."""
    assert {
        name: sample_grade(name)
        for name in (
            "crm-dedupe.writes-kept.json",
            "k8s-shop-scale-down.server.json",
            "deskline-merge.server.json",
            "hostile-markup.json",
            "billing-refunds.outlier.json",
            "billing-refunds-2000.server.json",
            "deskline-triage.rev2.json",
            "deskline-merge.fake.json",
            "deskline-merge.record.json",
        )
    } == {
        "crm-dedupe.writes-kept.json": "!!! kept",
        "k8s-shop-scale-down.server.json": "!!! delete",
        "deskline-merge.server.json": "!!  delete",
        "hostile-markup.json": "!!  hidden",
        "billing-refunds.outlier.json": "!!  outlier",
        "billing-refunds-2000.server.json": "!!  money",
        "deskline-triage.rev2.json": "!!  unsent",
        "deskline-merge.fake.json": "!!  by fake",
        "deskline-merge.record.json": "!!  recorded",
    }


def test_production_makes_deletes_destroying_updates_and_money_one_step_worse() -> None:
    for environment, severity in (("staging", Severity.DANGER), ("Production", Severity.STOP)):
        assert worst(grade(["deletes"], environment)).severity == severity  # type: ignore[union-attr]
        assert worst(grade([], environment, destroys=True)).severity == severity  # type: ignore[union-attr]
    assert worst(grade([], "prod", money_out=MONEY_AT_A_GLANCE)).severity == Severity.DANGER  # type: ignore[union-attr]
    assert worst(grade([], "dev", money_out=MONEY_AT_A_GLANCE)).severity == Severity.CAUTION  # type: ignore[union-attr]
    assert grade([], "prod", money_out=MONEY_AT_A_GLANCE - Decimal("0.01")) == ()
    assert grade(["writes_kept"], "production")[0].severity == Severity.STOP
    assert not in_production("pre-production") and not in_production(None) and in_production(" live ")


def test_the_worst_comes_first_and_the_callers_kinds_count() -> None:
    grades = grade(["real_refusals", "deletes", "not_validated"], "staging", extra=["broken"])
    assert [graded.kind for graded in grades] == ["broken", "not_validated", "deletes", "real_refusals"]
    assert grades[1].word == "untested", "a dry run of a kind this release does not know"


def test_an_alarm_this_release_does_not_know_is_kept_as_a_caution_under_its_own_name() -> None:
    (graded,) = grade(["a_newer_alarm_name"], "staging")
    assert (graded.severity, graded.word) == (Severity.CAUTION, "a_newer_")


def test_every_alarm_the_analysis_raises_has_its_own_word() -> None:
    assert set(ALARM_NAMES) <= set(KINDS)
    words = [word for _severity, word, _meaning in KINDS.values()]
    words += [word for word, _meaning in UNTESTED_WORDS.values()]
    assert len(set(words)) == len(words)
    assert all(len(word) <= WORD_WIDTH for word in words)


@settings(max_examples=200)
@given(
    first=st.lists(st.sampled_from(sorted(KINDS)), max_size=6),
    second=st.lists(st.sampled_from(sorted(KINDS)), max_size=6),
    environment=st.sampled_from(["production", "staging", None]),
)
def test_labels_fit_and_the_danger_order_puts_the_worse_plan_first(first, second, environment) -> None:
    ones, others = grade(first, environment), grade(second, environment)
    assert all(len(graded.label()) <= LABEL_WIDTH for graded in ones)
    assert [graded.severity for graded in ones] == sorted((g.severity for g in ones), reverse=True)
    worse = max(ones, others, key=lambda grades: grades[0].severity if grades else 0)
    better = others if worse is ones else ones
    if (worse[0].severity if worse else 0) > (better[0].severity if better else 0):
        assert danger_order(worse) < danger_order(better)
    assert danger_order(ones) <= danger_order(())
