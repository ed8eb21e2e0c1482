"""One reading of a revision: what its plan does (where, counts, alarms worst first, money), read once
where it is submitted, stored beside it, and worded here for the list, `show` and the notifications.

The queue reads a plan of up to 200,000 calls once, at submission; the list, the waiting event and
its reminders, and the app's queue reuse what it stored, so a page of 3,000 pending costs what a page
of 3 does. `PlanReading` holds agent text clipped but raw: each reader sanitizes it for its display.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

import msgspec

from reviewer.plan.sanitize import clip, safe_text
from reviewer.reading.totals import Total, totals_words

if TYPE_CHECKING:  # the list reads stored readings: it never loads the analysis
    from reviewer.plan.proposal import Proposal
    from reviewer.reading.analysis import Analysis

MAX_TEXT_CHARS: Final = 300
"""An agent's string in a reading: enough to recognise it, never a 1 MB string in every list row."""
MAX_ALARMS: Final = 20
"""Alarms a reading keeps, worst first; `Analysis` can raise a few more, and `show` reads them all."""


@dataclass(frozen=True)
class NamedAlarm:
    """One alarm: its name (`reviewer.reading.analysis.ALARM_NAMES`) and its sentence, sanitized."""

    name: str
    text: str


@dataclass(frozen=True)
class PlanReading:
    """What one revision's plan does, as the list and the notifications say it."""

    api: str
    calls: int
    creates: int
    updates: int
    deletes: int
    reads: int
    unknown: int
    """Calls whose effect nobody knows (an MCP tool that says nothing of itself)."""
    destructive: int
    environment: str | None = None
    """As the agent wrote it (`target.environment`); the policy's own is found from the base URL."""
    base_url: str | None = None
    via: str = ""
    """How the dry run was made (`server`, `fake`, `transport`, `record`): only `server` asked the API."""
    alarms: tuple[NamedAlarm, ...] = ()
    """Worst first."""
    more_alarms: int = 0
    """Alarms past `MAX_ALARMS`, counted."""
    totals: tuple[Total, ...] = ()
    """The money the plan moves, per currency (`reviewer.reading.totals`)."""

    @property
    def alarm_names(self) -> tuple[str, ...]:
        return tuple(alarm.name for alarm in self.alarms)


def read_plan(proposal: Proposal, analysis: Analysis | None = None) -> PlanReading:
    """The reading of `proposal`; pass the `analysis` already made of it so the calls are walked once."""
    if analysis is None:
        from reviewer.reading.analysis import Analysis

        analysis = Analysis(proposal)
    ratios = analysis.ratios
    named = analysis.named_alarms
    target = proposal.target
    return PlanReading(
        environment=_clipped(target.environment),
        base_url=_clipped(target.base_url),
        via=clip(proposal.dry_run.via, MAX_TEXT_CHARS),
        api=clip(target.api, MAX_TEXT_CHARS),
        calls=ratios.calls,
        creates=ratios.creates,
        updates=ratios.updates,
        deletes=ratios.deletes,
        reads=ratios.reads,
        unknown=ratios.other,
        destructive=ratios.destructive,
        alarms=tuple(
            NamedAlarm(name, clip(safe_text(text), MAX_TEXT_CHARS)) for name, text in named[:MAX_ALARMS]
        ),
        more_alarms=max(0, len(named) - MAX_ALARMS),
        totals=analysis.totals,
    )


def _clipped(text: str | None) -> str | None:
    return None if text is None else clip(text, MAX_TEXT_CHARS)


_encoder: Final = msgspec.json.Encoder(decimal_format="string")
_decoder: Final = msgspec.json.Decoder(PlanReading)


def stored(reading: PlanReading) -> str:
    """The reading as the queue stores it beside the revision (JSON text)."""
    return _encoder.encode(reading).decode()


def from_stored(text: str | bytes) -> PlanReading:
    """A reading `stored` wrote."""
    return _decoder.decode(text)


def effects_words(reading: PlanReading) -> str:
    """`1 create, 2 updates, 1 delete, 3 reads`: each effect the plan has, or `no calls`, for the
    one-line sentence of a page or a chat line."""
    effects = (
        (reading.creates, "create"),
        (reading.updates, "update"),
        (reading.deletes, "delete"),
        (reading.unknown, "call of unknown effect"),
        (reading.reads, "read"),
    )
    return ", ".join(_count(number, noun) for number, noun in effects if number) or "no calls"


def counts_words(reading: PlanReading) -> str:
    """`5 calls, 1 create, 2 update, 0 delete, 1 effect unknown, 1 read`: the counts as the list,
    `show`, the review screen and its confirmation word them (every write effect, even at 0, so an
    approver reads "0 delete"; calls marked destructive that are not deletes as `N more destructive`)."""
    parts = [
        f"{reading.calls:,} calls",
        f"{reading.creates:,} create",
        f"{reading.updates:,} update",
        f"{reading.deletes:,} delete",
    ]
    if reading.unknown:
        parts.append(f"{reading.unknown:,} effect unknown")
    if reading.reads:
        parts.append(f"{reading.reads:,} read")
    marked = reading.destructive - reading.deletes
    if marked:
        parts.append(f"{marked:,} more destructive")
    return ", ".join(parts)


def one_line(reading: PlanReading, shown_alarms: int = 3) -> str:
    """The whole reading in one sentence, for a page or a chat line: "2 updates, 1 delete in
    production, moving EUR 12.00 (1 call); 1 real refusal"; agent text sanitized."""
    environment = safe_text(reading.environment) if reading.environment else "no environment"
    line = f"{effects_words(reading)} in {environment}"
    if reading.totals:
        line += f", moving {totals_words(reading.totals, limit=2)}"
    if reading.alarms:
        line += "; " + "; ".join(alarm.text for alarm in reading.alarms[:shown_alarms])
        hidden = len(reading.alarms) + reading.more_alarms - shown_alarms
        if hidden > 0:
            line += f" (+{hidden} more alarms)"
    return clip(line, 2 * MAX_TEXT_CHARS)


def _count(number: int, noun: str) -> str:
    if number == 1:
        return f"1 {noun}"
    plural = noun.replace("call ", "calls ", 1) if noun.startswith("call ") else noun + "s"
    return f"{number:,} {plural}"
