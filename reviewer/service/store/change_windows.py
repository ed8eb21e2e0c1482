"""Change windows at the queue: whether a revision's plan may run now, by the queue's own clock, and
the break-glass approvals that let it run anyway. The executor asks the queue (its claim is refused,
or answered with when it must stop); an agent's clock decides nothing."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime

from reviewer.policy.file import Policy
from reviewer.policy.quorum import tally
from reviewer.policy.windows import kept_text, standing
from reviewer.queue.messages import WindowState, is_break_glass
from reviewer.service.errors import OutsideWindow
from reviewer.service.signed_decisions import CastDecision


def window_state(
    policy: Policy, environment: str | None, cast: Sequence[CastDecision], now: float
) -> WindowState | None:
    """Whether the plan of a revision under `environment` (None: `[default]`) may run at `now`, with
    the decisions `cast` on it; None when that environment declares no change windows."""
    declared = (policy.named(environment) or policy.default).windows
    if not declared:
        return None
    current = standing(declared, datetime.fromtimestamp(now, UTC))
    given = break_glass_given(cast)
    required = current.break_glass_approvals
    broken = not current.open and required is not None and len(given) >= required
    until = current.runs_until
    if until is not None and given:  # glass broken ahead of the window that ends the span: it runs on
        ahead = standing(declared, until).break_glass_approvals
        until = None if ahead is not None and len(given) >= ahead else until
    return WindowState(
        may_run=current.open or broken,
        window=current.window,
        kind=current.kind,
        runs_from=None if broken else current.runs_from,
        runs_until=until,
        break_glass=given,
        break_glass_required=required,
    )


def break_glass_given(cast: Sequence[CastDecision]) -> list[str]:
    """The reviewers whose counted approvals broke glass, once each person."""
    votes = [item.vote() for item in cast if item.decision == "approve" and is_break_glass(item.reason)]
    return list(tally(votes, len(votes) + 1).approvals)


def require_may_run(state: WindowState | None, proposal_id: str, revision: int) -> None:
    """Refuse a claim (409 `outside_window`) of a plan its change windows keep from running now."""
    if state is None or state.may_run:
        return
    glass = ""
    if state.break_glass_required is not None:
        glass = f"; {len(state.break_glass)} of {state.break_glass_required} break-glass approvals given"
    raise OutsideWindow(
        f"revision {revision} of {proposal_id!r} may not run now: "
        f"{kept_text(state.kind, state.window, state.runs_from)}{glass}; the approval was not used",
        window=state.window,
        runs_from=state.runs_from,
        state="approved",
    )
