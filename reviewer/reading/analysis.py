"""A proposal read for what its dry run proves: interpreted rows, placeholders, ratios, extremes.

Pure functions and classes over `reviewer.plan.proposal` structs: no I/O, no Textual. `Analysis` is built
for plans of 100,000 calls: constructing it costs nothing, a row is computed when it is first asked
for (the app asks only for the rows it paints), and the whole-plan figures (`ratios`, `extremes`,
`hidden_characters`, `alarms`) are cached properties the app computes once, in a worker.
"""

from __future__ import annotations

import bisect
import heapq
import re
from array import array
from collections import Counter
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from functools import cached_property
from operator import attrgetter
from typing import Any, Final

import msgspec

from reviewer.plan.bodies import without_bytes_view
from reviewer.plan.lookalikes import lookalike_identifier
from reviewer.plan.minted import CallGlance, Use, uses_by_call
from reviewer.plan.placeholders import MARK, PLACEHOLDER, PLACEHOLDER_BYTES
from reviewer.plan.proposal import (
    Call,
    CallList,
    Outcome,
    Proposal,
    dumps,
    is_destructive,
    sandbox_proof,
)
from reviewer.plan.sanitize import clip, json_has_hidden, safe_text, unnormalized
from reviewer.reading.totals import Money, Total, plan_money

SCAN_CHUNK: Final = 4096
"""Calls decoded and scanned at a time by the whole-plan passes."""
SUMMARY_CHARS: Final = 300
"""The longest `PlanRow.args_summary`; a row is one line, the detail view shows the rest."""

OUTLIER_ABOVE: Final = 10.0
OUTLIER_BELOW: Final = 0.01
OUTLIER_MIN_VALUES: Final = 5
MAX_OUTLIERS: Final = 5
MAX_NUMERIC_FIELDS: Final = 2_000
"""Distinct numeric argument fields the extremes summarise. Each costs a few hundred bytes however few
numbers it holds, and one call may hold 250,000 of them: without a cap, a few such calls took 4 GB."""
FIRST_SEQS: Final = 3


class Verdict(StrEnum):
    """What a call's dry-run outcome proves, by the table "What a dry run proves" in docs/reviewing.md."""

    VALIDATED = "validated"
    """The server's own dry run accepted the call, and the API's log of kept writes, read for the dry
    run's window, proved the dry run kept nothing."""
    UNPROVEN = "ok, unproven"
    """The server accepted the call, but nothing proved the API honoured the dry-run parameter (no audit
    log was read for the dry run's window): an API that does not know the parameter drops it and writes."""
    REAL_REFUSAL = "real refusal"
    """The server refused, and the call does not depend on a placeholder: the real run will meet it too."""
    CHAIN_NOISE = "chain noise"
    """The server refused a call that depends on an earlier call of the plan the dry run did not
    persist: through a placeholder, or because an earlier call writes the same resource."""
    NOT_VALIDATED = "not validated"
    """A fake or transport said ok: only the shape of the request was checked."""
    FAKE_REFUSAL = "refused by fake"
    """A fake or transport refused: the request's shape is wrong."""
    RECORDED = "recorded"
    """Record mode: the call was written down and nothing was validated."""
    ERROR = "error"
    """The dry run of this call itself failed."""
    NO_OUTCOME = "no outcome"
    """The call carries no outcome."""


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One `<FIELD from call N>` in a call, and which call (if any) will produce it."""

    text: str
    field: str
    call_seq: int
    source_tool: str | None
    resolvable: bool
    """True only when `call_seq` names an earlier call present in the plan."""

    def provenance(self) -> str:
        """How the reviewer reads it: which call's output stands here, or that none will."""
        if self.resolvable:
            return f"⟨{self.field} from #{self.call_seq} {self.source_tool}⟩"
        return f"⟨{self.field} from #{self.call_seq} — no earlier call⟩"


@dataclass(frozen=True, slots=True)
class PlanRow:
    """One call as the review screen shows it. Text fields are raw: the app sanitizes them."""

    index: int
    seq: int
    tool: str
    effect: str
    method: str | None
    path: str | None
    args_summary: str
    verdict: Verdict
    http_status: int | None
    message: str | None
    destructive: bool
    placeholders: tuple[Placeholder, ...]
    depends_on: tuple[int, ...]
    unresolved: tuple[Placeholder, ...]
    resource: str
    hidden_characters: bool
    lookalike: bool = False
    """Its tool name, an argument key or its path mixes scripts or passes for Latin letters, or some
    of its text is not NFC."""
    written_before: int | None = None
    """The seq of the first earlier call that writes this row's resource, when its refusal is read as
    chain noise for that reason (close t3, then delete t3); None otherwise."""


@dataclass(frozen=True, slots=True)
class Ratios:
    """The side-effect ratios and what the dry run proved, counted over every call."""

    calls: int
    creates: int
    updates: int
    deletes: int
    reads: int
    other: int
    validated: int
    unproven: int
    """Server oks that nothing proved were dry: the API may have ignored the dry-run parameter."""
    not_validated: int
    real_refusals: int
    chain_noise: int
    fake_refusals: int
    recorded: int
    errors: int
    no_outcome: int
    write_requests: int | None
    writes_kept: int | None
    writes_around: int | None
    """Writes the API's audit log shows during the dry run that the gate did not make."""
    resources: int
    """Distinct resources touched by calls that are not reads."""
    depends_on_placeholders: int
    """Calls that depend on an earlier call through at least one resolvable placeholder."""
    unresolved_placeholders: int
    """Placeholders (distinct within each call) that name no earlier call."""
    destructive: int = 0
    """Deletes, and calls marked destructive whatever their effect (an MCP tool hinted so)."""

    @property
    def destructive_share(self) -> float:
        return self.destructive / self.calls if self.calls else 0.0

    def destructive_percent(self) -> str:
        """The share of destructive calls in words that never round one away: 1 in 2,000 is "<1%",
        not "0%"; 1,999 in 2,000 is ">99%", not "100%"."""
        return share_percent(self.destructive, self.calls)


def share_percent(part: int, whole: int) -> str:
    """`part` of `whole` as a whole percentage, never rounded to 0% or 100% when that is not so."""
    if not whole:
        return "–"
    if part > 0 and 100 * part < whole:
        return "<1%"
    if part < whole and 100 * part > 99 * whole:
        return ">99%"
    return f"{100 * part / whole:.0f}%"


@dataclass(frozen=True, slots=True)
class Outlier:
    seq: int
    value: float
    times_median: float


@dataclass(frozen=True, slots=True)
class NumericField:
    """One numeric argument across the calls: its range, where the range ends, and what stands out.

    Outlier rule: with at least `OUTLIER_MIN_VALUES` values and a median m that is not zero, a value v
    is an outlier when v/m >= 10 (`OUTLIER_ABOVE`) or v/m <= 1/100 (`OUTLIER_BELOW`; this includes
    zero and values of the opposite sign). A ratio to the median, not a standard deviation: one refund
    a thousand times the usual amount must stand out even when it is the only one, and it would
    inflate a deviation enough to hide itself. The low side is stricter because amounts are skewed:
    a refund a tenth of the median is an everyday one, a refund ten times the median is not.
    """

    name: str
    count: int
    minimum: float
    minimum_seqs: tuple[int, ...]
    maximum: float
    maximum_seqs: tuple[int, ...]
    median: float
    outliers: tuple[Outlier, ...]


@dataclass(frozen=True, slots=True)
class Extremes:
    numeric: tuple[NumericField, ...]
    """Fields with outliers first, then by name."""
    first_destructive: PlanRow | None
    most_touched: tuple[str, int] | None
    """The resource touched by the most calls, only when some resource is touched more than once:
    "most touched (1 calls)" would point at nothing."""
    largest_payload: tuple[int, int] | None
    """(seq, bytes of its args and request as JSON)."""
    unsummarised_fields: int = 0
    """Numeric fields past the first `MAX_NUMERIC_FIELDS`, counted but not summarised (an alarm says so)."""
    outlier_seqs: frozenset[int] = frozenset()
    """Every call holding a value far outside the rest, not only the few each field lists, so the
    plan can flag each such row."""


_VERDICT_COUNTS: Final = {
    Verdict.VALIDATED: "validated",
    Verdict.UNPROVEN: "unproven",
    Verdict.NOT_VALIDATED: "not_validated",
    Verdict.REAL_REFUSAL: "real_refusals",
    Verdict.CHAIN_NOISE: "chain_noise",
    Verdict.FAKE_REFUSAL: "fake_refusals",
    Verdict.RECORDED: "recorded",
    Verdict.ERROR: "errors",
    Verdict.NO_OUTCOME: "no_outcome",
}
_EFFECT_COUNTS: Final = {
    "create": "creates",
    "update": "updates",
    "delete": "deletes",
    "read": "reads",
    "other": "other",
}


def interpret(via: str, outcome: Outcome | None, chained: bool, *, proven: bool = False) -> Verdict:
    """What one outcome proves, given who answered the dry run.

    A server's ok is `VALIDATED` only when the dry run was `proven` to have kept nothing (its audit
    log read for the dry run's window counted no kept write, or a sandbox check proved its parameter);
    otherwise it is `UNPROVEN`: an API that does not know the dry-run parameter drops it, answers ok,
    and performs the write.

    In record mode every call is `RECORDED`, whatever it carries: nothing answered it. A server
    refusal is chain noise only when the call is `chained` to an earlier call of the plan, which the
    dry run did not persist: it depends on it through a placeholder, or the earlier call writes the
    same resource (close t3, then delete t3: the delete was judged against a t3 still open). A
    placeholder naming no earlier call cannot explain a refusal, so that stays real.
    """
    if via == "record":
        return Verdict.RECORDED
    if outcome is None:
        return Verdict.NO_OUTCOME
    if outcome.status in ("error", "unknown"):
        return Verdict.ERROR
    if outcome.status == "recorded":
        return Verdict.RECORDED
    if via == "server":
        if outcome.status == "ok":
            return Verdict.VALIDATED if proven else Verdict.UNPROVEN
        return Verdict.CHAIN_NOISE if chained else Verdict.REAL_REFUSAL
    return Verdict.NOT_VALIDATED if outcome.status == "ok" else Verdict.FAKE_REFUSAL


def writes(call: Call) -> bool:
    """Whether a call changes what it touches: every effect but a read."""
    return call.effect != "read"


def resource_of(call: Call) -> str:
    """What a call touches: its request path, else `tool:id` from an id-like argument, else the tool."""
    if call.request is not None:
        return call.request.path
    args = call.args or {}
    for key in ("id", "name", *(key for key in args if key.endswith("_id"))):
        value = args.get(key)
        if isinstance(value, str | int) and not isinstance(value, bool):
            return f"{call.tool}:{value}"
    return call.tool


def _executed_parts(call: Call) -> tuple[Any, ...]:
    """Where a placeholder may stand: the arguments and the request's path, query and body."""
    request = call.request
    if request is None:
        return (call.args,)
    return (call.args, request.path, request.query, request.body)


def as_text(call: Call) -> Call:
    """The call as its text is checked for hidden characters: without the view of a body held as bytes
    (`reviewer.plan.bodies.without_bytes_view`), whose bytes are shown, and never read as text."""
    request = call.request
    if request is None or request.body is None or call.args is None:
        return call
    args = without_bytes_view(call.args, request.content_type, request.body)
    return call if args is call.args else msgspec.structs.replace(call, args=args)


def value_has_hidden(value: Any) -> bool:
    """Whether any string (or key) in a proposal value carries a hidden character."""
    try:
        return json_has_hidden(dumps(value))
    except UnicodeEncodeError:
        return True  # a lone surrogate: hidden by definition, and unencodable


def _keys(value: Any) -> Iterator[str]:
    """Every key in an argument tree, nested ones included."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield key
            yield from _keys(child)
    elif isinstance(value, list):
        for child in value:
            yield from _keys(child)


def call_lookalike(call: Call) -> bool:
    """Whether a call's names could be other names in disguise, or its text is not NFC. Names are
    what a reviewer reads as words: the tool, the argument keys, the request's path."""
    try:
        encoded = dumps(call)
    except UnicodeEncodeError:
        return False  # a lone surrogate: flagged as a hidden character already
    if encoded.isascii():
        return False
    if unnormalized(encoded.decode()):
        return True
    names = [call.tool, *_keys(call.args)]
    if call.request is not None:
        names.append(call.request.path)
        names.extend(_keys(call.request.query))
        names.extend(_keys(call.request.body))
    return any(lookalike_identifier(name) for name in names)


class Analysis:
    """The reviewer's reading of one proposal; rows on demand, whole-plan figures cached."""

    def __init__(self, proposal: Proposal) -> None:
        self.proposal = proposal
        self._rows: dict[int, PlanRow] = {}
        self._minted_cursor: Iterator[tuple[Call | CallGlance, list[Use]]] | None = None
        self._minted_found: dict[int, tuple[Use, ...]] = {}
        self._minted_read = 0

    def __len__(self) -> int:
        return len(self.proposal.calls)

    def row(self, index: int) -> PlanRow:
        """The row for `proposal.calls[index]` (negative indexes count from the end)."""
        calls = self.proposal.calls
        if not -len(calls) <= index < len(calls):
            raise IndexError(f"row {index} of a plan of {len(calls)} calls")
        index %= len(calls)
        cached = self._rows.get(index)
        if cached is None:
            cached = self._rows[index] = self._build_row(index)
        return cached

    def _build_row(self, index: int) -> PlanRow:
        call = self.proposal.calls[index]
        placeholders = self.placeholders(call)
        resolved = {placeholder.text: placeholder for placeholder in placeholders}
        depends_on = tuple(sorted({p.call_seq for p in placeholders if p.resolvable}))
        outcome = call.outcome
        resource = resource_of(call)
        written_before = None
        if not depends_on and _server_refusal(self.proposal.dry_run.via, outcome):
            # A value an earlier dry write minted, hard-coded: the refusal is that call's chain noise.
            minted_from = self._minted_uses_of(index)
            depends_on = tuple(
                sorted(
                    {minted.reference.seq for use in minted_from for minted in use.minted if minted.reference}
                )
            )
            if not depends_on:
                written_before = self._first_writer_before(resource, index)
        return PlanRow(
            index=index,
            seq=call.seq,
            tool=call.tool,
            effect=call.effect,
            method=call.request.method if call.request else None,
            path=call.request.path if call.request else None,
            args_summary=_summarize(call.args, resolved),
            verdict=interpret(
                self.proposal.dry_run.via,
                outcome,
                bool(depends_on) or written_before is not None,
                proven=self.proven_dry(call),
            ),
            http_status=outcome.http_status if outcome else None,
            message=outcome.message if outcome else None,
            destructive=is_destructive(call.effect, call.destructive),
            placeholders=placeholders,
            depends_on=depends_on,
            unresolved=tuple(p for p in placeholders if not p.resolvable),
            resource=resource,
            hidden_characters=value_has_hidden(as_text(call)),
            lookalike=call_lookalike(call),
            written_before=written_before,
        )

    @cached_property
    def _first_writers(self) -> dict[str, int]:
        """The index of the first call writing each resource: one pass, made only once a refused row
        needs it, so a plan without server refusals never pays for it."""
        first: dict[str, int] = {}
        for index, call in enumerate(self.proposal.calls):
            if writes(call):
                first.setdefault(resource_of(call), index)
        return first

    def _first_writer_before(self, resource: str, index: int) -> int | None:
        """The seq of the first call before `index` that writes `resource`, or None."""
        first = self._first_writers.get(resource)
        if first is None or first >= index:
            return None
        return self.proposal.calls[first].seq

    @cached_property
    def minted_uses(self) -> dict[int, tuple[Use, ...]]:
        """Calls (by seq) that carry, as written, a value an earlier call's dry run minted (the id a
        dry-run create answered): the real run would send the dry run's value, which names nothing,
        or by then another client's resource. The whole plan, read when the alarms are computed."""
        self._minted_uses_until(len(self.proposal.calls))
        return dict(self._minted_found)

    def _minted_uses_of(self, index: int) -> tuple[Use, ...]:
        """`minted_uses` of the call at `index`, reading the plan only up to it: a refused row near the
        top costs only the calls above it."""
        self._minted_uses_until(index + 1)
        return self._minted_found.get(self.proposal.calls[index].seq, ())

    def _minted_uses_until(self, count: int) -> None:
        """Read the plan's first `count` calls for hard-coded minted values, once each, in order."""
        if self._minted_cursor is None:
            self._minted_cursor = uses_by_call(self.proposal.calls, self.proposal.dry_run.via)
        while self._minted_read < count:
            found = next(self._minted_cursor, None)
            if found is None:
                self._minted_read = len(self.proposal.calls)
                return
            call, uses = found
            if uses:
                self._minted_found[call.seq] = tuple(uses)
            self._minted_read += 1
            del found, call, uses  # before the next call is decoded: one decoded call at a time

    def placeholders(self, call: Call) -> tuple[Placeholder, ...]:
        """The distinct placeholders in a call's arguments and request, in order of appearance."""
        parts = _executed_parts(call)
        try:
            encoded = dumps(parts)
        except UnicodeEncodeError:  # a lone surrogate, only possible in a proposal built in Python
            import json  # only here: not imported on the way to the app's first frame

            text = json.dumps(msgspec.to_builtins(parts), ensure_ascii=False)
            encoded = text.encode("utf-8", "surrogatepass")
        if MARK.encode() not in encoded:
            return ()
        found: dict[bytes, Placeholder] = {}
        for match in PLACEHOLDER_BYTES.finditer(encoded):
            if match.group() not in found:
                found[match.group()] = self._placeholder(
                    match.group().decode(), match.group(1).decode(), int(match.group(2)), call.seq
                )
        return tuple(found.values())

    def _placeholder(self, text: str, field: str, call_seq: int, in_seq: int) -> Placeholder:
        source = self.call_by_seq(call_seq) if call_seq < in_seq else None
        return Placeholder(
            text=text,
            field=field,
            call_seq=call_seq,
            source_tool=source.tool if source else None,
            resolvable=source is not None,
        )

    def call_by_seq(self, seq: int) -> Call | None:
        """The call numbered `seq`, found by bisection: seq values are unique and increasing."""
        calls = self.proposal.calls
        position = bisect.bisect_left(calls, seq, key=attrgetter("seq"))
        if position < len(calls) and calls[position].seq == seq:
            return calls[position]
        return None

    def proven_dry(self, call: Call) -> bool:
        """Whether something proved `call`'s dry run kept nothing: the API's audit log, read before and
        after, counted no kept write (a run that sent nothing kept nothing); or, where nothing was
        counted, a sandbox check proved the dry-run parameter the call's query carries."""
        dry_run = self.proposal.dry_run
        if dry_run.writes_kept is not None:
            return dry_run.writes_kept == 0
        proved = self._sandbox_proved
        if proved is None or call.request is None:
            return False
        query = call.request.query or {}
        return all(query.get(name) == value for name, value in proved.items())

    @cached_property
    def _sandbox_proved(self) -> dict[str, str] | None:
        """The dry-run parameter a sandbox check proved, or None: one plan's, read once for every call."""
        proof = sandbox_proof(self.proposal.dry_run)
        return None if proof is None else proof.query

    @cached_property
    def ratios(self) -> Ratios:
        """One pass over the calls; rows are not built (a 100,000-call plan would hold them all)."""
        via = self.proposal.dry_run.via
        counts: Counter[str] = Counter()
        resources: set[str] = set()
        """Resources written by the calls so far: in plan order, so each call sees only earlier ones."""
        depending = unresolved = 0
        for position, call in enumerate(self.proposal.calls):
            counts[_EFFECT_COUNTS[call.effect]] += 1
            counts["destructive"] += is_destructive(call.effect, call.destructive)
            placeholders = self.placeholders(call)
            depends = any(placeholder.resolvable for placeholder in placeholders)
            depending += depends
            unresolved += sum(not placeholder.resolvable for placeholder in placeholders)
            resource = resource_of(call)
            chained = depends or resource in resources
            if not chained and _server_refusal(via, call.outcome):
                chained = bool(self._minted_uses_of(position))  # a hard-coded minted value: `_build_row`
            counts[_VERDICT_COUNTS[interpret(via, call.outcome, chained, proven=self.proven_dry(call))]] += 1
            if writes(call):
                resources.add(resource)
        dry_run = self.proposal.dry_run
        return Ratios(
            calls=len(self.proposal.calls),
            creates=counts["creates"],
            updates=counts["updates"],
            deletes=counts["deletes"],
            reads=counts["reads"],
            other=counts["other"],
            validated=counts["validated"],
            unproven=counts["unproven"],
            not_validated=counts["not_validated"],
            real_refusals=counts["real_refusals"],
            chain_noise=counts["chain_noise"],
            fake_refusals=counts["fake_refusals"],
            recorded=counts["recorded"],
            errors=counts["errors"],
            no_outcome=counts["no_outcome"],
            write_requests=dry_run.write_requests,
            writes_kept=dry_run.writes_kept,
            writes_around=dry_run.writes_around,
            resources=len(resources),
            destructive=counts["destructive"],
            depends_on_placeholders=depending,
            unresolved_placeholders=unresolved,
        )

    @cached_property
    def extremes(self) -> Extremes:
        calls = self.proposal.calls
        values: dict[str, tuple[array[float], array[int]]] = {}
        """Each field's numbers and the seqs holding them, 16 bytes a number (tuples in lists took 88)."""
        unsummarised: set[str] = set()
        touched: Counter[str] = Counter()
        first_destructive: int | None = None
        largest: tuple[int, int] | None = None
        for index, call in enumerate(calls):
            if call.args:
                for name, value in _numeric_leaves(call.args, ""):
                    held = values.get(name)
                    if held is None:
                        if len(values) >= MAX_NUMERIC_FIELDS:
                            unsummarised.add(name)
                            continue
                        held = values[name] = (array("d"), array("q"))
                    held[0].append(value)
                    held[1].append(call.seq)
            touched[resource_of(call)] += 1
            if first_destructive is None and is_destructive(call.effect, call.destructive):
                first_destructive = index
            payload = len(dumps(call.args)) + (len(dumps(call.request)) if call.request else 0)
            if largest is None or payload > largest[1]:
                largest = (call.seq, payload)
        numeric = sorted(
            (_numeric_field(name, *held) for name, held in values.items()),
            key=lambda field: (not field.outliers, field.name),
        )
        most_touched = touched.most_common(1)
        outlier_seqs = frozenset(
            seq
            for field in numeric
            if field.outliers
            for value, seq in zip(*values[field.name], strict=True)
            if _is_outlier(value, field.median)
        )
        return Extremes(
            numeric=tuple(numeric),
            first_destructive=None if first_destructive is None else self.row(first_destructive),
            most_touched=most_touched[0] if most_touched and most_touched[0][1] > 1 else None,
            largest_payload=largest,
            unsummarised_fields=len(unsummarised),
            outlier_seqs=outlier_seqs,
        )

    def has_outlier(self, index: int) -> bool:
        """Whether row `index` holds a value far outside the rest. False until the extremes are
        computed (in a worker): a painted row never waits for a whole-plan pass."""
        extremes = self.__dict__.get("extremes")
        if not isinstance(extremes, Extremes) or not extremes.outlier_seqs:
            return False
        return self.proposal.calls[index].seq in extremes.outlier_seqs

    @cached_property
    def money(self) -> Money:
        """The money the plan moves and the calls moving it back (`reviewer.reading.totals`): one
        walk of every call's arguments, which the totals and the alarm of negative amounts share."""
        return plan_money(self.proposal.calls)

    @property
    def negative_amounts(self) -> int:
        """The calls that carry an amount below zero."""
        return self.money.negative_calls

    @property
    def totals(self) -> tuple[Total, ...]:
        """The money the plan moves, per currency, largest first."""
        return self.money.totals

    @cached_property
    def hidden_characters(self) -> bool:
        """Anywhere in the proposal, its title, task and agent included: a scan of its JSON, a chunk
        of calls at a time, so a large plan is never encoded whole."""
        if value_has_hidden(msgspec.structs.replace(self.proposal, calls=[])):
            return True
        calls = self.proposal.calls
        if isinstance(calls, CallList):  # runs bounded by bytes: a few huge calls are not decoded at once
            return any(
                value_has_hidden([as_text(call) for call in calls[window]])
                for window in calls.chunks(limit_calls=SCAN_CHUNK)
            )
        return any(
            value_has_hidden([as_text(call) for call in calls[start : start + SCAN_CHUNK]])
            for start in range(0, len(calls), SCAN_CHUNK)
        )

    @cached_property
    def lookalike_text(self) -> bool:
        """Any call's names in disguise, or any text of the proposal not NFC: a scan that decodes only
        the chunks of calls holding a non-ASCII byte, so a plain large plan costs one encoding pass."""
        try:
            if unnormalized(dumps(msgspec.structs.replace(self.proposal, calls=[])).decode()):
                return True
        except UnicodeEncodeError:
            pass  # a lone surrogate: the hidden-character alarm says so
        calls = self.proposal.calls
        for start in range(0, len(calls), SCAN_CHUNK):
            chunk = calls[start : start + SCAN_CHUNK]
            try:
                if dumps(chunk).isascii():
                    continue
            except UnicodeEncodeError:
                pass
            if any(call_lookalike(call) for call in chunk):
                return True
        return False

    @cached_property
    def deleted_kinds(self) -> str:
        """The kinds the plan deletes, first seen first: `persistent_volume_claim, namespace,
        persistent_volume`, or `ticket ×1,000`; past three kinds, how many more."""
        written = Counter(deleted_kind(call) for call in self.proposal.calls if call.effect == "delete")
        kinds: Counter[str] = Counter()
        for kind, count in written.items():  # each kind made safe once, however many deletes name it
            kinds[safe_text(clip(kind, 40))] += count
        shown = [
            kind if count == 1 else f"{kind} ×{count:,}"
            for kind, count in list(kinds.items())[:DELETED_KINDS_SHOWN]
        ]
        if len(kinds) > DELETED_KINDS_SHOWN:
            shown.append(f"{_count(len(kinds) - DELETED_KINDS_SHOWN, 'more kind')}")
        return ", ".join(shown)

    @cached_property
    def alarms(self) -> tuple[str, ...]:
        """Short sentences for what the reviewer must not miss, worst first."""
        return tuple(sentence for _name, sentence in self.named_alarms)

    @cached_property
    def alarm_names(self) -> tuple[str, ...]:
        """The alarms by name (`writes_kept`, `outliers`), as a policy's rules read them."""
        return tuple(name for name, _sentence in self.named_alarms)

    @cached_property
    def named_alarms(self) -> tuple[tuple[str, str], ...]:
        """Each alarm's name and sentence, worst first: the names are `ALARM_NAMES`."""
        ratios = self.ratios
        alarms: list[tuple[str, str]] = []
        if ratios.writes_kept:
            alarms.append(
                (
                    "writes_kept",
                    f"dry run kept {_count(ratios.writes_kept, 'write')}: the API ignored the dry-run flag",
                )
            )
        if ratios.writes_around:
            alarms.append(
                (
                    "writes_around",
                    f"{_count(ratios.writes_around, 'write')} in the API's audit log during the dry run "
                    "that the gate did not make: something wrote around it",
                )
            )
        from reviewer.plan.hosts import read_host  # httpx reads the host: not before the first row

        base_url = self.proposal.target.base_url
        host = read_host(base_url) if base_url else None
        if host is not None and host.alarms:
            alarms.append(
                (
                    "lookalike_host",
                    "the base URL is not what it seems: requests go to "
                    f"{safe_text(clip(host.host, 80)) or '?'}",
                )
            )
        minted_uses = self.minted_uses
        if minted_uses:
            seq, uses = next(iter(minted_uses.items()))
            first = self.call_by_seq(seq)
            sentence = uses[0].sentence(seq, first.tool if first is not None else "?")
            more = f" ({_count(len(minted_uses), 'call')} in all)" if len(minted_uses) > 1 else ""
            alarms.append(
                (
                    "minted_values",
                    f"{safe_text(clip(sentence, 300))}{more}: the real run would send it as written, "
                    "to whatever holds it then",
                )
            )
        if ratios.unproven and ratios.writes_kept is None:
            read = (
                "the audit log read for writes around the gate cannot say whether the API kept the gate's own"
                if self.proposal.dry_run.writes_around is not None
                else "no log of kept writes read for the dry run"
            )
            alarms.append(
                (
                    "unproven_dry_run",
                    f"the server accepted {_count(ratios.unproven, 'call')}, but nothing proved the API "
                    f"honoured the dry-run parameter ({read}, no sandbox check): it may have written "
                    "for real",
                )
            )
        if ratios.real_refusals:
            alarms.append(("real_refusals", _count(ratios.real_refusals, "real refusal")))
        if ratios.errors:
            alarms.append(("dry_run_errors", f"{_count(ratios.errors, 'call')} failed in the dry run"))
        if ratios.deletes:
            alarms.append(("deletes", f"{_count(ratios.deletes, 'delete')}: {self.deleted_kinds}"))
        if self.negative_amounts:
            alarms.append(
                (
                    "negative_amounts",
                    f"{_count(self.negative_amounts, 'call')} with a negative amount: money coming in, or a "
                    "sign that cancels another call's (the totals say both ways)",
                )
            )
        if self.hidden_characters:
            alarms.append(("hidden_characters", "hidden characters in the text"))
        if self.lookalike_text:
            alarms.append(("lookalike_text", "look-alike letters in a name, or text not in NFC"))
        outliers = [(field, field.outliers[0]) for field in self.extremes.numeric if field.outliers]
        if outliers:
            field, worst = max(outliers, key=lambda pair: _farness(pair[1].times_median))
            count = sum(len(field.outliers) for field, _ in outliers)
            alarms.append(
                (
                    "outliers",
                    f"{_count(count, 'value')} far outside the rest "
                    f"(worst: {safe_text(clip(field.name, 60))} of #{worst.seq}, "
                    f"{_times(worst.times_median)} the median)",
                )
            )
        unsummarised = self.extremes.unsummarised_fields
        if unsummarised:
            alarms.append(
                (
                    "unsummarised_fields",
                    f"{_count(unsummarised, 'more numeric field')} than the "
                    f"{MAX_NUMERIC_FIELDS:,} summarised: "
                    "their extremes and outliers are not shown",
                )
            )
        if ratios.unresolved_placeholders:
            verb = "names" if ratios.unresolved_placeholders == 1 else "name"
            alarms.append(
                (
                    "unresolved_placeholders",
                    f"{_count(ratios.unresolved_placeholders, 'placeholder')} {verb} no earlier call",
                )
            )
        if ratios.fake_refusals:
            alarms.append(
                (
                    "fake_refusals",
                    f"{_count(ratios.fake_refusals, 'call')} refused by the fake: the shape is wrong",
                )
            )
        via = self.proposal.dry_run.via
        if ratios.no_outcome and via != "record":
            alarms.append(("no_outcome", f"{_count(ratios.no_outcome, 'call')} without an outcome"))
        if via in ("fake", "transport"):
            alarms.append(("not_validated", f"nothing was validated ({via} dry run)"))
        elif via == "record":
            alarms.append(("not_validated", "nothing was validated (recorded only)"))
        return tuple(alarms)


ALARM_NAMES: Final = (
    "writes_kept",
    "writes_around",
    "lookalike_host",
    "minted_values",
    "unproven_dry_run",
    "real_refusals",
    "dry_run_errors",
    "deletes",
    "negative_amounts",
    "hidden_characters",
    "lookalike_text",
    "outliers",
    "unsummarised_fields",
    "unresolved_placeholders",
    "fake_refusals",
    "no_outcome",
    "not_validated",
)
"""Every name `Analysis.named_alarms` gives, for a policy to check its rules against."""


def _times(ratio: float) -> str:
    """1,010× or 0.003×: whole multiples when large, two significant digits when small."""
    return f"{ratio:,.0f}×" if abs(ratio) >= 10 else f"{ratio:.2g}×"


DELETED_KINDS_SHOWN: Final = 3
_DELETE_VERBS: Final = re.compile(r"^(delete|remove|destroy|drop|purge|erase)[_.-]+", re.IGNORECASE)


def deleted_kind(call: Call) -> str:
    """What a delete removes, in the tool's own words: `delete_namespace` deletes a namespace; a tool
    named otherwise is named whole. Raw text: the caller sanitizes it."""
    kind = _DELETE_VERBS.sub("", call.tool)
    return kind or call.tool


def _count(number: int, noun: str) -> str:
    return f"{number:,} {noun}{'' if number == 1 else 's'}"


def _summarize(args: dict[str, Any] | None, placeholders: dict[str, Placeholder]) -> str:
    """`key=value, …` on one line, each placeholder shown as its provenance; at most SUMMARY_CHARS.

    Each value is clipped before anything else is done with it, so a 10 MB argument costs what a
    short one does.
    """
    if not args:
        return ""
    parts: list[str] = []
    length = 0
    for position, (key, value) in enumerate(args.items()):
        if length > SUMMARY_CHARS:
            parts.append(f"… (+{len(args) - position:,} more args)")
            break
        text = value if isinstance(value, str) else dumps(value).decode()
        text = clip(text, 4 * SUMMARY_CHARS)
        if placeholders:
            text = PLACEHOLDER.sub(lambda match: _provenance(match, placeholders), text)
        part = f"{clip(key, 60)}={clip(text, SUMMARY_CHARS)}"
        parts.append(part)
        length += len(part) + 2
    return clip(", ".join(parts), SUMMARY_CHARS)


def _provenance(match: re.Match[str], placeholders: dict[str, Placeholder]) -> str:
    placeholder = placeholders.get(match.group())
    return placeholder.provenance() if placeholder else match.group()


def _numeric_leaves(value: Any, prefix: str) -> Iterator[tuple[str, float]]:
    """Every number in an argument tree, named by its dotted path (`spec.replicas`, `lines[].cents`)."""
    if isinstance(value, dict):
        for key, child in value.items():
            yield from _numeric_leaves(child, f"{prefix}.{key}" if prefix else key)
    elif isinstance(value, list):
        for child in value:
            yield from _numeric_leaves(child, f"{prefix}[]")
    elif isinstance(value, int | float) and not isinstance(value, bool):
        yield prefix, float(value)


def _numeric_field(name: str, numbers: Sequence[float], seqs: Sequence[int]) -> NumericField:
    """One field's figures from its numbers and the seqs holding them (parallel arrays), keeping at
    most `MAX_OUTLIERS` outliers at any time, however many values stand out."""
    minimum, maximum = min(numbers), max(numbers)
    median = _median(numbers)
    outliers: list[Outlier] = []
    if len(numbers) >= OUTLIER_MIN_VALUES and median != 0:
        standing_out = (
            Outlier(seq=seq, value=value, times_median=value / median)
            for value, seq in zip(numbers, seqs, strict=True)
            if _is_outlier(value, median)
        )
        outliers = heapq.nsmallest(
            MAX_OUTLIERS, standing_out, key=lambda outlier: (-_farness(outlier.times_median), outlier.seq)
        )
    return NumericField(
        name=name,
        count=len(numbers),
        minimum=minimum,
        minimum_seqs=_first_seqs(numbers, seqs, minimum),
        maximum=maximum,
        maximum_seqs=_first_seqs(numbers, seqs, maximum),
        median=median,
        outliers=tuple(outliers),
    )


def _is_outlier(value: float, median: float) -> bool:
    """The rule of `NumericField`: at least ten times the median, or at most a hundredth of it."""
    times = value / median
    return times >= OUTLIER_ABOVE or times <= OUTLIER_BELOW


def _server_refusal(via: str, outcome: Outcome | None) -> bool:
    return via == "server" and outcome is not None and outcome.status == "refused"


SORTED_MEDIAN_MAX: Final = 200_000
"""Up to this many numbers a field's median sorts a copy of them (32 bytes a number); above it,
`_order_statistics` keeps only the numbers near the middle."""


def _median(
    numbers: Sequence[float], sorted_up_to: int = SORTED_MEDIAN_MAX, sample_size: int = 4096
) -> float:
    """The median, halving before adding: `statistics.median` of two values near 1e308 is inf."""
    count = len(numbers)
    middle = count // 2
    if count <= sorted_up_to:
        ordered = sorted(numbers)
        lower, upper = ordered[middle - 1 if count > 1 else 0], ordered[middle]
    else:
        lower, upper = _order_statistics(numbers, middle - 1, middle, sample_size)
    if count % 2:
        return upper
    return lower / 2 + upper / 2


def _order_statistics(
    numbers: Sequence[float], first: int, second: int, sample_size: int
) -> tuple[float, float]:
    """The `first` and `second` smallest (0-based, first <= second), exactly, holding only the numbers
    between two bounds chosen from an evenly spaced sample, instead of a sorted copy of all of them.

    One pass counts the numbers below the lower bound and at each bound and keeps those strictly
    between; the ranks sought then fall below, at a bound, or among the kept (sorted, few). When a
    skewed sample misses them, the answer still comes, from a sorted copy.
    """
    count = len(numbers)
    sample = sorted(numbers[index] for index in range(0, count, max(1, count // sample_size)))
    margin = max(2, len(sample) // 50)
    low = sample[max(0, first * len(sample) // count - margin)]
    high = sample[min(len(sample) - 1, second * len(sample) // count + margin)]
    below = at_low = at_high = 0
    between: list[float] = []
    for value in numbers:
        if value < low:
            below += 1
        elif value == low:
            at_low += 1
        elif value < high:
            between.append(value)
        elif value == high:
            at_high += 1
    between.sort()

    def nth(rank: int) -> float | None:
        offset = rank - below
        if offset < 0:
            return None
        if offset < at_low:
            return low
        offset -= at_low
        if offset < len(between):
            return between[offset]
        offset -= len(between)
        return high if offset < at_high else None

    found = nth(first), nth(second)
    if found[0] is None or found[1] is None:
        ordered = sorted(numbers)
        return ordered[first], ordered[second]
    return found[0], found[1]


def _farness(times_median: float) -> float:
    """How far from the median either way (1,000x and 1/1,000 alike); zero or a flipped sign: farthest."""
    if times_median <= 0:
        return float("inf")
    return max(times_median, 1 / times_median)


def _first_seqs(numbers: Sequence[float], seqs: Sequence[int], target: float) -> tuple[int, ...]:
    found: list[int] = []
    for value, seq in zip(numbers, seqs, strict=True):
        if value == target and (not found or found[-1] != seq):
            found.append(seq)
            if len(found) == FIRST_SEQS:
                break
    return tuple(found)
