"""Escalation in the shape of PagerDuty's escalation policies: an environment's steps, each `after` a
revision's submission, read from the policy file; and which steps a revision still pending is due.

```toml
[[environments.production.escalation]]
after = "10m"
[[environments.production.escalation]]
after = "30m"
```

A step that can never be told apart from the one before (the same time, or earlier) is a mistake
in the file, refused with its line, not a page sent twice at once.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Final

from reviewer.policy.durations import EXAMPLES, DurationError, duration_words, parse_duration

MAX_STEPS: Final = 10
"""Steps a ladder may have: more than anyone pages in turn before the plan expires."""

Path = tuple[str, ...]


@dataclass(frozen=True)
class EscalationStep:
    """One step: `after` seconds after a revision's submission, written on `line` of the file."""

    after: int
    line: int

    @property
    def words(self) -> str:
        return duration_words(self.after)


def read_ladder(
    declared: Any,
    path: Path,
    fail: Callable[[Path, str], None],
    line_of: Callable[[Path], int],
) -> tuple[EscalationStep, ...]:
    """The steps of the table at `path` (`[[environments.NAME.escalation]]`), in the file's order;
    each mistake told to `fail` with the path of the key it is on."""
    header = ".".join((*path, "escalation"))
    if not isinstance(declared, list) or not all(isinstance(step, dict) for step in declared):
        fail((*path, "escalation"), f'escalation steps are tables: [[{header}]] with after = "10m"')
        return ()
    if len(declared) > MAX_STEPS:
        fail((*path, "escalation"), f"{len(declared)} escalation steps; at most {MAX_STEPS}")
    steps: list[EscalationStep] = []
    for number, table in enumerate(declared[:MAX_STEPS], start=1):
        step_path = (*path, "escalation", str(number - 1))
        for key in table:
            if key != "after":
                fail((*step_path, key), f"unknown key {key!r} in escalation step {number}; expected after")
        after = table.get("after")
        if not isinstance(after, str):
            where = (*step_path, "after") if "after" in table else step_path
            fail(where, f"escalation step {number} needs after = a duration like {EXAMPLES}")
            continue
        try:
            seconds = parse_duration(after)
        except DurationError as error:
            fail((*step_path, "after"), f"escalation step {number}: after: {error}")
            continue
        if steps and seconds <= steps[-1].after:
            fail(
                (*step_path, "after"),
                f"escalation step {number} (after {after}) is not later than step {number - 1} "
                f"(after {steps[-1].words}): steps go in increasing order",
            )
            continue
        steps.append(EscalationStep(seconds, line_of((*step_path, "after"))))
    return tuple(steps)


def due_steps(ladder: tuple[EscalationStep, ...], submitted_at: float, now: float) -> list[int]:
    """The numbers (from 1) of the steps whose time came by `now` for a revision submitted at
    `submitted_at`. Every one of them, not only the last: each step pages someone new, so a queue
    that was down past two steps still tells the first step's people (once: the outbox keeps one
    event per step)."""
    return [number for number, step in enumerate(ladder, start=1) if submitted_at + step.after <= now]


def ladder_words(ladder: tuple[EscalationStep, ...]) -> str:
    """ "escalates after 10m, 30m", as `serve` and `policy check` say what they loaded."""
    return "escalates after " + ", ".join(step.words for step in ladder)
