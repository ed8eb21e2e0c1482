"""A real run held to the values only a real write produces: each placeholder the run resolved took the
value the run's own answer gave, and no call sent a value only the dry run minted.

The executor resolves `<id from call 1>` from call 1's real answer before it sends a later call, so a
run it made passes. What this catches is a report that says otherwise, and a plan that hard-codes a
value the dry run minted (`"mergedInto": "tk-4"`): the real create answered another id, so the write
that carried `tk-4` went to another resource, whatever else matched. Either is a difference; the run is
not verified. Pure: the approved plan and the reported calls in, the problems out.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import msgspec

from reviewer.plan.matching import executed_part, plain
from reviewer.plan.minted import hard_coded
from reviewer.plan.placeholders import ABSENT, MARK, from_results, resolve
from reviewer.plan.proposal import Call, Proposal


@dataclass(frozen=True, slots=True)
class MintedCheck:
    """One value in a real call that is not what the run's own answer gave: the plan call's seq, where
    (`args.mergedInto`), what was sent, and what the run's answer says it should have been."""

    seq: int
    tool: str
    where: str
    sent: Any
    answered: Any
    """The value the real answer gave, or `ABSENT` when it gave none."""
    reason: str

    def sentence(self) -> str:
        """One line for the reader; raw text, the caller sanitizes it."""
        return f"call {self.seq} {self.tool[:80]}: differs at {self.where[:120]}: {self.reason}"


def minted_value_checks(plan: Proposal, executed_calls: Sequence[Call]) -> list[MintedCheck]:
    """Every value of the reported real calls that is not what the run's own answers gave it: a
    placeholder resolved to another value, or a value only the dry run minted sent as written."""
    results = {
        call.seq: plain(call.outcome.result)
        for call in executed_calls
        if call.outcome is not None and call.outcome.result is not None
    }
    executed = {call.seq: call for call in executed_calls}
    planned_by_seq = {call.seq: call for call in plan.calls}
    found: list[MintedCheck] = []
    for seq, real in executed.items():
        planned = planned_by_seq.get(seq)
        if planned is not None:
            found += _placeholder_checks(planned, real, results)
    for planned, uses in hard_coded(plan.calls, plan.dry_run.via):
        if planned.seq not in executed:
            continue
        for use in uses:
            for minted in use.minted:
                reference = minted.reference
                answered = ABSENT if reference is None else from_results(results)(reference)
                if answered == use.value and answered is not ABSENT:
                    continue  # the real create happened to answer the same value: the same resource
                said = "gave none" if answered is ABSENT else f"answered {str(answered)[:120]!r}"
                source = f"call {reference.seq}" if reference is not None else "an earlier call"
                found.append(
                    MintedCheck(
                        planned.seq,
                        planned.tool,
                        use.where,
                        use.value,
                        answered,
                        f"sent {str(use.value)[:120]!r}, a value only the dry run of {source} minted "
                        f"({minted.where}); the real {source} {said}: this write went to another resource",
                    )
                )
    return sorted(found, key=lambda check: check.seq)


def reported_calls(calls: Sequence[Mapping[str, Any]]) -> list[Call]:
    """A run's report's calls as plan calls; one that is not a call (the report is the agent's word,
    untrusted) is left out here, and the audit matching says what it lacks."""
    found: list[Call] = []
    for call in calls:
        try:
            found.append(msgspec.convert(call, Call))
        except msgspec.ValidationError:
            continue
    return found


def _placeholder_checks(planned: Call, real: Call, results: Mapping[int, Any]) -> list[MintedCheck]:
    """Each placeholder of `planned` against what `real` sent in its place."""
    written = executed_part(planned.args, planned.request)
    sent = executed_part(real.args, real.request if planned.request is not None else None)
    lookup = from_results(results)
    checks: list[MintedCheck] = []
    for where, leaf, sent_leaf in _paired_leaves(written, sent):
        if not isinstance(leaf, str) or MARK not in leaf:
            continue
        expected = resolve(leaf, lookup)
        if expected == leaf:
            reason = f"{leaf[:120]} names a value the run's answers do not hold"
        elif sent_leaf == expected and type(sent_leaf) is type(expected):
            continue
        else:
            reason = (
                f"{leaf[:120]} is {str(expected)[:120]!r} by the run's own answer, "
                f"but the call sent {str(sent_leaf)[:120]!r}"
            )
        checks.append(MintedCheck(planned.seq, planned.tool, where, sent_leaf, expected, reason))
    return checks


def _paired_leaves(written: Any, sent: Any, where: str = "") -> Iterator[tuple[str, Any, Any]]:
    """Each leaf of `written` with the leaf at the same place in `sent` (ABSENT where it has none)."""
    if isinstance(written, Mapping):
        for key, child in written.items():
            other = sent.get(key, ABSENT) if isinstance(sent, Mapping) else ABSENT
            yield from _paired_leaves(child, other, f"{where}.{key}" if where else str(key))
    elif isinstance(written, list):
        for index, child in enumerate(written):
            other = sent[index] if isinstance(sent, list) and index < len(sent) else ABSENT
            yield from _paired_leaves(child, other, f"{where}[{index}]")
    else:
        yield where, written, sent
