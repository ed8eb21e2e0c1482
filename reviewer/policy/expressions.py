"""A rule's `when`: a CEL expression compiled once when the policy loads, its cost bounded before it runs.

CEL has no loops and no I/O; what it can do over a plan is walk it with macros (`exists`, `all`,
`exists_one`, `map`, `filter`). The cost bound is checked at load, on the expression's text:
no walk may name `plan` inside another walk (over 200,000 calls that is 4·10¹⁰ steps, or as many
copies of the plan), and an expression holds at most `MAX_WALKS` walks in at most
`MAX_EXPRESSION_CHARS` characters. Names and functions a rule uses are checked at load too, so a
typo stops `serve` instead of failing closed on every plan.

The binding expands `map` and `filter` as CEL's specification writes them, a fold whose step is
`result + [value]`: each step copies the list built so far, so a walk that keeps many calls is
quadratic (40,000 calls kept took minutes). Every `map` and `filter` over the calls is therefore
taken out of the rule at load (`linear_walks`) and run as an `exists` whose step hands each kept
value to Python, which builds the list once; what is left of the rule reads the result. A walk
over the calls is then linear, each step bounded by the expression's length. A `map` or `filter`
over anything else (a call's own list, a list the rule writes) is rewritten in place the same way
(`linear_lists`), since it may sit inside another walk's step; in the queue every evaluation is
bounded besides by a deadline and a memory bound (`reviewer.policy.bounded`).

Most walks read a call's tool, effect, method or path and nothing else of it, and plans repeat
those (100,000 refunds: one tool, one effect). Such a walk, `exists`, `all` and `exists_one`
included, runs once for each distinct value of the fields it reads, counted in the one pass over
the calls that makes the activation, and its answer is weighed by how many calls hold each value
(`Walk.fields`); the calls are then never converted to CEL values at all.
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

MAX_EXPRESSION_CHARS: Final = 2000
DEFAULT_DEADLINE: Final = 10.0
"""Seconds evaluating a policy on one plan may take in the queue (`serve --policy-deadline`)."""
MAX_WALKS: Final = 8
NAMES: Final = frozenset({"environment", "target", "plan", "alarms"})
"""The names a rule's expression reads (the activation's top level)."""
CALL_FIELDS: Final = frozenset({"seq", "tool", "effect", "method", "path", "query", "args"})
MACROS: Final = frozenset({"exists", "all", "exists_one", "map", "filter"})
GROUPED_FIELDS: Final = frozenset({"tool", "effect", "method", "path"})
"""The fields of a call a walk may read and still be evaluated once per distinct value (`Walk.fields`):
plans repeat them (100,000 refunds, one tool, one effect), unlike `seq` and `args`."""
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

_STRING: Final = (
    r"""(?P<string>[rRbB]{0,2}('''.*?'''|\"\"\".*?\"\"\"|'(?:[^'\\\n]|\\.)*'|"(?:[^"\\\n]|\\.)*"))"""
)
_TOKEN: Final = re.compile(
    _STRING + r"|(?P<comment>//[^\n]*)"
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
class Walk:
    """A `map` or `filter` over the calls (or over an earlier such walk's result), taken out of the
    rule and run as an `exists` whose step hands each kept value to Python: the binding builds a
    `map`'s or `filter`'s list by copying it at every step (quadratic), this builds it once."""

    name: str
    """The variable the rule reads the walk's result from (`_walk0`, ...)."""
    receiver: str
    """The variable walked: `_calls` or an earlier walk's name."""
    program: Any
    counted: bool = False
    """The rule reads only the result's size (`.filter(...).size()`): the variable is that number,
    and the values kept are never converted back into CEL."""
    kind: str = ""
    """`map`, `filter`, `exists`, `all` or `exists_one`."""
    fields: tuple[str, ...] | None = None
    """Set when the walk's step reads of each call only these `GROUPED_FIELDS` (and nothing else of
    it): the step's answer depends on their values alone, so `program` walks the distinct values
    (`_group`, in the order each first occurs) and the result is weighed by how many calls hold
    each. A short-circuiting `exists` or `all` stops at the same value as over the calls (every
    call before the first one that decides has a value that does not decide), so it gives the same
    answer or the same error; the others visit every value, as over the calls."""
    projection: str | None = None
    """Set for a `map` whose step is one field of the value walked (`plan.calls.map(c, c.args)`):
    the result is read out of the values as Python holds them, never through CEL and back."""


@dataclass(frozen=True)
class Expression:
    source: str
    program: Any
    reads_calls: bool
    reads_args: bool
    reads_alarms: bool
    reads_totals: bool = False
    """Whether it reads `plan.totals` (the money per currency), which walks every call's arguments."""
    call_fields: frozenset[str] = frozenset()
    """The fields of a call the expression may read (every identifier that is one), so the
    activation converts only those to CEL: converting the calls is most of a walk's cost."""
    walks: tuple[Walk, ...] = ()
    reads_call_list: bool = True
    """Whether the rule, once its walks are taken out, reads the calls themselves as CEL values (a
    walk not evaluated by groups, `plan.calls[0]`, `size(plan.calls)`): only then are they converted."""

    def __reduce__(self) -> tuple[Any, ...]:
        """Compiled again where it is unpickled (a worker process): the binding's program does not pickle."""
        return (compile_expression, (self.source,))

    def evaluate(self, activation: Any) -> bool:
        """True or False on `activation` (an `Activation`); EvaluationError for anything else."""
        try:
            if self.reads_call_list:
                activation.convert_calls()
            for walk in self.walks:
                activation.walk(walk)
            result = self.program.execute(activation.context)
        except MemoryError:
            raise  # not the rule's answer: the evaluation as a whole failed (`reviewer.policy.bounded`)
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
    if any(name.startswith("_") for name in bound):
        raise ExpressionError("a name a walk binds may not start with _ (such names are the queue's own)")
    rewritten, walks = linear_walks(source)
    rewritten = linear_lists(rewritten)
    return Expression(
        source,
        cel.compile(rewritten),
        reads_call_list="_calls" in _pieces(rewritten)
        or any(
            walk.receiver == "_calls" and walk.fields is None and walk.projection is None for walk in walks
        ),
        reads_calls="calls" in names,
        reads_args="args" in names,
        reads_alarms="alarms" in names,
        reads_totals=bool({"totals", "totals_in"} & names),
        call_fields=frozenset(names & CALL_FIELDS),
        walks=walks,
    )


_PIECE: Final = re.compile(
    _STRING
    + r"|(?P<comment>//[^\n]*)|(?P<name>[A-Za-z_][A-Za-z0-9_]*)|(?P<punct>[.,()\[\]{}])|(?P<other>\S)",
    re.S,
)
_OPENING: Final = "([{"
_CLOSING: Final = ")]}"


def linear_walks(source: str) -> tuple[str, tuple[Walk, ...]]:
    """`source` with each `map` and `filter` over the calls (`plan.calls.map(c, ...)`, and a walk
    chained on one: `plan.calls.map(c, c.args).filter(a, ...)`), and each `exists`, `all` and
    `exists_one` over the calls that reads only `GROUPED_FIELDS` of them, replaced by a variable
    that a `Walk` fills first; every other `plan.calls` is read from the top-level `_calls` (the
    binding copies a list it selects out of a map, every time). The rest is left as written."""
    texts, gaps = _split(source)
    found: list[tuple[str, str, str, list[str]]] = []
    """Each walk taken out: its variable, receiver, kind and arguments as written."""
    index = 0
    while index < len(texts):
        if texts[index : index + 3] == ["plan", ".", "calls"] and (index == 0 or texts[index - 1] != "."):
            texts[index : index + 3] = ["_calls"]
            gaps[index : index + 3] = [gaps[index]]
        receiver = texts[index]
        kind = texts[index + 2] if texts[index + 1 : index + 2] == ["."] else None
        if (
            (receiver == "_calls" or receiver in {name for name, *_ in found})
            and kind in MACROS
            and texts[index + 3 : index + 4] == ["("]
        ):
            close = _closing(texts, index + 3)
            arguments = _arguments(texts[index + 4 : close], gaps[index + 4 : close])
            shaped = len(arguments) == 2 or (kind == "map" and len(arguments) == 3)
            grouped = receiver == "_calls" and _grouped_fields(arguments) is not None
            if shaped and (kind in ("map", "filter") or grouped):
                name = f"_walk{len(found)}"
                found.append((name, receiver, kind, arguments))
                texts[index : close + 1] = [name]
                gaps[index : close + 1] = [gaps[index]]
                continue
        index += 1
    receivers = {receiver for _name, receiver, _kind, _arguments in found}
    walks = [
        _walk(
            name,
            receiver,
            kind,
            arguments,
            counted=kind in ("map", "filter") and name not in receivers and _only_sized(texts, gaps, name),
        )
        for name, receiver, kind, arguments in found
    ]
    return _joined(texts, gaps), tuple(walks)


def linear_lists(source: str) -> str:
    """`source` with every `map` and `filter` left in it (over a call's own list, over a list a
    rule writes) made an `exists` whose step hands each kept value to Python, which builds the
    list once: `R.map(x, e)` is `_take(K, _mark(K), R.exists(x, _put(K, [e])))`, K numbering the
    place. The binding evaluates a function's arguments in order, so `_mark` opens the place's
    list before its walk and `_take` gives it back after; a walk inside another's step opens and
    closes its own list within each of the outer's steps (`Activation._mark`)."""
    texts, gaps = _split(source)
    index = 0
    while index < len(texts):
        if not (
            texts[index] == "."
            and texts[index + 1 : index + 2] in (["map"], ["filter"])
            and texts[index + 2 : index + 3] == ["("]
        ):
            index += 1
            continue
        kind = texts[index + 1]
        close = _closing(texts, index + 2)
        arguments = _arguments(texts[index + 3 : close], gaps[index + 3 : close])
        begin = _receiver_start(texts, index)
        if begin is None or not (len(arguments) == 2 or (kind == "map" and len(arguments) == 3)):
            index += 1
            continue
        receiver = linear_lists(_joined(texts[begin:index], gaps[begin:index]))
        variable, *steps = [arguments[0], *(linear_lists(step) for step in arguments[1:])]
        kept = f"({steps[0]}) ? [{variable}] : []" if kind == "filter" else _mapped(steps)
        site = next(_SITES)
        texts[begin : close + 1] = [
            f"_take({site}, _mark({site}), {receiver.strip()}.exists({variable}, _put({site}, {kept})))"
        ]
        gaps[begin : close + 1] = [gaps[begin]]
        index = begin + 1
    return _joined(texts, gaps)


_SITES: Final = itertools.count()


def _receiver_start(texts: list[str], dot: int) -> int | None:
    """Where the receiver of the member call at `dot` begins: the chain of names, calls, indexes
    and brackets it is written as (member calls bind tighter than any operator); None for none."""
    at = dot - 1
    while at >= 0:
        text = texts[at]
        if text in _CLOSING:
            at = _opening(texts, at)
            if text == ")" and at > 0 and _atom(texts[at - 1]):
                at -= 1  # a function's name: f(x), or x.f(y) with x before the dot
        elif not _atom(text):
            return None
        if at > 1 and texts[at - 1] == ".":
            at -= 2
            continue
        return at
    return None


def _atom(text: str) -> bool:
    """A name, a string, or a place already made linear (one piece)."""
    return text[:1].isalpha() or text[:1] in "_'\"" or text[:1].isdigit()


def _opening(texts: list[str], closing: int) -> int:
    return _matching(texts, range(closing, -1, -1), _CLOSING, _OPENING)


def _joined(texts: list[str], gaps: list[str]) -> str:
    return "".join(gap + text for gap, text in zip(gaps, texts, strict=True))


def _split(source: str) -> tuple[list[str], list[str]]:
    """The expression's pieces (comments made a space) and the text before each."""
    texts: list[str] = []
    gaps: list[str] = []
    end = 0
    for match in _PIECE.finditer(source):
        gaps.append(source[end : match.start()])
        texts.append(" " if match.lastgroup == "comment" else match.group())
        end = match.end()
    return texts, gaps


def _walk(name: str, receiver: str, kind: str, arguments: list[str], *, counted: bool) -> Walk:
    """The walk's program: over the distinct values of the fields it reads when it can be
    (`Walk.fields`), else over the values walked, each step handing Python what it keeps."""
    import cel

    fields = _grouped_fields(arguments) if receiver == "_calls" else None
    variable, *steps = [arguments[0], *(linear_lists(step) for step in arguments[1:])]
    if fields is not None and (counted or kind not in ("map", "filter")):
        if kind in ("exists", "all"):
            step = f"_group.{kind}({variable}, {steps[0]})"
        else:
            if kind in ("filter", "exists_one"):
                kept = steps[0]  # true or false: checked in Python, as `_pick` checks a filter's
            elif len(steps) == 1:
                kept = f"[{steps[0]}].size()"  # 1, once the value is made (it may raise)
            else:
                kept = f"({steps[0]}) ? [{steps[1]}].size() : 0"
            step = f"_group.exists({variable}, _keep([{kept}]))"
        return Walk(name, receiver, cel.compile(step), counted, kind, fields)
    projected = _pieces(steps[0]) if kind == "map" and len(steps) == 1 else []
    if len(projected) == 3 and projected[:2] == [variable, "."] and projected[2].isidentifier():
        return Walk(name, receiver, None, counted, kind, projection=projected[2])
    step = f"_pick({steps[0]})" if kind == "filter" else f"_keep({_mapped(steps)})"
    return Walk(name, receiver, cel.compile(f"{receiver}.exists({variable}, {step})"), counted, kind)


def _mapped(steps: list[str]) -> str:
    """The values a `map`'s step makes of one value, as a list: its one, or none where a
    three-argument map's condition is false."""
    return f"[{steps[0]}]" if len(steps) == 1 else f"({steps[0]}) ? [{steps[1]}] : []"


def _grouped_fields(arguments: list[str]) -> tuple[str, ...] | None:
    """The `GROUPED_FIELDS` a walk's step reads of the call it binds, when it reads nothing else
    of it and walks nothing itself; else None."""
    variable, *steps = arguments
    if not steps or not variable.isidentifier():
        return None
    fields: set[str] = set()
    for step in steps:
        pieces = _pieces(step)
        for at, piece in enumerate(pieces):
            after = pieces[at + 1 : at + 4]
            if piece in MACROS and at > 0 and pieces[at - 1] == "." and after[:1] == ["("]:
                return None
            if piece != variable or (at > 0 and pieces[at - 1] == "."):
                continue
            if len(after) < 2 or after[0] != "." or after[1] not in GROUPED_FIELDS or after[2:] == ["("]:
                return None
            fields.add(after[1])
    return tuple(sorted(fields))


def _pieces(source: str) -> list[str]:
    """The expression's tokens (a string literal is one), without comments."""
    return [match.group() for match in _PIECE.finditer(source) if match.lastgroup != "comment"]


def _only_sized(texts: list[str], gaps: list[str], name: str) -> bool:
    """Whether the expression reads `name` only as `name.size()` or `size(name)`; if so, each
    such read is made `name` alone (the walk then gives the size)."""
    places = [index for index, text in enumerate(texts) if text == name]
    spans = []
    for index in places:
        if texts[index + 1 : index + 5] == [".", "size", "(", ")"]:
            spans.append((index, index + 5))
        elif (
            texts[index - 2 : index] == ["size", "("]
            and texts[index + 1 : index + 2] == [")"]
            and (index < 3 or texts[index - 3] != ".")
        ):
            spans.append((index - 2, index + 2))
        else:
            return False
    for start, end in reversed(spans):
        texts[start:end] = [name]
        gaps[start:end] = [gaps[start]]
    return True


def _closing(texts: list[str], opening: int) -> int:
    return _matching(texts, range(opening, len(texts)), _OPENING, _CLOSING)


def _matching(texts: list[str], places: range, deeper: str, shallower: str) -> int:
    """The place, walking `places` from a bracket, of the bracket that closes it."""
    depth = 0
    for index in places:
        if texts[index] in deeper:
            depth += 1
        elif texts[index] in shallower:
            depth -= 1
            if depth == 0:
                return index
    raise ExpressionError("unbalanced brackets")


def _arguments(texts: list[str], gaps: list[str]) -> list[str]:
    """A macro's arguments as written, split at its own commas."""
    arguments = [""]
    depth = 0
    for text, gap in zip(texts, gaps, strict=True):
        if text == "," and depth == 0:
            arguments.append("")
            continue
        depth += (text in _OPENING) - (text in _CLOSING)
        arguments[-1] += gap + text
    return [argument.strip() for argument in arguments]


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


class Activation:
    """The values every rule reads, converted to CEL once, and the walks' results as rules fill them.

    The calls are the top-level `_calls` (rules read them as `plan.calls`, rewritten at load), so
    walking them does not copy them out of `plan` first; they are converted to CEL only for the
    first rule that reads them as such (`Expression.reads_call_list`), and a walk by groups reads
    only the distinct values of its fields, counted once for each set of fields."""

    def __init__(self, values: Mapping[str, Any]) -> None:
        import cel

        values = dict(values)
        plan = dict(values["plan"])
        calls = plan.pop("calls", [])
        self._lists: dict[str, list[Any]] = {"_calls": calls}
        self._converted = False
        self._groups: dict[tuple[str, ...], dict[tuple[Any, ...], int]] = {}
        self._counted: tuple[tuple[str, ...], dict[tuple[Any, ...], int]] | None = values.pop("_groups", None)
        """Counted as the calls were read (`reviewer.policy.verdict.activation`): the distinct
        values of every field the walks by groups read, which each walk's own fields are read from."""
        self._walked: list[Any] = []
        self._position = 0
        self._kept: list[Any] = []
        self._places: list[tuple[int, list[Any]]] = []
        """The lists `linear_lists` places are building, innermost last, each with its place."""
        functions: dict[str, Callable[..., Any]] = {
            "_pick": self._pick,
            "_keep": self._keep,
            "_mark": self._mark,
            "_put": self._put,
            "_take": self._take,
        }
        self.context = cel.Context({**values, "plan": plan}, functions)

    def convert_calls(self) -> None:
        """The calls as the CEL list `_calls`, converted once."""
        if not self._converted:
            self.context.add_variable("_calls", self._lists["_calls"])
            self._converted = True

    def walk(self, walk: Walk) -> None:
        """Run `walk` and give the rules its result under its name."""
        self._position = 0
        self._kept = []
        if walk.fields is not None:
            result = self._walk_groups(walk, walk.fields)
        elif walk.projection is not None:
            field = walk.projection
            try:
                kept = [value[field] for value in self._lists[walk.receiver]]
            except (KeyError, TypeError, IndexError):
                raise KeyError(field) from None  # as the binding says of a value without it
            self._lists[walk.name] = kept
            result = len(kept) if walk.counted else kept
        else:
            if walk.receiver == "_calls":
                self.convert_calls()
            self._walked = self._lists[walk.receiver]
            walk.program.execute(self.context)  # every step answers false: the walk visits every value
            self._lists[walk.name] = self._kept
            result = len(self._kept) if walk.counted else self._kept
        self.context.add_variable(walk.name, result)

    def _walk_groups(self, walk: Walk, fields: tuple[str, ...]) -> Any:
        groups = self.groups(fields)
        self.context.add_variable(
            "_group",
            [
                key[0].call if key and isinstance(key[0], _Missing) else dict(zip(fields, key, strict=True))
                for key in groups
            ],
        )
        answer = walk.program.execute(self.context)
        if walk.kind in ("exists", "all"):
            return answer
        weighed = zip(self._kept, groups.values(), strict=True)
        if walk.kind == "map":
            return sum(kept * calls for kept, calls in weighed)
        kept = 0
        for holds, calls in weighed:
            if not isinstance(holds, bool):
                raise TypeError(f"a {walk.kind}'s condition gave {type(holds).__name__}, not true or false")
            kept += calls if holds else 0
        return kept == 1 if walk.kind == "exists_one" else kept

    def groups(self, fields: tuple[str, ...]) -> dict[tuple[Any, ...], int]:
        """How many calls hold each distinct value of `fields`, in the order each first occurs.
        A call without one of them is its own value, so the step that reads it raises as it would."""
        groups = self._groups.get(fields)
        if groups is None and self._counted is not None and set(fields) <= set(self._counted[0]):
            counted, by_key = self._counted
            places = [counted.index(field) for field in fields]
            groups = {}
            for key, calls in by_key.items():
                projected = tuple(key[place] for place in places)
                groups[projected] = groups.get(projected, 0) + calls
            self._groups[fields] = groups
        if groups is None:
            groups = {}
            for call in self._lists["_calls"]:
                try:
                    key = tuple(call[field] for field in fields)
                except (KeyError, TypeError):
                    key = (_Missing(call),)
                groups[key] = groups.get(key, 0) + 1
            self._groups[fields] = groups
        return groups

    def _mark(self, place: int) -> int:
        """A place's walk begins: its list, empty. A list the same place left open (its walk
        raised, and an `||` took the error) is dropped, with any opened after it."""
        self._drop(place)
        self._places.append((place, []))
        return place

    def _put(self, place: int, values: list[Any]) -> bool:
        for opened, kept in reversed(self._places):
            if opened == place:
                kept.extend(values)
                return False
        raise RuntimeError("a list built outside its walk")

    def _take(self, place: int, _mark: int, _walked: bool) -> list[Any]:
        """A place's walk ended: its list (and any left open inside it, dropped)."""
        return self._drop(place)

    def _drop(self, place: int) -> list[Any]:
        for at in range(len(self._places) - 1, -1, -1):
            if self._places[at][0] == place:
                kept = self._places[at][1]
                del self._places[at:]
                return kept
        return []

    def _pick(self, keep: object) -> bool:
        """A filter's step: keep the value walked (the one this is the `_position`-th call for:
        a value whose condition raised makes the walk raise, so none is skipped unnoticed)."""
        if not isinstance(keep, bool):
            raise TypeError(f"a filter's condition gave {type(keep).__name__}, not true or false")
        if keep:
            self._kept.append(self._walked[self._position])
        self._position += 1
        return False

    def _keep(self, values: list[Any]) -> bool:
        """A map's step: the value it made (none where a three-argument map's condition is false)."""
        self._kept.extend(values)
        return False


@dataclass(eq=False)
class _Missing:
    """A call that lacks a field a walk by groups reads: a group of its own, walked as it is."""

    call: Any


def context(values: Mapping[str, Any]) -> Activation:
    """The activation's values as CEL holds them, converted once for every rule."""
    return Activation(values)


def _parse_message(error: Exception) -> str:
    text = str(error)
    for line in text.splitlines():
        if "ERROR:" in line:
            return line.split("ERROR:", 1)[1].replace("<input>:", "column ").strip()
    return _first_line(error)


def _first_line(error: Exception) -> str:
    text = str(error).strip() or type(error).__name__
    text = text.rsplit("Python function call failed: ", 1)[-1]  # a walk's own step said why
    if isinstance(error, KeyError):
        text = f"no field {text}"
    return _clip(text.splitlines()[0])


def _clip(value: object, limit: int = 200) -> str:
    text = str(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"
