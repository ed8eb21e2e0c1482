"""The reviewer's words carried back into the agent's task: `Feedback`, and the task called with it.

A reviewer who asks for changes says what to change; `Gate.run(..., max_revisions=N)` plans again
with those words instead of ending the run. A task opts in by taking a keyword argument `feedback`:
`None` on the first plan, then a `Feedback` for each re-plan. A task without it is called as before.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import partial
from typing import Any, Final

from reviewer.agent.errors import ChangesRequested

FEEDBACK_ARGUMENT: Final = "feedback"


@dataclass(frozen=True)
class Feedback:
    """What a reviewer asked to change, who asked, and on which revision. `reason` is the reviewer's
    text as the queue holds it: show it to a model as a message, never run it."""

    reason: str
    decided_by: str
    revision: int

    @classmethod
    def from_request(cls, asked: ChangesRequested) -> Feedback:
        return cls(asked.reason or "", asked.decided_by or "a reviewer", asked.revision)

    def __str__(self) -> str:
        return f"{self.decided_by} asked for changes to revision {self.revision}: {self.reason}"


def takes_feedback(task: Callable[..., Awaitable[Any]]) -> bool:
    """Whether `task` takes `feedback` by keyword (a `**kwargs` catch-all does not count: it may
    forward the word to something that does not expect it)."""
    try:
        parameters = inspect.signature(task).parameters
    except (TypeError, ValueError):  # a builtin or extension callable without a signature
        return False
    parameter = parameters.get(FEEDBACK_ARGUMENT)
    return parameter is not None and parameter.kind in (
        inspect.Parameter.KEYWORD_ONLY,
        inspect.Parameter.POSITIONAL_OR_KEYWORD,
    )


def with_feedback(
    task: Callable[..., Awaitable[Any]], feedback: Feedback | None
) -> Callable[[], Awaitable[Any]]:
    """`task` ready to call with no arguments: given `feedback` when it takes it."""
    if takes_feedback(task):
        return partial(task, **{FEEDBACK_ARGUMENT: feedback})
    return task
