"""The money a plan moves: amounts beside a currency, summed exactly, per currency, hostile text inert."""

from __future__ import annotations

import json
from decimal import Decimal
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.analysis import Analysis
from reviewer.reading.totals import MAX_CURRENCIES, money, plan_money, totals_words
from tests.builders import proposal_document

SAMPLES = Path(__file__).resolve().parents[2] / "reviewer" / "sample_proposals"


def analysis_of(*args: dict, effect: str = "create") -> Analysis:
    calls = [{"tool": "pay", "effect": effect, "args": arguments} for arguments in args]
    return Analysis(parse_proposal(json.dumps(proposal_document(calls)).encode(), "money"))


def test_the_refund_sample_moves_its_cents_to_the_cent() -> None:
    """1,800 refunds in `amount_cents` with `currency: EUR`; the 200 ticket updates carry no money."""
    analysis = Analysis(parse_proposal((SAMPLES / "billing-refunds-2000.server.json").read_bytes(), "s"))
    (total,) = analysis.totals
    assert (total.currency, total.amount, total.calls) == ("EUR", Decimal("84641.64"), 1800)
    assert total.words() == "EUR 84,641.64 (1,800 calls)"


def test_amounts_count_only_beside_a_currency_and_by_their_unit() -> None:
    analysis = analysis_of(
        {"amount_cents": 1050, "currency": "eur"},
        {"amount": 2.5, "currency": "EUR", "replicas": 40},
        {"lines": [{"unit_price": 3, "currency_code": "USD"}, {"total_minor": 100, "currency": "USD"}]},
        {"amount": 1_000_000},  # no currency beside it: a count, not money
        {"price": True, "currency": "EUR"},  # a flag, not a number
    )
    assert [(total.currency, total.amount, total.calls) for total in analysis.totals] == [
        ("EUR", Decimal("13"), 2),
        ("USD", Decimal("4"), 1),
    ]


def test_reads_move_no_money() -> None:
    assert analysis_of({"amount": 5, "currency": "EUR"}, effect="read").totals == ()


def test_a_hostile_currency_is_never_a_label_and_currencies_are_capped() -> None:
    hostile = [{"amount": 1, "currency": "\x1b[31m@here"}, {"amount": 2, "currency": "E\u202eUR"}]
    many = [{"amount": 1, "currency": f"C{chr(65 + n // 26)}{chr(65 + n % 26)}"[-3:]} for n in range(40)]
    totals = analysis_of(*hostile, *many).totals
    assert ("?", Decimal(3)) in [(total.currency, total.amount) for total in totals]
    assert len(totals) == MAX_CURRENCIES + 1 and any(total.currency == "other" for total in totals)
    assert "\x1b" not in totals_words(totals, limit=50) and "more currencies" in totals_words(totals)


@given(st.lists(st.integers(min_value=1 - 2**53, max_value=2**53 - 1), min_size=1, max_size=30))
def test_cents_add_up_exactly(cents: list[int]) -> None:
    """However many and however large, cents sum exactly: no float ever rounds a refund away; the
    same walk of the amounts counts the calls moving money back."""
    moved = plan_money(
        parse_proposal(
            json.dumps(
                proposal_document(
                    [
                        {"tool": "r", "effect": "create", "args": {"amount_cents": c, "currency": "EUR"}}
                        for c in cents
                    ]
                )
            ).encode(),
            "p",
        ).calls
    )
    assert moved.totals[0].amount == Decimal(sum(cents)) / 100
    assert moved.negative_calls == sum(1 for c in cents if c < 0)


def test_money_reads_as_an_amount() -> None:
    assert [money(Decimal(value)) for value in ("84641.64", "13", "0.5", "1234567.125")] == [
        "84,641.64",
        "13",
        "0.50",
        "1,234,567.125",
    ]


def test_amounts_written_as_text_count_as_a_form_holds_them() -> None:
    """PayPal's `{"currency_code": "USD", "value": "12.50"}` and a form's `amount=2000&currency=usd`
    (Stripe's cents, read as written); text that is no decimal is no money."""
    analysis = analysis_of(
        {"amount": {"currency_code": "USD", "value": "12.50"}},
        {"amount": "2000", "currency": "usd"},
        {"amount": "12,50", "currency": "USD"},
        {"amount": "1e9", "currency": "USD"},
    )
    assert [(total.currency, total.amount, total.calls) for total in analysis.totals] == [
        ("USD", Decimal("2012.50"), 2)
    ]


def test_money_that_cancels_out_is_said_both_ways_and_raises_the_alarm() -> None:
    """Five refunds of +2,000,000 USD and five of -2,000,000 USD: never `USD 0`; the calls with a
    negative amount raise `negative_amounts`; a policy reads money out and money in apart."""
    from reviewer.policy.verdict import money_both_ways

    plus = [{"amount": 2_000_000, "currency": "USD"}] * 5
    minus = [{"amount": -2_000_000, "currency": "USD"}] * 5
    analysis = analysis_of(*plus, *minus)
    (total,) = analysis.totals
    assert total.words() == "USD +10,000,000 / -10,000,000 (10 calls)"
    assert total.as_json() == {
        "currency": "USD",
        "amount": "0",
        "out": "10000000",
        "in": "10000000",
        "calls": 10,
    }
    assert "negative_amounts" in analysis.alarm_names
    assert any(alarm.startswith("5 calls with a negative amount") for alarm in analysis.alarms)
    assert money_both_ways(analysis.totals) == {
        "totals": {"USD": 10_000_000.0},
        "totals_in": {"USD": 10_000_000.0},
    }
    only_in = analysis_of({"amount": -12.5, "currency": "EUR"})
    assert only_in.totals[0].words() == "EUR -12.50 (1 call)" and "negative_amounts" in only_in.alarm_names
    assert "negative_amounts" not in analysis_of(*plus).alarm_names
