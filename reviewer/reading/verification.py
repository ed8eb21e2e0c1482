"""How a real run compares with its approved plan (`compare_execution`); the API's audit log is held
against it by `reviewer.audit.matching`.

The executor sends the plan's calls in order and stops at the first call that is not the plan's, so
the real calls are lined up with the plan in order. Each one is *same*, *same once placeholders
resolve* (the plan said `<id from call 1>`, call 1 really created tk-4), *different* (with the
fields), *not in the plan*, *refused* (the API answered an error, or the call was never answered
because it was not sent), or *unknown* (sent, and no answer came: the API may have performed it).
The naive count (placeholders left as written) is kept beside the resolved one, because the gap
between them is the point. The comparison of one real call with its plan call is the executor's own
(`reviewer.plan.matching`), so what was checked before sending is what is checked after.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reviewer.plan.matching import FieldChange, match_call, plain
from reviewer.plan.proposal import Call, Proposal
from reviewer.reading.minted_checks import minted_value_checks

CheckStatus = Literal[
    "same", "same once placeholders resolve", "different", "not in the plan", "refused", "unknown"
]


@dataclass(frozen=True, slots=True)
class CallCheck:
    """One real call against the approved plan."""

    executed_index: int
    planned_index: int | None
    status: CheckStatus
    fields: tuple[FieldChange, ...] = ()
    """For `different`: what differs (placeholders resolved). For `same once placeholders
    resolve`: each placeholder and the real value it took."""
    http_status: int | None = None


@dataclass(frozen=True, slots=True)
class Verification:
    """A real run lined up with its approved plan: the view after `v` and the walkthrough's last line."""

    checks: tuple[CallCheck, ...]
    planned: int
    not_executed: tuple[int, ...]
    """Plan calls no real call matched (the run stopped before them, or chose other calls)."""
    naive_identical: int
    """Real calls identical to the plan's call as written (placeholders left as text) and not refused."""
    matching_once_resolved: int
    """Real calls that match the plan once placeholders take their real values, and not refused."""

    @property
    def summary(self) -> str:
        """`naive: 1 of 4 identical; placeholders resolved: 3 of 4 match; refused: delete_ticket (409)`."""
        total = self.planned
        text = (
            f"naive: {self.naive_identical} of {total} identical; "
            f"placeholders resolved: {self.matching_once_resolved} of {total} match"
        )
        for status in ("refused", "unknown", "different", "not in the plan"):
            hits = [check for check in self.checks if check.status == status]
            if hits:
                text += f"; {status}: {len(hits)}"
        if self.not_executed:
            text += f"; not executed: {len(self.not_executed)}"
        return text

    def count(self, status: CheckStatus) -> int:
        return sum(1 for check in self.checks if check.status == status)


def compare_execution(plan: Proposal, executed_calls: Sequence[Call]) -> Verification:
    """Each real call against the approved plan, in order.

    `executed_calls` are what the run reports (`reviewer.plan.proposal.Call`: the real args, request and
    outcome). The n-th real call is held against the next plan call not yet matched; a real call of
    another tool or effect is "not in the plan" and matches nothing. A placeholder of the plan takes
    its value from the real result of the call it names.
    """
    real_results: dict[int, Any] = {}
    checks: list[CallCheck] = []
    planned_at = 0
    naive_identical = 0
    matching_once_resolved = 0
    for executed_index, real in enumerate(executed_calls):
        http_status = real.outcome.http_status if real.outcome is not None else None
        # Only a success counts: a 4xx, a 5xx, an error, a call reported without an answer (or
        # only recorded, never sent), or one whose answer never came matches nothing it was meant to do.
        unknown = real.outcome is not None and real.outcome.status == "unknown"
        refused = unknown or (
            real.outcome is None
            or real.outcome.status in ("refused", "error", "recorded")
            or (http_status is not None and http_status >= 300)
        )
        if planned_at >= len(plan.calls) or (
            plan.calls[planned_at].tool != real.tool or plan.calls[planned_at].effect != real.effect
        ):
            checks.append(CallCheck(executed_index, None, "not in the plan", http_status=http_status))
            continue
        planned = plan.calls[planned_at]
        match = match_call(planned, real.args, real.request, real_results)
        if match.differences:
            status: CheckStatus = "different"
        elif unknown:
            status = "unknown"
        elif refused:
            status = "refused"
        else:
            status = "same" if match.literal else "same once placeholders resolve"
        fields = match.differences or (() if match.literal else match.resolutions)
        if not match.differences and not refused:
            matching_once_resolved += 1
            naive_identical += match.literal
        checks.append(CallCheck(executed_index, planned_at, status, fields, http_status))
        if real.outcome is not None and real.outcome.result is not None:
            real_results[planned.seq] = plain(real.outcome.result)
        planned_at += 1
    checks, undone = _held_to_minted_values(plan, executed_calls, checks)
    naive_identical -= undone.count("same")
    matching_once_resolved -= len(undone)
    return Verification(
        checks=tuple(checks),
        planned=len(plan.calls),
        not_executed=tuple(range(planned_at, len(plan.calls))),
        naive_identical=naive_identical,
        matching_once_resolved=matching_once_resolved,
    )


def _held_to_minted_values(
    plan: Proposal, executed_calls: Sequence[Call], checks: list[CallCheck]
) -> tuple[list[CallCheck], list[CheckStatus]]:
    """`checks` with each call that sent a value its run's own answers did not give (a placeholder
    resolved otherwise, a value only the dry run minted) turned "different"; and the statuses it undid
    among the matches, so the counts drop with them (`reviewer.reading.minted_checks`)."""
    problems: defaultdict[int, list[FieldChange]] = defaultdict(list)
    for problem in minted_value_checks(plan, executed_calls):
        problems[problem.seq].append(
            FieldChange(problem.where, problem.sent, problem.answered, problem.reason)
        )
    if not problems:
        return checks, []
    undone: list[CheckStatus] = []
    held: list[CallCheck] = []
    for check in checks:
        seq = plan.calls[check.planned_index].seq if check.planned_index is not None else None
        fields = problems.get(seq) if seq is not None else None
        if not fields or check.status in ("refused", "unknown"):
            held.append(check)
            continue
        if check.status.startswith("same"):
            undone.append(check.status)
        kept = check.fields if check.status == "different" else ()
        held.append(
            CallCheck(
                check.executed_index,
                check.planned_index,
                "different",
                (*kept, *fields),
                check.http_status,
            )
        )
    return held, undone
