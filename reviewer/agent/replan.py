"""The re-plan loop: a reviewer asks for changes, the agent plans again with their words, and the new
plan is the next revision of the same proposal, up to a number of plans.

Written once for every way an agent runs: `Gate.run` and `reviewer run` loop here (`until_decided`);
a graph or an MCP host, which re-plan across steps or requests, keep a `Replan` or ask `next_revision`.
Each re-plan is given the latest request for changes, never an earlier one.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TypeVar

from reviewer.agent.errors import ChangesRequested
from reviewer.agent.feedback import Feedback

Result = TypeVar("Result")


def next_revision(feedback: Feedback | None) -> int:
    """The revision a plan is submitted as: 1, or the one after the revision changes were asked of."""
    return 1 if feedback is None else feedback.revision + 1


@dataclass
class Replan:
    """The requests for changes so far, and whether `max_revisions` allows another plan."""

    max_revisions: int = 1
    asked: list[Feedback] = field(default_factory=list)
    """Every request for changes, oldest first."""

    def __post_init__(self) -> None:
        if self.max_revisions < 1:
            raise ValueError(f"max_revisions must be 1 or more, not {self.max_revisions}")

    @property
    def feedback(self) -> Feedback | None:
        """What the next plan is given: the latest request for changes (None for the first plan)."""
        return self.asked[-1] if self.asked else None

    @property
    def revision(self) -> int:
        return next_revision(self.feedback)

    def allows_after(self, revision: int) -> bool:
        """Whether another plan may follow changes asked of `revision` (plans are revisions 1, 2, ...)."""
        return revision < self.max_revisions

    def ask(self, changes: ChangesRequested) -> bool:
        """Keep a request for changes; whether another plan may be made for it (counted both by the
        revision asked of and by the plans made here, so neither alone can loop)."""
        self.asked.append(Feedback.from_request(changes))
        return len(self.asked) < self.max_revisions and self.allows_after(changes.revision)


async def until_decided(
    attempt: Callable[[Replan], Awaitable[Result]],
    replan: Replan,
    on_replan: Callable[[Feedback], None] = lambda feedback: None,
) -> Result:
    """`attempt(replan)` (plan, submit, wait, run) again after each request for changes `replan`
    allows, `on_replan` told first; the last `ChangesRequested` is raised when no plan is left."""
    while True:
        try:
            return await attempt(replan)
        except ChangesRequested as changes:
            if not replan.ask(changes):
                raise
            on_replan(replan.asked[-1])
