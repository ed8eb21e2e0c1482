"""A proposal's danger at a glance: its alarms graded by kind and severity, worst first.

A queue of many proposals reads apart only if each row says what is worst about it: a write the dry
run already kept, three deletes in production and a fake's unchecked answer must not all look like
the same `!`. Each grade is a kind (an alarm's name, or one of the kinds below that no single alarm
names), a severity (how many `!` it earns) and a word short enough for a phone's column. Where the
plan runs counts: deletes, destroying updates and a large sum of money are a step worse in
production. Pure: it reads alarm names, the environment's name and the money moved, never a plan.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from decimal import Decimal
from enum import IntEnum
from typing import Final


class Severity(IntEnum):
    """How many `!` a grade earns: a count, so it reads the same in every colour mode."""

    CAUTION = 1
    """Worth a look before approving: the dry run proved less than it could."""
    DANGER = 2
    """Could do harm if approved as read: destroys, moves money, or hides something."""
    STOP = 3
    """Has already gone wrong, or is not what it says: do not approve without reading it whole."""


@dataclass(frozen=True, slots=True)
class Grade:
    kind: str
    """An alarm's name (`writes_kept`, as `Analysis.alarm_names` gives it) or one of `EXTRA_KINDS`."""
    severity: Severity
    word: str
    """At most `WORD_WIDTH` characters: the queue's danger column shows it whole at 50 columns."""

    @property
    def bangs(self) -> str:
        return "!" * self.severity

    def label(self) -> str:
        """`!!! kept`, `!!  delete`, `!   untested`: the severities line up, then the words."""
        return f"{self.bangs:<{Severity.STOP}} {self.word}"


WORD_WIDTH: Final = 8
LABEL_WIDTH: Final = Severity.STOP + 1 + WORD_WIDTH
"""Cells a label takes at most: the danger column's width."""

MONEY_AT_A_GLANCE: Final = Decimal(10_000)
"""Money moved in one currency (as its calls write it) from which a plan is graded `money`."""

KINDS: Final[dict[str, tuple[Severity, str, str]]] = {
    "broken": (Severity.STOP, "broken", "the checks refused this revision"),
    "digest": (Severity.STOP, "digest", "the fetched plan does not hash to the queue's digest"),
    "writes_kept": (Severity.STOP, "kept", "the dry run kept writes: they have already happened"),
    "writes_around": (Severity.STOP, "around", "the audit log shows writes the gate did not make"),
    "lookalike_host": (Severity.STOP, "host", "the base URL reaches another host than it seems to"),
    "environment": (Severity.STOP, "env", "the policy says the plan runs elsewhere than it claims"),
    "unproven_dry_run": (Severity.DANGER, "unproven", "nothing proved the API honoured the dry run"),
    "not_validated": (Severity.DANGER, "untested", "nothing was validated: approved, it runs unchecked"),
    "minted_values": (Severity.DANGER, "minted", "a value only a real write produces is sent as written"),
    "hidden_characters": (Severity.DANGER, "hidden", "hidden characters in the text"),
    "lookalike_text": (Severity.DANGER, "letters", "look-alike letters in a name, or text not in NFC"),
    "deletes": (Severity.DANGER, "delete", "deletes (!!! in production)"),
    "destroys": (Severity.DANGER, "destroys", "updates marked destructive (!!! in production)"),
    "outliers": (Severity.DANGER, "outlier", "a value far outside the rest"),
    "negative_amounts": (Severity.DANGER, "negative", "a negative amount: money in, or a sign that cancels"),
    "money": (Severity.CAUTION, "money", f"{MONEY_AT_A_GLANCE:,} or more in one currency (!! in production)"),
    "real_refusals": (Severity.CAUTION, "refused", "the API refused a call: the real run will be refused"),
    "dry_run_errors": (Severity.CAUTION, "failed", "a call's dry run failed"),
    "unresolved_placeholders": (Severity.CAUTION, "dangling", "a placeholder names no earlier call"),
    "fake_refusals": (Severity.CAUTION, "shape", "a fake refused a request's shape"),
    "no_outcome": (Severity.CAUTION, "silent", "calls without a dry-run answer"),
    "unsummarised_fields": (Severity.CAUTION, "fields", "more numeric fields than are summarised"),
}
"""Each kind's severity outside production, its word, and what raises it (the help lists them);
within a severity, the earlier is worse (grades are sorted by severity, then by this order). Besides
the analysis's alarms: `broken`, `digest` and `environment` come from the caller, `money` and
`destroys` from the figures `grade` is given."""

UNTESTED_WORDS: Final = {
    "fake": ("by fake", "a fake answered: the shape only"),
    "record": ("recorded", "the calls were only written down"),
    "transport": ("unsent", "the calls were caught before they left: nothing answered"),
}
"""`not_validated` in the words of how the dry run ran, so the same plan tried two ways reads apart."""

WORSE_IN_PRODUCTION: Final = frozenset({"deletes", "destroys", "money"})
PRODUCTION_NAMES: Final = frozenset({"production", "prod", "prd", "live"})

_ORDER: Final = {kind: position for position, kind in enumerate(KINDS)}


def in_production(environment: str | None) -> bool:
    """Whether an environment's name says production (`production`, `prod`, `prd`, `live`, any case)."""
    return environment is not None and environment.strip().lower() in PRODUCTION_NAMES


def grade(
    alarm_names: Iterable[str],
    environment: str | None,
    *,
    money_out: Decimal = Decimal(0),
    destroys: bool = False,
    via: str | None = None,
    extra: Iterable[str] = (),
) -> tuple[Grade, ...]:
    """Every grade a proposal earns, worst first: one per alarm name (names it does not know are
    graded with caution, under their own name, so a newer alarm is never dropped), `money` when the
    largest sum moved in one currency reaches `MONEY_AT_A_GLANCE`, `destroys` for destructive updates,
    and the `extra` kinds the caller knows of (`broken`, `digest`, `environment`). `via` (the dry
    run's `via`) words `not_validated`: `by fake`, `recorded`, `unsent`."""
    kinds = dict.fromkeys([*extra, *alarm_names])
    if money_out >= MONEY_AT_A_GLANCE:
        kinds["money"] = None
    if destroys:
        kinds["destroys"] = None
    production = in_production(environment)
    grades = [_graded(kind, production, via) for kind in kinds]
    return tuple(sorted(grades, key=lambda graded: (-graded.severity, _ORDER.get(graded.kind, len(_ORDER)))))


def worst(grades: tuple[Grade, ...]) -> Grade | None:
    return grades[0] if grades else None


def danger_order(grades: tuple[Grade, ...]) -> tuple[int, int, int]:
    """A sort key, most dangerous first: the worst grade's severity, then its kind, then how many
    grades there are (a plan with more is read first)."""
    first = worst(grades)
    if first is None:
        return (0, 0, 0)
    return (-first.severity, _ORDER.get(first.kind, len(_ORDER)), -len(grades))


def _graded(kind: str, production: bool, via: str | None) -> Grade:
    severity, word, _meaning = KINDS.get(kind, (Severity.CAUTION, kind[:WORD_WIDTH], ""))
    if kind == "not_validated" and via in UNTESTED_WORDS:
        word = UNTESTED_WORDS[via][0]
    if production and kind in WORSE_IN_PRODUCTION:
        severity = Severity(min(severity + 1, Severity.STOP))
    return Grade(kind, severity, word)
