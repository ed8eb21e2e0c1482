"""The list's filters: what `GET /v1/proposals` (and so `reviewer list`) narrows a page to, read from
its query words and checked there, and kept or dropped row by row on the reading stored with each.

A filter is applied to the store's rows in Python, batch by batch, as the state is: one meaning on
SQLite and PostgreSQL, and the reading is already stored beside each row, so no plan is read again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Final

from reviewer.policy.file import Policy
from reviewer.policy.verdict import resolve_environment
from reviewer.reading.analysis import ALARM_NAMES
from reviewer.reading.summary import PlanReading
from reviewer.service import rules
from reviewer.service.errors import Invalid
from reviewer.service.rules import Row

MAX_FILTER_CHARS: Final = 300
"""An environment or agent name to filter on: as long as a reading keeps it."""
DURATION_UNITS: Final = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}


def duration_seconds(text: str) -> float:
    """`90d`, `12h`, `30m`, `45s` or a number of seconds, more than 0; ValueError in words."""
    number, unit = (text[:-1], DURATION_UNITS[text[-1]]) if text[-1:] in DURATION_UNITS else (text, 1.0)
    try:
        seconds = float(number) * unit
    except ValueError:
        raise ValueError(f"{text!r} is not a duration like 90d, 12h, 30m or 3600") from None
    if not 0 < seconds < float("inf"):
        raise ValueError(f"{text!r}: a duration is more than 0")
    return seconds


@dataclass(frozen=True)
class ListFilter:
    """Which rows a page keeps. `yours`: only those in an environment whose policy lets the caller
    decide (every row says whether it is, `ProposalSummary.yours`)."""

    state: str | None = None
    environment: str | None = None
    agent: str | None = None
    """The token that submitted it, or the name its agent gave itself."""
    alarm: str | None = None
    older_than: float | None = None
    """Seconds since its latest revision was submitted, at least."""
    yours: bool = False
    holding: str | None = None
    """Text its id holds: what a person typed of an id (`reviewer show k3j5`), found in one request."""


def list_filter(
    state: str | None,
    environment: str | None,
    agent: str | None,
    alarm: str | None,
    older_than: str | None,
    yours: bool,
    holding: str | None = None,
) -> ListFilter:
    """The filter a list request's query words ask for; `Invalid` (a 422, as a bad `wait` is), in
    words, for a value it cannot be."""
    for name, value in (("environment", environment), ("agent", agent)):
        if value is not None and not 0 < len(value) <= MAX_FILTER_CHARS:
            raise Invalid(f"{name} must be 1 to {MAX_FILTER_CHARS} characters")
    if alarm is not None and alarm not in ALARM_NAMES:
        raise Invalid(f"alarm {alarm[:40]!r} is none of the alarms: {', '.join(ALARM_NAMES)}")
    seconds = None
    if older_than is not None:
        try:
            seconds = duration_seconds(older_than[:40])
        except ValueError as error:
            raise Invalid(f"older_than: {error}") from None
    return ListFilter(state, environment, agent, alarm, seconds, yours, holding)


@dataclass
class Listed:
    """A row of the list, its reading, and whether the caller's environments hold it."""

    row: Row
    reading: PlanReading | None
    yours: bool = True


@dataclass
class Chooser:
    """Keeps the rows a `ListFilter` asks for, for one reviewer under one policy, in one request."""

    wanted: ListFilter
    policy: Policy
    reviewer: str
    now: float
    reading_of: Callable[[Row], PlanReading | None]
    _yours: dict[tuple[str | None, str | None], bool] = field(default_factory=dict)

    def choose(self, row: Row) -> Listed | None:
        wanted = self.wanted
        if wanted.state is not None and rules.state_of(row, self.now) != wanted.state:
            return None
        if wanted.older_than is not None and row["submitted_at"] > self.now - wanted.older_than:
            return None
        if wanted.holding is not None and wanted.holding not in row["proposal_id"]:
            return None
        # The submitting token, never the name a plan gives its agent: any token may write that one.
        if wanted.agent is not None and wanted.agent != row["owner"]:
            return None
        reading = self.reading_of(row)
        if wanted.environment is not None and (reading is None or reading.environment != wanted.environment):
            return None
        if wanted.alarm is not None and (reading is None or wanted.alarm not in reading.alarm_names):
            return None
        yours = self.decides(reading)
        if wanted.yours and not yours:
            return None
        return Listed(row, reading, yours)

    def decides(self, reading: PlanReading | None) -> bool:
        """Whether the environment the policy gives this plan lets the reviewer decide it (the
        service checks again when they do: this only sorts the list)."""
        if self.policy.trivial:
            return True
        where = (None, None) if reading is None else (reading.base_url, reading.environment)
        known = self._yours.get(where)
        if known is None:
            environment, _alarms = resolve_environment(self.policy, *where)
            known = self._yours[where] = environment.requirement.may_decide(self.reviewer)
        return known
