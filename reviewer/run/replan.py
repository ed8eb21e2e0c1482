"""`reviewer run --max-revisions N`: when a reviewer asks for changes, COMMAND plans again.

COMMAND runs once more in dry-run mode with `REVIEWER_FEEDBACK` holding what the reviewer asked and who
asked, and its new plan is submitted as the next revision of the same proposal, up to N plans in all.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from reviewer.agent.feedback import Feedback
from reviewer.plan.sanitize import clip, safe_text

FEEDBACK_ENV: Final = "REVIEWER_FEEDBACK"
FEEDBACK_LIMIT: Final = 64 * 1024
"""Characters of feedback COMMAND gets: Linux refuses to start a program with a longer variable
(128 KiB each), and a reason is a sentence or two."""


def feedback_text(feedback: Feedback) -> str:
    """`NAME asked for changes to revision N: REASON` on one line: hidden characters (a NUL, which no
    environment can hold, a line break, an escape sequence) shown as visible escapes, clipped."""
    return clip(safe_text(str(feedback)), FEEDBACK_LIMIT)


def with_feedback_env(environment: Mapping[str, str], feedback: Feedback | None) -> dict[str, str]:
    """COMMAND's environment for one plan: the first without `REVIEWER_FEEDBACK` (whatever the parent
    had), each re-plan with the reviewer's words."""
    planned = {name: value for name, value in environment.items() if name != FEEDBACK_ENV}
    if feedback is not None:
        planned[FEEDBACK_ENV] = feedback_text(feedback)
    return planned
