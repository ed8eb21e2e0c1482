"""The money a plan moves: each currency's total over the amounts its calls carry.

A number is money when its field is named like an amount (`amount`, `amount_cents`, `total`, `price`,
`fee`, `refund`, `value` ...) and a currency stands beside it in the same object (`currency`,
`currency_code`): `{"amount_cents": 8129, "currency": "EUR"}`, PayPal's `{"currency_code": "USD",
"value": "12.50"}`. A decimal written as a string counts too (forms hold every value as text, and
some APIs write amounts so). Amounts in a field whose name ends `_cents` or `_minor` are hundredths;
any other is counted as written (Stripe's `amount` is in cents: it reads as written). Sums are exact
(`Decimal`), so 2,000 refunds add up to the cent. Money goes two ways, and one way never cancels the
other: amounts above zero are summed as money out, amounts below zero as money in, and a currency
holding both is said with both (`USD +10,000,000 / -10,000,000`), never as their difference. Pure
functions over the plan format: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any, Final

from reviewer.plan.proposal import Call
from reviewer.plan.sanitize import clip, safe_text

AMOUNT_FIELD: Final = re.compile(
    r"^(?:.*_)?(amount|total|price|cost|fee|refund|charge|payment|sum|value)(?:_(cents|minor|in_cents))?$",
    re.IGNORECASE,
)
CURRENCY_FIELDS: Final = ("currency", "currency_code", "currencyCode", "ccy")
CURRENCY_CODE: Final = re.compile(r"^[A-Za-z]{3}$")
"""ISO 4217's shape: a currency named otherwise is counted under `?`, never dropped."""
MAX_CURRENCIES: Final = 20
"""Distinct currencies kept; the rest are summed under `other` (an agent cannot grow this without end)."""
MINOR_SUFFIXES: Final = ("cents", "minor", "in_cents")
DECIMAL_TEXT: Final = re.compile(r"^-?[0-9]{1,30}(?:\.[0-9]{1,12})?$")
"""An amount written as text: `"12.50"`, `"2000"`; nothing else a string holds is read as money."""


@dataclass(frozen=True, slots=True)
class Total:
    """What a plan moves in one currency."""

    currency: str
    """Upper case, sanitized; `?` for a currency not shaped like an ISO code, `other` past the cap."""
    amount: Decimal
    """Out less in: kept for readers of the sum; the words never show it alone where both moved."""
    calls: int
    """Calls holding at least one amount in this currency."""
    out: Decimal = Decimal(0)
    """The amounts above zero, summed."""
    back: Decimal = Decimal(0)
    """The amounts below zero, summed as a positive figure: money that comes in, or a sign flipped."""

    def moved(self) -> str:
        """`161,234.56`; `+10,000,000 / -10,000,000` where money moves both ways, so that what cancels
        out never reads as nothing; `-12.50` where it only comes in."""
        if self.out and self.back:
            return f"+{money(self.out)} / -{money(self.back)}"
        return f"-{money(self.back)}" if self.back else money(self.out)

    def words(self) -> str:
        """`EUR 161,234.56 (2,000 calls)`, the amount as `moved` says it."""
        noun = "call" if self.calls == 1 else "calls"
        return f"{self.currency} {self.moved()} ({self.calls:,} {noun})"

    def as_json(self) -> dict[str, Any]:
        """The amounts as strings, so no reader rounds them."""
        return {
            "currency": self.currency,
            "amount": str(self.amount),
            "out": str(self.out),
            "in": str(self.back),
            "calls": self.calls,
        }


def money(amount: Decimal) -> str:
    """`161,234.56`: grouped, with the decimals it has (at least two when it has any)."""
    if amount == amount.to_integral_value():
        return f"{amount:,.0f}"
    places = max(2, -amount.normalize().as_tuple().exponent)  # type: ignore[operator]
    return f"{amount:,.{places}f}"


@dataclass(frozen=True, slots=True)
class Money:
    """What a plan's writes move, read in one pass over their amounts."""

    totals: tuple[Total, ...]
    """Each currency's total, largest first (then by name)."""
    negative_calls: int
    """The calls, reads aside, that carry an amount below zero."""


def plan_money(calls: Iterable[Call]) -> Money:
    """Each currency's total over the calls, and the calls carrying an amount below zero: one walk of
    each call's arguments serves both."""
    outs: dict[str, Decimal] = {}
    backs: dict[str, Decimal] = {}
    holders: dict[str, int] = {}
    negative_calls = 0
    for call in calls:
        if call.effect == "read":  # a search by amount moves nothing
            continue
        seen: set[str] = set()
        negative = False
        for currency, amount in call_amounts(call):
            if currency not in holders and len(holders) >= MAX_CURRENCIES:
                currency = "other"
            if amount >= 0:
                outs[currency] = outs.get(currency, Decimal(0)) + amount
            else:
                backs[currency] = backs.get(currency, Decimal(0)) - amount
                negative = True
            if currency not in seen:
                seen.add(currency)
                holders[currency] = holders.get(currency, 0) + 1
        negative_calls += negative
    totals = (
        Total(
            currency,
            outs.get(currency, Decimal(0)) - backs.get(currency, Decimal(0)),
            count,
            outs.get(currency, Decimal(0)),
            backs.get(currency, Decimal(0)),
        )
        for currency, count in holders.items()
    )
    ordered = sorted(totals, key=lambda total: (-max(total.out, total.back), total.currency))
    return Money(tuple(ordered), negative_calls)


def call_amounts(call: Call) -> Iterator[tuple[str, Decimal]]:
    """The (currency, amount) pairs of one call: from its arguments, else from its request's body
    (a call recorded at the HTTP boundary has no arguments of its own)."""
    source: Any = call.args
    if not source and call.request is not None:
        source = call.request.body
    yield from _amounts(source, depth=0)


def _amounts(value: Any, depth: int) -> Iterator[tuple[str, Decimal]]:
    if depth > 64:  # the plan format's own nesting limit
        return
    if isinstance(value, list):
        for child in value:
            yield from _amounts(child, depth + 1)
        return
    if not isinstance(value, dict):
        return
    currency = next(
        (value[key] for key in CURRENCY_FIELDS if isinstance(value.get(key), str)),
        None,
    )
    for key, child in value.items():
        if isinstance(child, dict | list):
            yield from _amounts(child, depth + 1)
            continue
        if currency is None or isinstance(child, bool):
            continue
        named = AMOUNT_FIELD.match(key)
        if named is None:
            continue
        amount = _decimal(child)
        if amount is None:
            continue
        if named.group(2) and named.group(2).lower() in MINOR_SUFFIXES:
            amount = amount / 100
        yield currency_name(currency), amount


def _decimal(value: Any) -> Decimal | None:
    """A number, or a decimal written as text, exactly; None for anything else."""
    try:
        if isinstance(value, int):
            amount = Decimal(value)
        elif isinstance(value, float):
            amount = Decimal(repr(value))
        elif isinstance(value, str) and DECIMAL_TEXT.match(value):
            amount = Decimal(value)
        else:
            return None
    except InvalidOperation:
        return None
    return amount if amount.is_finite() else None


def currency_name(written: str) -> str:
    """An agent's currency as the screen shows it: `EUR` for `eur`; `?` when it is not an ISO code's
    shape (a hostile string never becomes a label)."""
    return written.upper() if CURRENCY_CODE.match(written) else "?"


def totals_words(totals: Iterable[Total], limit: int = 3) -> str:
    """`EUR 161,234.56 (2,000 calls), USD 12.00 (1 call)`: the first `limit`, then how many more."""
    shown = list(totals)
    words = ", ".join(total.words() for total in shown[:limit])
    if len(shown) > limit:
        words += f", {len(shown) - limit} more currencies"
    return safe_text(clip(words, 400))
