"""What the policy asks of one proposal: its environment (decided by where it runs), the rules that
match, and whether a human decides, the policy rejects, or the policy approves.

One activation is built per proposal in one pass over its calls (counts always; the calls themselves
only when a rule reads more of them than a walk by groups does, their arguments only when a rule
reads those; the distinct values such walks read, counted), converted to CEL once,
and every compiled rule runs against it. A rule that raises fails closed, never asking less than it
asks when it matches (an agent can make a rule throw: a string where a number was, a missing field):
a rule asking approvals, signatures or reviewers asks them all; a reject rule rejects; an approve rule
leaves the plan to a human. The verdict says which rule failed and why. The strictest answer wins:
any reject rejects, a human is needed unless every matching rule approves and the environment allows
approval by policy.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from operator import attrgetter
from typing import Any, Literal

import msgspec

from reviewer.plan.hosts import destination
from reviewer.plan.proposal import CallList, Effect, Proposal, is_destructive
from reviewer.policy.expressions import EvaluationError, context
from reviewer.policy.file import Environment, Policy, PolicyRule
from reviewer.policy.names import folded
from reviewer.policy.quorum import Requirement, signed_words
from reviewer.reading.analysis import Analysis
from reviewer.reading.totals import Total

ENVIRONMENT_ALARMS = (
    "environment_mismatch",
    "environment_lookalike",
    "environment_unowned",
    "environment_other_port",
)
"""Alarms of where a plan runs, beside the analysis's (`reviewer.reading.analysis.ALARM_NAMES`)."""


FAILED_ERROR_LENGTH = 160
"""How much of a failed rule's error the one-line summary quotes (`policy explain` shows it whole)."""


@dataclass(frozen=True)
class ChangeRequest:
    """A reviewer's request for changes on an earlier revision of the same proposal, as rules read it
    (`plan.changes_requested`): a plan that answers "keep t3 open" twice is a rule's business."""

    revision: int
    by: str
    reason: str


@dataclass(frozen=True)
class RuleMatch:
    """A rule whose `when` held, what it asks, or the error it raised (then it asks as if it held)."""

    rule: str
    asks: str
    error: str | None = None


@dataclass(frozen=True)
class Verdict:
    environment: str | None
    """The policy environment the plan's rule comes from; None for `[default]`."""
    requirement: Requirement
    outcome: Literal["human", "reject", "approve"]
    decided_by: str | None = None
    """`policy:<rule>` when the policy itself rejected or approved."""
    reason: str | None = None
    """The reject rule's reason, sent to the agent."""
    matched: tuple[RuleMatch, ...] = ()
    alarms: tuple[tuple[str, str], ...] = ()
    """Environment alarms by name and sentence (a mismatch, a look-alike name)."""
    allow_policy_approval: bool = False

    def summary(self) -> str:
        """One line for the trail and `policy explain`."""
        where = self.environment or "default"
        if self.outcome == "reject":
            return f"[{where}] rejected by {self.decided_by}: {self.reason}"
        if self.outcome == "approve":
            return f"[{where}] approved by {self.decided_by}"
        return f"[{where}] {needs(self)}"


def needs(verdict: Verdict) -> str:
    """ "needs 2 approvals: rule `deletes in production`" as the screen shows it."""
    requirement = verdict.requirement
    noun = "approval" if requirement.approvals == 1 else "approvals"
    text = f"needs {requirement.approvals} {noun}"
    if requirement.signatures:
        text += f", {signed_words(requirement.signatures)}"
    if requirement.reviewers:
        text += f", by {requirement.listed()}"
    asking = [
        match.rule
        for match in verdict.matched
        if match.error is None and not match.asks.startswith("approves")
    ]
    failing = [match for match in verdict.matched if match.error is not None]
    if asking:
        text += ": " + ", ".join(f"rule `{name}`" for name in asking)
    if failing:
        text += "; " + ", ".join(
            f"rule `{match.rule}` failed ({_clipped(match.error)}), so it asks as if it held"
            for match in failing
        )
    return text


def _clipped(error: str | None) -> str:
    return (error or "")[:FAILED_ERROR_LENGTH]


def resolve_environment(
    policy: Policy, base_url: str | None, written: str | None
) -> tuple[Environment, list[tuple[str, str]]]:
    """The environment whose rule a plan gets, and the alarms of how it was found.

    The base URL wins (the one field the executor enforces); without one that a policy environment
    owns, the name the agent wrote, matched on its confusable skeleton; else `[default]`.
    """
    alarms: list[tuple[str, str]] = []
    owner = policy.owning(base_url)
    if owner is None and base_url is not None:
        alarms.extend(_owned_host_elsewhere(policy, base_url))
    named = policy.named(written)
    if written is not None and named is not None and written.strip().casefold() != named.name.casefold():
        alarms.append(("environment_lookalike", f"environment {written!r} passes for {named.name!r}"))
    if owner is not None:
        if written is not None and folded(written) != folded(owner.name):
            alarms.append(
                (
                    "environment_mismatch",
                    f"says environment {written!r}, but its base URL is {owner.name!r}'s: "
                    f"{owner.name}'s rule applies",
                )
            )
        return owner, alarms
    if named is not None:
        if named.base_urls and base_url is not None:
            alarms.append(
                (
                    "environment_unowned",
                    f"says environment {named.name!r}, but {named.name} does not own its base URL",
                )
            )
        return named, alarms
    return policy.default, alarms


def _owned_host_elsewhere(policy: Policy, base_url: str) -> list[tuple[str, str]]:
    """An alarm for a base URL whose host an environment owns, reached on a scheme or port it does
    not own (`http://api.prod.example:8443` beside `https://api.prod.example/*`)."""
    try:
        reached = destination(base_url)
    except ValueError:
        return []
    door = (reached.scheme, reached.port)
    return [
        (
            "environment_other_port",
            f"its host {reached.host} is {environment.name}'s, but {reached.scheme} on port {reached.port} "
            f"is not in {environment.name}'s base URLs",
        )
        for environment in policy.environments.values()
        if any(
            pattern.owns_host(reached.host) and (pattern.scheme, pattern.port) != door
            for pattern in environment.base_urls
        )
    ][:1]


class _RequestHead(msgspec.Struct):
    method: str = ""
    path: str = ""
    query: dict[str, Any] | None = None


class _CallHead(msgspec.Struct):
    """What a rule reads of a call; msgspec skips the rest of its JSON unread (outcome, body)."""

    seq: int
    tool: str
    effect: Effect
    request: _RequestHead | None = None
    destructive: bool = False


class _CallWithArgs(_CallHead):
    args: dict[str, Any] | None = None


_heads = msgspec.json.Decoder(_CallHead)
_heads_with_args = msgspec.json.Decoder(_CallWithArgs)


def _call_heads(proposal: Proposal, with_args: bool) -> Iterable[_CallHead]:
    """The calls as rules read them: from their JSON when the proposal kept it (a stored or
    submitted plan), skipping what no rule reads; else from the calls themselves."""
    calls = proposal.calls
    if isinstance(calls, CallList):
        decoder = _heads_with_args if with_args else _heads
        return map(decoder.decode, calls.raw(slice(None)))
    return (
        _CallWithArgs(
            call.seq,
            call.tool,
            call.effect,
            None
            if call.request is None
            else _RequestHead(call.request.method, call.request.path, call.request.query),
            call.destructive,
            call.args,
        )
        for call in calls
    )


def money_both_ways(totals: Sequence[Total]) -> dict[str, dict[str, float]]:
    """`plan.totals`, the money the plan's writes move out per currency (the amounts above zero),
    and `plan.totals_in`, the money they move in (the amounts below zero, as positive figures)."""
    return {
        "totals": {total.currency: float(total.out) for total in totals},
        "totals_in": {total.currency: float(total.back) for total in totals if total.back},
    }


def activation(
    policy: Policy,
    proposal: Proposal,
    environment: Environment,
    alarms: list[str],
    changes_requested: Sequence[ChangeRequest] = (),
    totals: Sequence[Total] = (),
) -> dict[str, Any]:
    """The values every rule reads, in one pass over the calls: the calls themselves only when a
    rule reads them as CEL values, else how many calls hold each distinct value of the fields the
    walks by groups read (`reviewer.policy.expressions.Walk.fields`). `totals`, the money the plan
    moves (`Analysis.totals`), is read only by a policy that names it: it walks every call's
    arguments."""
    calls: list[dict[str, Any]] = []
    keep_calls, keep_args, fields = policy.reads_call_list, policy.reads_args, policy.call_fields
    grouped = policy.grouped_fields
    read_request = "method" in grouped or "path" in grouped
    kind: Callable[[_CallHead], tuple[Any, ...]] = (
        _kind_with_request if read_request else attrgetter("tool", "effect", "destructive")
    )
    heads = _call_heads(proposal, keep_calls and keep_args)
    if keep_calls:
        heads = list(heads)
        for call in heads:
            entry = {field: _field(call, field) for field in fields if field != "args"}
            if keep_args:
                entry["args"] = getattr(call, "args", None) or {}
            calls.append(entry)
    # How many calls hold each tool, effect, destructive flag (and request, when a walk by groups
    # reads it), in the order each first occurs: the counts, the tools and the groups come from these.
    kinds = Counter(map(kind, heads))
    counts = {"create": 0, "update": 0, "delete": 0, "read": 0, "other": 0, "destructive": 0}
    tools: dict[str, int] = {}
    groups: dict[tuple[str, ...], int] = {}
    for (tool, effect, destructive, *method_path), held in kinds.items():
        counts[effect] += held
        counts["destructive"] += held if is_destructive(effect, destructive) else 0
        tools[tool] = tools.get(tool, 0) + held
        if grouped:
            request = _RequestHead(*method_path[0]) if method_path and method_path[0] else None
            head = _CallHead(0, tool, effect, request)
            group = tuple(_field(head, field) for field in grouped)
            groups[group] = groups.get(group, 0) + held
    target = proposal.target
    dry_run = proposal.dry_run
    return {
        "environment": None if environment.name == "default" else environment.name,
        "target": {
            "api": target.api,
            "base_url": target.base_url or "",
            "environment": target.environment or "",
        },
        "plan": {
            "revision": proposal.revision,
            "changes_requested": [
                {"revision": asked.revision, "by": asked.by, "reason": asked.reason}
                for asked in changes_requested
            ],
            "calls": calls,
            "counts": counts,
            "tools": tools,
            # Money out and money in apart: ten refunds of +2,000,000 and ten of -2,000,000 must not
            # read as nothing moved.
            **money_both_ways(totals),
            "dry_run": {
                "via": dry_run.via,
                "write_requests": dry_run.write_requests or 0,
                "writes_kept": dry_run.writes_kept or 0,
                "writes_around": dry_run.writes_around or 0,
            },
        },
        "alarms": alarms,
        "_groups": (grouped, groups),
    }


def _kind_with_request(call: _CallHead) -> tuple[Any, ...]:
    """What groups a call when a walk reads its method or path: its query (a mapping) is left out."""
    request = call.request
    method_path = None if request is None else (request.method, request.path)
    return call.tool, call.effect, call.destructive, method_path


def _field(call: _CallHead, field: str) -> Any:
    """A call's field as rules read it (`method`, `path` and `query` are its request's: "" and {}
    without one)."""
    if field == "query":
        return {} if call.request is None else call.request.query or {}
    if field in ("method", "path"):
        return "" if call.request is None else getattr(call.request, field)
    return getattr(call, field)


def evaluate(
    policy: Policy,
    proposal: Proposal,
    analysis: Analysis | None = None,
    *,
    signing: bool = False,
    changes_requested: Sequence[ChangeRequest] = (),
) -> Verdict:
    """The policy's verdict on `proposal`; `analysis` is computed only when a rule reads `alarms` or
    the money the plan moves.
    `signing`: the queue has a key to sign its own approvals with (where signatures are required,
    an approval by policy without one is left to a human). `changes_requested`: what reviewers
    asked of the proposal's earlier revisions, oldest first."""
    environment, environment_alarms = resolve_environment(
        policy, proposal.target.base_url, proposal.target.environment
    )
    requirement = environment.requirement
    name = None if environment.name == "default" else environment.name
    if not policy.rules:
        return Verdict(
            name,
            requirement,
            "human",
            alarms=tuple(environment_alarms),
            allow_policy_approval=environment.allow_policy_approval,
        )
    alarm_names = [alarm for alarm, _sentence in environment_alarms]
    reading = analysis if analysis is not None else Analysis(proposal)  # costs nothing until read
    if policy.reads_alarms:
        alarm_names = [*reading.alarm_names, *alarm_names]
    totals = reading.totals if policy.reads_totals else ()
    values = context(activation(policy, proposal, environment, alarm_names, changes_requested, totals))
    matched: list[RuleMatch] = []
    rejecting: PolicyRule | None = None
    approving: list[PolicyRule] = []
    human = False
    for rule in policy.rules:
        failure: str | None = None
        try:
            holds = rule.when.evaluate(values)
        except EvaluationError as error:
            holds, failure = True, str(error) or type(error).__name__
        if not holds:
            continue
        if failure is not None and rule.approve:
            matched.append(RuleMatch(rule.name, "needs a human (an approving rule that failed)", failure))
            human = True
            continue
        matched.append(RuleMatch(rule.name, rule.asks(), failure))
        if rule.reject is not None:
            rejecting = rejecting or rule
        elif rule.approve:
            approving.append(rule)
        else:
            human = True
            requirement = requirement.stricter(rule.requirement())
    common = dict(
        matched=tuple(matched),
        alarms=tuple(environment_alarms),
        allow_policy_approval=environment.allow_policy_approval,
    )
    if rejecting is not None:
        reason = rejecting.reject
        failed = next(
            (match.error for match in matched if match.rule == rejecting.name and match.error), None
        )
        if failed is not None:
            reason = f"{reason} (the rule failed to evaluate, {failed[:FAILED_ERROR_LENGTH]}, so it rejects)"
        return Verdict(name, requirement, "reject", f"policy:{rejecting.name}", reason, **common)  # type: ignore[arg-type]
    can_sign = (signing and requirement.signatures is True) or not requirement.signatures
    if approving and not human and not environment_alarms and environment.allow_policy_approval and can_sign:
        return Verdict(name, requirement, "approve", f"policy:{approving[0].name}", **common)  # type: ignore[arg-type]
    if approving and not (environment.allow_policy_approval and can_sign):
        why = (
            "only a reviewer's passkey signs here"
            if environment.allow_policy_approval and requirement.signatures == "passkey"
            else "the queue has no --policy-key to sign with"
            if environment.allow_policy_approval
            else f"[{environment.name}] does not allow it"
        )
        matched = [
            RuleMatch(match.rule, f"{match.asks} (not here: {why})", match.error)
            if match.asks.startswith("approves")
            else match
            for match in matched
        ]
        common["matched"] = tuple(matched)
    return Verdict(name, requirement, "human", **common)  # type: ignore[arg-type]
