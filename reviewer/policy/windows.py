"""Change windows: when an environment's approved plans may run, in the shape of Argo CD's sync windows.

A window opens at each time its cron `schedule` names, read as wall time in its IANA `time_zone`, and
stays open for `duration` (elapsed time, so a window across a daylight-saving change lasts what it
says). A plan may run inside an allow window (when the environment declares any) and outside every
deny window. Times come from `zoneinfo` and `croniter`, never from arithmetic on wall clocks (`croniter` is
imported by the first window read, so a queue whose policy has none never loads it):

- a wall time the clock skips (02:30 on the spring-forward day in Berlin) opens the window at the
  moment the clock jumps past it (03:00 local), as cron runs a job it would otherwise miss;
- a wall time the clock passes twice (02:30 on the fall-back day) opens the window once, the first time.

Everything here is a pure function of the windows and a `now` given by the caller: the queue asks
with its own clock, never an agent's.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, Final, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from reviewer.policy import durations
from reviewer.policy.durations import DurationError

WindowKind = Literal["allow", "deny"]
WINDOW_KEYS: Final = frozenset({"name", "kind", "schedule", "duration", "time_zone", "break_glass_approvals"})
DEFAULT_BREAK_GLASS_APPROVALS: Final = 2
MAX_BREAK_GLASS_APPROVALS: Final = 10
MAX_WINDOWS: Final = 50
LOOK_AHEAD: Final = timedelta(days=400)
EVER: Final = timedelta(days=4 * 366 + 1)
"""How far a schedule is searched before it is refused as never opening: every calendar day, 29
February too, comes within it, so a file is read alike whatever the day it is read."""
"""How far `runs_from` and `runs_until` look: past a year and a month, a window is as good as never."""
_MAX_STEPS: Final = 2000
_ONE_SECOND: Final = timedelta(seconds=1)
_TRANSITION_SLACK: Final = timedelta(hours=3)
"""More than any zone's offset changes by at once (two hours, in history): wall times this near a change
are searched around, since the same wall time may stand for two instants, or none."""


class WindowError(ValueError):
    """A window that cannot be used: the message says why, `key` which field (None: the table)."""

    def __init__(self, message: str, key: str | None = None) -> None:
        super().__init__(message)
        self.key = key


def parse_duration(text: str) -> timedelta:
    """`8h`, `216h`, `1h30m`, `2d`: a duration as every policy key reads one (`reviewer.policy.durations`),
    at most the look-ahead a window is searched in."""
    try:
        seconds = durations.parse_duration(text.strip())
    except DurationError as error:
        raise WindowError(f"duration {error}") from None
    if seconds > LOOK_AHEAD.total_seconds():
        raise WindowError(f"duration {text!r} must be at most {LOOK_AHEAD.days} days")
    return timedelta(seconds=seconds)


@dataclass(frozen=True)
class Window:
    """One `[[environments.NAME.windows]]` entry."""

    name: str
    kind: WindowKind
    schedule: str
    duration: timedelta
    time_zone: ZoneInfo
    break_glass_approvals: int = DEFAULT_BREAK_GLASS_APPROVALS
    line: int = 0

    def describe(self) -> str:
        """`allow "working hours": 0 9 * * 1-5 for 8h, Europe/Berlin` as `policy check` lists it."""
        lasting = durations.duration_words(int(self.duration.total_seconds()))
        return (
            f"{self.kind} {self.name!r}: {self.schedule} for {lasting}, {self.time_zone.key}"
            f"; break glass with {self.break_glass_approvals}"
        )

    def latest_opening(self, at: datetime) -> datetime | None:
        """The latest time this window opened at or before `at` (UTC), within its duration and a
        day of slack; None when it did not open then."""
        from croniter import croniter

        local = at.astimezone(self.time_zone).replace(tzinfo=None)
        slack = self._slack(at)
        search = croniter(self.schedule, local + slack + _ONE_SECOND)
        earliest = local - self.duration - timedelta(days=1)
        latest: datetime | None = None
        for _ in range(_MAX_STEPS):
            wall = search.get_prev(datetime)
            if wall < earliest:
                break
            opened = _instant(wall, self.time_zone)
            if opened <= at and (latest is None or opened > latest):
                latest = opened
            if latest is not None and wall < local - slack:
                break
        return latest

    def _slack(self, at: datetime) -> timedelta:
        """How far wall times near `at` may stand out of order: as far as a change of the zone's offset
        moves them, when one happens within `_TRANSITION_SLACK`; else not at all."""
        before = (at - _TRANSITION_SLACK).astimezone(self.time_zone).utcoffset()
        after = (at + _TRANSITION_SLACK).astimezone(self.time_zone).utcoffset()
        return _TRANSITION_SLACK if before != after else timedelta(0)

    def covering(self, at: datetime) -> tuple[datetime, datetime] | None:
        """(opened, closes) of this window's opening that covers `at`, or None."""
        opened = self.latest_opening(at)
        if opened is None or opened + self.duration <= at:
            return None
        return opened, opened + self.duration

    def next_opening(self, after: datetime, within: timedelta = LOOK_AHEAD) -> datetime | None:
        """The first time at or after `after` this window opens; None within `within`."""
        from croniter import CroniterBadDateError, croniter

        local = after.astimezone(self.time_zone).replace(tzinfo=None)
        search = croniter(self.schedule, local - self._slack(after) - _ONE_SECOND)
        for _ in range(_MAX_STEPS):
            try:
                wall = search.get_next(datetime)
            except CroniterBadDateError:
                return None
            opened = _instant(wall, self.time_zone)
            if opened >= after:
                return opened if opened - after <= within else None
        return None


def read_window(table: Any, now: datetime) -> Window:
    """A window from its TOML table; `WindowError` says what is wrong, the caller adds the line."""
    if not isinstance(table, dict):
        raise WindowError("a window is a [[environments.NAME.windows]] table")
    unknown = sorted(set(table) - WINDOW_KEYS)
    if unknown:
        raise WindowError(
            f"unknown key {unknown[0]!r}; expected {', '.join(sorted(WINDOW_KEYS))}", unknown[0]
        )
    name = table.get("name")
    if not isinstance(name, str) or not name.strip() or len(name) > 120 or not name.isprintable():
        raise WindowError("a window needs a name (printable text, up to 120 characters)", "name")
    kind = table.get("kind")
    if kind not in ("allow", "deny"):
        raise WindowError(f'window {name!r}: kind must be "allow" or "deny"', "kind")
    schedule = table.get("schedule")
    if not isinstance(schedule, str) or len(schedule.split()) != 5:
        raise WindowError(
            f'window {name!r}: schedule must be a cron expression of five fields, like "0 9 * * 1-5"',
            "schedule",
        )
    from croniter import CroniterBadCronError, CroniterNotAlphaError, croniter

    try:
        croniter(schedule)
    except (CroniterBadCronError, CroniterNotAlphaError, ValueError) as error:
        raise WindowError(
            f"window {name!r}: schedule {schedule!r} is not a cron expression: {error}", "schedule"
        ) from None
    duration = table.get("duration")
    if not isinstance(duration, str):
        raise WindowError(f'window {name!r}: duration must be text like "8h"', "duration")
    try:
        length = parse_duration(duration)
    except WindowError as error:
        raise WindowError(f"window {name!r}: {error}", "duration") from None
    zone_name = table.get("time_zone", "UTC")
    try:
        if not isinstance(zone_name, str) or not zone_name:
            raise ValueError(zone_name)
        zone = ZoneInfo(zone_name)
    except (ZoneInfoNotFoundError, ValueError):
        raise WindowError(
            f"window {name!r}: time_zone {zone_name!r} is not an IANA time zone (like Europe/Berlin)",
            "time_zone",
        ) from None
    needed = table.get("break_glass_approvals", DEFAULT_BREAK_GLASS_APPROVALS)
    if (
        not isinstance(needed, int)
        or isinstance(needed, bool)
        or not 1 <= needed <= MAX_BREAK_GLASS_APPROVALS
    ):
        raise WindowError(
            f"window {name!r}: break_glass_approvals must be a whole number from 1 to "
            f"{MAX_BREAK_GLASS_APPROVALS}",
            "break_glass_approvals",
        )
    window = Window(name, kind, schedule, length, zone, needed)
    if window.next_opening(now, EVER) is None:
        raise WindowError(f"window {name!r}: schedule {schedule!r} never opens", "schedule")
    return window


@dataclass(frozen=True)
class Standing:
    """Whether an environment's plans may run at a time, as the queue words it.

    `open`: they may run now; then `runs_until` is when that ends (None: no window closes it within
    `LOOK_AHEAD`) and `window` the window it ends at, if any. Otherwise `window` is the window that keeps
    them (of `kind` deny: they are inside it; allow: outside every allow window, named together),
    `runs_from` when they may run next (None: not within `LOOK_AHEAD`), and `break_glass_approvals` how
    many break-glass approvals let them run anyway.
    """

    open: bool
    window: str | None = None
    kind: WindowKind | None = None
    runs_from: datetime | None = None
    runs_until: datetime | None = None
    break_glass_approvals: int | None = None


def kept_text(kind: WindowKind | None, window: str | None, runs_from: datetime | None) -> str:
    """Why a plan may not run now and from when it may, in one phrase:
    `inside the deny window 'year-end freeze'; runs from 2027-01-04 08:00 UTC`."""
    where = (
        f"inside the deny window {window!r}" if kind == "deny" else f"outside the allow windows ({window})"
    )
    return f"{where}; {runs_from_text(runs_from)}"


def runs_from_text(runs_from: datetime | None) -> str:
    """ "runs from 2026-12-29 09:00 UTC" (or that no window lets it within `LOOK_AHEAD`)."""
    if runs_from is None:
        return f"no change window lets it run within {LOOK_AHEAD.days} days"
    return f"runs from {when(runs_from)}"


def when(at: datetime) -> str:
    """A time as the refusals and screens say it: UTC to the minute."""
    return at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")


def standing(windows: Sequence[Window], now: datetime) -> Standing:
    """Whether plans under `windows` may run at `now`, until when, or from when."""
    if not windows:
        return Standing(True)
    blocking = _blocking(windows, now)
    if blocking is None:
        until, closing = _runs_until(windows, now)
        return Standing(True, closing, runs_until=until)
    return Standing(
        False,
        blocking.name if blocking.kind == "deny" else _allow_names(windows),
        blocking.kind,
        runs_from=_runs_from(windows, now),
        break_glass_approvals=_break_glass_needed(windows, blocking),
    )


def next_openings(windows: Sequence[Window], now: datetime, count: int = 3) -> list[datetime]:
    """The next `count` times plans under `windows` start to be allowed to run, after `now`."""
    openings: list[datetime] = []
    at = now
    for _ in range(count):
        current = standing(windows, at)
        if current.open:
            if current.runs_until is None:
                break
            at = current.runs_until
            current = standing(windows, at)
        if current.runs_from is None:
            break
        openings.append(current.runs_from)
        at = current.runs_from
    return openings


def _allow_names(windows: Iterable[Window]) -> str:
    return ", ".join(window.name for window in windows if window.kind == "allow")


def _break_glass_needed(windows: Sequence[Window], blocking: Window) -> int:
    if blocking.kind == "deny":
        return blocking.break_glass_approvals
    return max(window.break_glass_approvals for window in windows if window.kind == "allow")


def _blocking(windows: Sequence[Window], at: datetime) -> Window | None:
    """The deny window covering `at`, else the first allow window when some are declared and none
    covers it."""
    for window in windows:
        if window.kind == "deny" and window.covering(at) is not None:
            return window
    allows = [window for window in windows if window.kind == "allow"]
    if allows and not any(window.covering(at) for window in allows):
        return allows[0]
    return None


def _runs_from(windows: Sequence[Window], now: datetime) -> datetime | None:
    """The first time at or after `now` no deny window covers and an allow window (if any) does."""
    at, horizon = now, now + LOOK_AHEAD
    allows = [window for window in windows if window.kind == "allow"]
    for _ in range(_MAX_STEPS):
        if at > horizon:
            return None
        denied = [span[1] for window in windows if window.kind == "deny" and (span := window.covering(at))]
        if denied:
            at = max(denied)
            continue
        if allows and not any(window.covering(at) for window in allows):
            openings = [opened for window in allows if (opened := window.next_opening(at)) is not None]
            if not openings:
                return None
            at = min(openings)
            continue
        return at
    return None


def _runs_until(windows: Sequence[Window], now: datetime) -> tuple[datetime | None, str | None]:
    """When plans allowed to run at `now` stop being allowed, and the window that stops them."""
    ends: list[tuple[datetime, str]] = []
    for window in windows:
        if window.kind == "deny" and (opened := window.next_opening(now)) is not None:
            ends.append((opened, window.name))
    allows = [window for window in windows if window.kind == "allow"]
    if allows:
        at, closing = now, ""
        for _ in range(_MAX_STEPS):
            spans = [(span[1], window.name) for window in allows if (span := window.covering(at))]
            if not spans or at > now + LOOK_AHEAD:
                break
            at, closing = max(spans)
        if at <= now + LOOK_AHEAD:
            ends.append((at, closing))
    if not ends:
        return None, None
    until, name = min(ends)
    return until, name


def _instant(wall: datetime, zone: ZoneInfo) -> datetime:
    """The UTC instant of a wall time in `zone`: a skipped wall time is the moment the clock jumps
    past it; a repeated one is its first occurrence."""
    first = wall.replace(tzinfo=zone, fold=0)
    if first.astimezone(UTC).astimezone(zone).replace(tzinfo=None) == wall:
        return first.astimezone(UTC)
    # Skipped: with fold=0 the wall time reads in the offset before the jump (an instant after the
    # jump), with fold=1 in the offset after it (an instant before): the jump lies between them.
    early = int(wall.replace(tzinfo=zone, fold=1).timestamp())
    late = int(first.timestamp())
    early, late = min(early, late), max(early, late)
    offset_after = datetime.fromtimestamp(late, zone).utcoffset()
    while late - early > 1:
        middle = (early + late) // 2
        if datetime.fromtimestamp(middle, zone).utcoffset() == offset_after:
            late = middle
        else:
            early = middle
    return datetime.fromtimestamp(late, UTC)
