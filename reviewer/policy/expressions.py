"""A rule's `when`: a CEL expression compiled once when the policy loads, its cost bounded before it runs.

CEL has no loops and no I/O; what it can do over a plan is walk it with macros (`exists`, `all`,
`exists_one`, `map`, `filter`). The cost bound is checked at load, on the expression's text:
no walk may name `plan` inside another walk (over 200,000 calls that is 4·10¹⁰ steps, or as many
copies of the plan), and an expression holds at most `MAX_WALKS` walks in at most
`MAX_EXPRESSION_CHARS` characters. What is left costs at most a few passes over the calls, each step
bounded by the expression's length. Names and functions a rule uses are checked at load too, so a
typo stops `serve` instead of failing closed on every plan.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

MAX_EXPRESSION_CHARS: Final = 2000
DEFAULT_DEADLINE: Final = 5.0
"""Seconds evaluating a policy on one plan may take in the queue (`serve --policy-deadline`)."""
MAX_WALKS: Final = 8
NAMES: Final = frozenset({"environment", "target", "plan", "alarms"})
"""The names a rule's expression reads (the activation's top level)."""
CALL_FIELDS: Final = frozenset({"seq", "tool", "effect", "method", "path", "args"})
MACROS: Final = frozenset({"exists", "all", "exists_one", "map", "filter"})
FUNCTIONS: Final = frozenset(
    {
        "size",
        "contains",
        "startsWith",
        "endsWith",
        "matches",
        "string",
        "int",
        "uint",
        "double",
        "bool",
        "bytes",
    }
    | {"type", "dyn", "has", "max", "min"}
)
"""Functions a rule may call: CEL's standard ones on strings, numbers and lists."""

_TOKEN: Final = re.compile(
    r"""(?P<string>[rRbB]{0,2}('''.*?'''|\"\"\".*?\"\"\"|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))"""
    r"|(?P<comment>//[^\n]*)"
    r"|(?P<macro>\.\s*(?P<macro_name>[A-Za-z_][A-Za-z0-9_]*)\s*\()"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<open>[(\[{])|(?P<close>[)\]}])",
    re.S,
)


class ExpressionError(ValueError):
    """An expression refused at load: it does not parse, names what does not exist, or costs too much."""


class EvaluationError(RuntimeError):
    """An expression that raised on a plan (a missing field, a wrong type): fail closed, say which."""


@dataclass(frozen=True)
class Expression:
    source: str
    program: Any
    reads_calls: bool
    reads_args: bool
    reads_alarms: bool
    call_fields: frozenset[str] = frozenset()
    """The fields of a call the expression may read (every identifier that is one), so the
    activation converts only those to CEL: converting the calls is most of a walk's cost."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Compiled again where it is unpickled (a worker process): the binding's program does not pickle."""
        return (compile_expression, (self.source,))

    def evaluate(self, activation: Any) -> bool:
        """True or False on `activation` (a `cel.Context`); EvaluationError for anything else."""
        try:
            result = self.program.execute(activation)
        except Exception as error:  # the binding raises KeyError, TypeError, RuntimeError, ValueError
            raise EvaluationError(_first_line(error)) from None
        if not isinstance(result, bool):
            raise EvaluationError(
                f"the expression gave {type(result).__name__} {_clip(result)}, not true or false"
            )
        return result


def compile_expression(source: str) -> Expression:
    """`source` compiled and its cost checked; ExpressionError saying what is wrong."""
    if not source.strip():
        raise ExpressionError("the expression is empty")
    if len(source) > MAX_EXPRESSION_CHARS:
        raise ExpressionError(
            f"the expression is {len(source):,} characters; at most {MAX_EXPRESSION_CHARS:,}"
        )
    import cel  # here, not at the top: its package imports a command line of its own (~0.1 s)

    try:
        program = cel.compile(source)
    except Exception as error:
        raise ExpressionError(_parse_message(error)) from None
    bound, names = _check_walks(source)
    unknown = sorted(set(program.variables()) - NAMES - bound)
    if unknown:
        raise ExpressionError(f"unknown name {unknown[0]!r}; a rule reads {', '.join(sorted(NAMES))}")
    functions = {name for name in program.functions() if name.isidentifier()} - FUNCTIONS
    if functions:
        raise ExpressionError(f"unknown function {sorted(functions)[0]!r}")
    return Expression(
        source,
        program,
        reads_calls="calls" in names,
        reads_args="args" in names,
        reads_alarms="alarms" in names,
        call_fields=frozenset(names & CALL_FIELDS),
    )


def _check_walks(source: str) -> tuple[set[str], set[str]]:
    """The names macros bind and every identifier the expression holds; ExpressionError for a walk
    that names `plan` inside another walk, or too many walks."""
    bound: set[str] = set()
    names: set[str] = set()
    depth = 0
    walks: list[int] = []
    """The bracket depth at which each enclosing walk's arguments close."""
    count = 0
    expect_binding = False
    for token in _TOKEN.finditer(source):
        kind = token.lastgroup
        if kind in ("string", "comment"):
            continue
        if kind == "macro":
            macro = token.group("macro_name")
            names.add(macro)
            depth += 1
            if macro in MACROS:
                count += 1
                if count > MAX_WALKS:
                    raise ExpressionError(
                        f"more than {MAX_WALKS} walks (exists, all, map, filter) in one rule"
                    )
                walks.append(depth)
                expect_binding = True
            continue
        if kind == "name":
            name = token.group("name")
            if expect_binding:
                bound.add(name)
                expect_binding = False
                continue
            names.add(name)
            if name == "plan" and walks:
                raise ExpressionError(
                    "a walk over the plan inside another walk (plan inside exists/all/map/filter): "
                    "over 200,000 calls that is 40 billion steps; walk once and compare fields"
                )
            continue
        expect_binding = False
        if kind == "open":
            depth += 1
        elif kind == "close":
            if walks and walks[-1] == depth:
                walks.pop()
            depth -= 1
    return bound, names


def context(values: Mapping[str, Any]) -> Any:
    """The activation's values as CEL holds them, converted once for every rule."""
    import cel

    return cel.Context(dict(values))


def _parse_message(error: Exception) -> str:
    text = str(error)
    for line in text.splitlines():
        if "ERROR:" in line:
            return line.split("ERROR:", 1)[1].replace("<input>:", "column ").strip()
    return _first_line(error)


def _first_line(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    if isinstance(error, KeyError):
        text = f"no field {text}"
    return _clip(text.splitlines()[0])


def _clip(value: object, limit: int = 200) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
