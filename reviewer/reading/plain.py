"""A plan read as plain lines, for a shell, a pager or a script: every call with its verdict, its
method and path, and only the arguments that tell it apart from the other calls of its tool.

Six Kubernetes scale calls differ by `name` and `replicas`; their `namespace` is the same for all six,
so it is said once, above them (`common_args`), and each line keeps what differs. Pure functions over
an `Analysis`: the caller sanitizes nothing, every string here is sanitized and clipped.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Final

from reviewer.plan.proposal import dumps
from reviewer.plan.sanitize import clip, safe_text
from reviewer.reading.analysis import Analysis, Extremes, NumericField, PlanRow, Verdict

ARG_CHARS: Final = 120
"""One argument's value on a call's line; the review screen's detail shows all of it."""
ARGS_CHARS: Final = 400
"""All of one call's differing arguments."""

_MISSING: Final = object()


@dataclass(frozen=True, slots=True)
class CallLine:
    """One call as `reviewer show` prints it; every string sanitized."""

    seq: int
    tool: str
    effect: str
    verdict: str
    method: str | None
    path: str | None
    args: str
    """The arguments that differ from the other calls of the same tool, `key=value, …`."""
    flags: tuple[str, ...]

    def text(self) -> str:
        call = " ".join(part for part in (self.method, self.path) if part) or self.tool
        head = f"#{self.seq} {self.verdict} {self.effect} {call}"
        if self.method or self.path:
            head += f" ({self.tool})"
        tail = "".join(f" [{flag}]" for flag in self.flags)
        return head + tail + (f"  {self.args}" if self.args else "")

    def as_json(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "tool": self.tool,
            "effect": self.effect,
            "verdict": self.verdict,
            "method": self.method,
            "path": self.path,
            "args": self.args,
            "flags": list(self.flags),
        }


def flags_of(row: PlanRow, outlier: bool) -> list[tuple[str, bool]]:
    """A row's short flags, the most dangerous first, each with whether it is an alarm (drawn red):
    destructive, a value far outside the rest, hidden or look-alike text, and what it depends on."""
    flags: list[tuple[str, bool]] = []
    if row.destructive:
        flags.append(("del", True))
    if outlier:
        flags.append(("out", True))
    if row.hidden_characters:
        flags.append(("hid", True))
    if row.lookalike:
        flags.append(("alike", True))
    if row.unresolved:
        flags.append(("?#" + ",".join(str(p.call_seq) for p in row.unresolved), True))
    elif row.depends_on:
        flags.append(("←#" + ",".join(map(str, row.depends_on)), False))
    elif row.written_before is not None:
        flags.append((f"←#{row.written_before}", False))
    return flags


def _encoded(value: Any) -> bytes:
    try:
        return dumps(value)
    except UnicodeEncodeError:  # a lone surrogate: equal to nothing else
        return repr(value).encode("utf-8", "backslashreplace")


def common_args(analysis: Analysis) -> dict[str, dict[str, Any]]:
    """For each tool called more than once, the arguments every one of its calls gives the same
    value: said once, so each call's line keeps what differs."""
    seen: dict[str, dict[str, bytes] | None] = {}
    values: dict[str, dict[str, Any]] = {}
    counts: dict[str, int] = {}
    for call in analysis.proposal.calls:
        args = call.args or {}
        counts[call.tool] = counts.get(call.tool, 0) + 1
        known = seen.get(call.tool, _MISSING)
        if known is _MISSING:
            seen[call.tool] = {key: _encoded(value) for key, value in args.items()}
            values[call.tool] = dict(args)
            continue
        if not known:
            continue
        assert isinstance(known, dict)
        for key in list(known):
            if key not in args or _encoded(args[key]) != known[key]:
                del known[key]
    return {
        tool: {key: values[tool][key] for key in kept}
        for tool, kept in seen.items()
        if kept and counts[tool] > 1
    }


def _args_text(args: dict[str, Any], skip: dict[str, Any]) -> str:
    parts = []
    for key, value in args.items():
        if key in skip:
            continue
        shown = value if isinstance(value, str) else _encoded(value).decode("utf-8", "replace")
        parts.append(f"{clip(key, 60)}={clip(shown, ARG_CHARS)}")
    return safe_text(clip(", ".join(parts), ARGS_CHARS))


def call_lines(analysis: Analysis, common: dict[str, dict[str, Any]] | None = None) -> Iterator[CallLine]:
    """Every call, in plan order; `common` is `common_args` (computed when not given)."""
    common = common_args(analysis) if common is None else common
    analysis.extremes  # noqa: B018 -- the `out` flags read it; off the screen, computing it is fine
    for index, call in enumerate(analysis.proposal.calls):
        row = analysis.row(index)
        yield CallLine(
            seq=row.seq,
            tool=safe_text(clip(row.tool, 80)),
            effect=row.effect,
            verdict=str(row.verdict) if row.verdict is not Verdict.NO_OUTCOME else "no outcome",
            method=safe_text(clip(row.method, 16)) if row.method else None,
            path=safe_text(clip(row.path, 300)) if row.path else None,
            args=_args_text(call.args or {}, common.get(call.tool, {})),
            flags=tuple(safe_text(flag) for flag, _ in flags_of(row, analysis.has_outlier(index))),
        )


def common_lines(common: dict[str, dict[str, Any]]) -> list[str]:
    """`every create_refund: currency=EUR, reason=late delivery`, one line a tool."""
    return [
        f"every {safe_text(clip(tool, 80))}: {_args_text(args, {})}" for tool, args in common.items() if args
    ]


def number(value: float) -> str:
    """6195900 as 6,195,900, not 6.196e+06: a reviewer compares amounts digit by digit."""
    if value.is_integer() and abs(value) < 1e21:
        return f"{value:,.0f}"
    return f"{value:,.6g}"


def _seqs(found: tuple[int, ...]) -> str:
    return ",".join(map(str, found))


def _numeric_lines(field: NumericField) -> list[str]:
    seqs = _seqs
    lines = [
        f"{safe_text(clip(field.name, 60))}: n={field.count:,}, median {number(field.median)}, "
        f"min {number(field.minimum)} (#{seqs(field.minimum_seqs)}), "
        f"max {number(field.maximum)} (#{seqs(field.maximum_seqs)})"
    ]
    lines.extend(
        f"  ! #{outlier.seq}: {number(outlier.value)} = {outlier.times_median:,.0f}× the median"
        for outlier in field.outliers
    )
    return lines


def extremes_lines(extremes: Extremes) -> list[str]:
    """The extremes as the review screen's pane orders them: fields with values far outside the rest,
    the first delete, the busiest resource, the largest payload, then every other numeric field."""
    lines: list[str] = []
    for field in extremes.numeric:
        if field.outliers:
            lines.extend(_numeric_lines(field))
    first = extremes.first_destructive
    if first is not None:
        where = f" {safe_text(clip(first.path, 200))}" if first.path else ""
        lines.append(f"first delete: #{first.seq} {safe_text(clip(first.tool, 60))}{where}")
    if extremes.most_touched is not None:
        resource, count = extremes.most_touched
        lines.append(f"most touched: {safe_text(clip(resource, 200))} ({count:,} calls)")
    if extremes.largest_payload is not None:
        seq, size = extremes.largest_payload
        lines.append(f"largest payload: #{seq} ({size:,} bytes)")
    for field in extremes.numeric:
        if not field.outliers:
            lines.extend(_numeric_lines(field))
    return lines
