"""How a real run compares with its approved plan, and with the API's audit log (`compare_execution`).

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
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from reviewer.plan.matching import FieldChange, match_call, plain
from reviewer.plan.proposal import Call, Proposal
from reviewer.reading.audit_matching import RequestLine, claim_lines
from reviewer.reading.minted_checks import minted_value_checks

CheckStatus = Literal[
    "same", "same once placeholders resolve", "different", "not in the plan", "refused", "unknown"
]


@dataclass(frozen=True, slots=True)
class CallCheck:
    """One real call against the approved plan (and, when there is one, the API's audit log)."""

    executed_index: int
    planned_index: int | None
    status: CheckStatus
    fields: tuple[FieldChange, ...] = ()
    """For `different`: what differs (placeholders resolved). For `same once placeholders
    resolve`: each placeholder and the real value it took."""
    http_status: int | None = None
    audit_index: int | None = None
    """The audit-log line this call corresponds to, when an audit log was given and one does."""
    audit_fields: tuple[FieldChange, ...] = ()
    """Where the audit line disagrees with what the run reported (`http_status`, `path`)."""


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
    audit_unmatched: tuple[int, ...] = ()
    """Audit-log lines no real call accounts for: writes the API kept that the run did not report."""
    audit_read: bool = False
    """Whether the calls were held against an audit log at all."""

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
        if self.audit_read:
            # A call the audit log does not show is never counted as verified against it.
            succeeded = [check for check in self.checks if check.status.startswith("same")]
            with_line = sum(check.audit_index is not None for check in succeeded)
            text += f"; in the audit log: {with_line} of {len(succeeded)} that succeeded"
        if self.audit_unmatched:
            text += f"; audit lines no call accounts for: {len(self.audit_unmatched)}"
        return text

    def count(self, status: CheckStatus) -> int:
        return sum(1 for check in self.checks if check.status == status)


def compare_execution(
    plan: Proposal,
    executed_calls: Sequence[Call],
    audit: Sequence[Mapping[str, Any]] | None = None,
) -> Verification:
    """Each real call against the approved plan, in order, and against the API's audit log.

    `executed_calls` are what the run reports (`reviewer.plan.proposal.Call`: the real args, request and
    outcome). The n-th real call is held against the next plan call not yet matched; a real call of
    another tool or effect is "not in the plan" and matches nothing. A placeholder of the plan takes
    its value from the real result of the call it names.

    `audit` is the API's audit-log lines of the run, if it has one: mappings with `method`, `path`
    and `status` (or `http_status`). Each real call is paired with the next line of the same
    method and path; a line no call accounts for is reported (`audit_unmatched`).
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
    audit_unmatched: tuple[int, ...] = ()
    if audit is not None:
        checks, audit_unmatched = _against_audit(checks, executed_calls, audit)
    checks, undone = _held_to_minted_values(plan, executed_calls, checks)
    naive_identical -= undone.count("same")
    matching_once_resolved -= len(undone)
    return Verification(
        checks=tuple(checks),
        planned=len(plan.calls),
        not_executed=tuple(range(planned_at, len(plan.calls))),
        naive_identical=naive_identical,
        matching_once_resolved=matching_once_resolved,
        audit_unmatched=audit_unmatched,
        audit_read=audit is not None,
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
                check.audit_index,
                check.audit_fields,
            )
        )
    return held, undone


def _against_audit(
    checks: list[CallCheck], executed_calls: Sequence[Call], audit: Sequence[Mapping[str, Any]]
) -> tuple[list[CallCheck], tuple[int, ...]]:
    """Pair each real call with the next audit line of the same method and path (`claim_lines`, as
    every matcher of a log does), and note where the audit disagrees with what the run reported."""
    lines = [RequestLine.of(str(line.get("method", "")), str(line.get("path", "")), None) for line in audit]
    sent = [check for check in checks if executed_calls[check.executed_index].request is not None]
    requests = []
    for check in sent:
        request = executed_calls[check.executed_index].request
        assert request is not None
        requests.append(RequestLine.of(request.method, request.path, None))
    line_of = dict(zip((id(check) for check in sent), claim_lines(lines, requests), strict=True))
    used: set[int] = set()
    result: list[CallCheck] = []
    for check in checks:
        line_index = line_of.get(id(check))
        if line_index is None:
            result.append(check)
            continue
        used.add(line_index)
        line = audit[line_index]
        audit_status = line.get("http_status", line.get("status"))
        disagreements: tuple[FieldChange, ...] = ()
        if isinstance(audit_status, int) and audit_status != check.http_status:
            disagreements = (
                FieldChange("http_status", check.http_status, audit_status, "run said, audit says"),
            )
        result.append(
            CallCheck(
                check.executed_index,
                check.planned_index,
                check.status,
                check.fields,
                check.http_status,
                line_index,
                disagreements,
            )
        )
    return result, tuple(index for index in range(len(audit)) if index not in used)
