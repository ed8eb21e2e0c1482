"""Values a dry-run write minted (the id a dry-run create answered), and where a later call carries them.

A dry run's create answers an id the API would mint, but nothing was persisted: the real run's create
mints its own, and by then another client may hold the first one. So every field a dry-run create
answers is a value only a real write produces, unless it echoes the call's own input or its tool
declares it stable; the dry run shows it as a placeholder (`<id from call 1>`). This module finds such
values again *by value*, wherever a later call carries them (its arguments, path segments, query, body,
nested in lists and objects), so the agent library can record the placeholder instead, and the review
and the verification can flag a plan that hard-codes one.

What can be matched by value safely:
- a distinctive value (a string of at least four characters with a digit in it, or of twelve or more;
  an integer of five digits or more): a whole argument, body or query value, or a whole path segment,
  is recorded as its placeholder;
- the same value inside a longer string, an object's key or a body held as bytes, a value two fields
  minted (ambiguous), a value no placeholder can name, a short value (`7`, `a1`) carried whole, or an
  integer minted one carried as text: none can be resolved safely, so the dry run stops there;
- plain words (`open`, `closed`): states, not identities; never matched by value.
"""

from __future__ import annotations

import itertools
import re
import urllib.parse
from collections.abc import Collection, Container, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import msgspec

from reviewer.plan.bodies import BodyError, exact_bytes
from reviewer.plan.placeholders import (
    MARK,
    PLACEHOLDER,
    Reference,
    field_of,
    from_results,
    placeholder,
    references_in,
    resolve,
)
from reviewer.plan.proposal import Call, CallList
from reviewer.plan.sanitize import clip, safe_text

MIN_DISTINCT_TEXT: Final = 4
"""A minted string this long, with a digit in it, is told apart from ordinary text by value."""
LONG_TEXT: Final = 12
"""A minted string this long is distinctive even without a digit (a slug, a token)."""
MIN_DISTINCT_DIGITS: Final = 5
"""A minted integer with this many digits is told apart from counts and amounts by value."""
MAX_HOLDERS: Final = 3
INNER_LIMIT: Final = 128
"""The longest minted value looked for inside a longer string (ids, UUIDs and ARNs are shorter): the
pieces of a string walked for one stay this short, so a generated field of a few KB that a create
answers cannot make every later string cost its square. A longer minted value is found whole only."""
"""The fields one minted value is kept for: more than one is ambiguous already."""
_FIELD_NAME: Final = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*", re.ASCII)
_ALNUM_RUN: Final = re.compile(r"[A-Za-z0-9]+")
_JSON_ESCAPE: Final = re.compile(rb"\\(?:u[0-9a-fA-F]{4}|.)")

Kind = Literal["distinct", "short", "word"]
Problem = Literal[
    "inside a longer string", "in bytes", "a key", "ambiguous", "too short", "not nameable", "as text"
]
PROBLEM_WORDS: Final[Mapping[str, str]] = {
    "inside a longer string": "inside a longer string, where no placeholder can stand for it alone",
    "in bytes": "inside a body held as its exact bytes, where no placeholder can stand",
    "a key": "as an object's key, where no placeholder stands",
    "ambiguous": "a value more than one field of the dry run minted, so it is not known which",
    "too short": "too short or common to tell apart from an ordinary value",
    "not nameable": "a value no placeholder can name (its field has no name the grammar allows)",
    "as text": "the text of an integer the dry run minted, which a placeholder would send as a number",
}


@dataclass(frozen=True, slots=True)
class Minted:
    """One value a dry-run write answered, and the placeholder that stands for it (None: no name can)."""

    value: str | int
    reference: Reference | None
    where: str
    """The field as the answer holds it (`id`, `items.0.id`)."""


@dataclass(frozen=True, slots=True)
class Use:
    """A later call carrying a minted value: where (`args.mergedInto`, `request.path`), and whether it
    can be recorded as the placeholder (`problem` None) or the dry run must stop."""

    where: str
    value: str | int
    minted: tuple[Minted, ...]
    problem: Problem | None = None

    @property
    def reference(self) -> Reference | None:
        return self.minted[0].reference if self.problem is None else None

    def sentence(self, seq: int, tool: str) -> str:
        """What the reviewer or the agent reads: the call, the field, the value and where it came from,
        each clipped and made safe to print (the tool name, the keys and the value are the agent's)."""
        source = " or ".join(f"call {_seq_of(minted)}'s {clip(minted.where, 80)}" for minted in self.minted)
        value = clip(repr(self.value), 120)
        text = (
            f"call {seq} ({clip(tool, 80)}) carries {value} at {clip(self.where, 120)}, "
            f"a value only the dry run minted ({source})"
        )
        if self.problem is not None:
            text += f": {PROBLEM_WORDS[self.problem]}"
        return safe_text(text)


def _seq_of(minted: Minted) -> str:
    return str(minted.reference.seq) if minted.reference is not None else "?"


def kind_of(value: object) -> Kind | None:
    """How safely `value` can be told apart by value (None: never a minted value, such as a boolean)."""
    if isinstance(value, bool) or not isinstance(value, str | int):
        return None
    if isinstance(value, int):
        return "distinct" if len(str(abs(value))) >= MIN_DISTINCT_DIGITS else "short"
    if not value.strip():
        return None
    if value.isascii() and value.isalpha():
        return "word"
    if len(value) >= LONG_TEXT or (len(value) >= MIN_DISTINCT_TEXT and any(c.isdigit() for c in value)):
        return "distinct"
    return "short"


def leaves(value: Any, prefix: str = "") -> Iterator[tuple[str, Any]]:
    """Each leaf of a JSON-like value with its dotted path (`items.0.id`); the root alone has path ''."""
    stack: list[tuple[str, Any]] = [(prefix, value)]
    while stack:
        where, item = stack.pop()
        if isinstance(item, Mapping):
            stack.extend((f"{where}.{key}" if where else str(key), child) for key, child in item.items())
        elif isinstance(item, list | tuple):
            stack.extend(
                (f"{where}.{index}" if where else str(index), child) for index, child in enumerate(item)
            )
        else:
            yield where, item


def _nameable(where: str) -> bool:
    """Whether a placeholder can name this field: a name first, then names or indexes."""
    parts = where.split(".") if where else []
    return (
        bool(parts)
        and _FIELD_NAME.fullmatch(parts[0]) is not None
        and all(
            _FIELD_NAME.fullmatch(part) is not None or (part.isdigit() and (part == "0" or part[0] != "0"))
            for part in parts[1:]
        )
    )


class InputValues:
    """Every value a call's own input holds (arguments, path segments, query, body): an answer's field
    equal to one of them is an echo, not a minted value. Asked by value, read from the parts' JSON
    text (a string as its quoted JSON, an integer between non-digits) and the paths' segments."""

    def __init__(self, parts: Iterable[Any]) -> None:
        self.parts = list(parts)
        self._encoded: bytes | None = None
        self._segments: set[str] = set()

    def _text(self) -> bytes:
        if self._encoded is None:
            for part in self.parts:
                if isinstance(part, str) and part.startswith("/"):
                    self._segments.update(urllib.parse.unquote(segment) for segment in part.split("/"))
            try:
                self._encoded = msgspec.json.encode(self.parts)
            except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
                self._encoded = b""
        return self._encoded

    def __contains__(self, value: object) -> bool:
        encoded = self._text()
        if isinstance(value, str):
            return value in self._segments or msgspec.json.encode(value) in encoded
        if isinstance(value, int) and not isinstance(value, bool):
            digits = str(value).encode()
            return re.search(rb"(?<![0-9.])" + re.escape(digits) + rb"(?![0-9.eE])", encoded) is not None
        return False


def minted_fields(
    result: Any, seq: int, inputs: Container[object], stable: Sequence[str] = ()
) -> list[Minted]:
    """The fields of a dry-run write's answer that only a real write produces: every leaf but an echo
    of the call's input or a field the tool declares stable (`stable=("slug",)`, or a dotted prefix)."""
    if not isinstance(result, Mapping):
        return []
    found: list[Minted] = []
    for where, value in leaves(result):
        if kind_of(value) is None or value in inputs:
            continue
        if any(where == name or where.startswith(name + ".") for name in stable):
            continue
        # Named only where the grammar reads the same value back (a key holding a dot reads otherwise).
        nameable = _nameable(where) and field_of(result, where) == value
        reference = Reference(where, seq) if nameable else None
        found.append(Minted(value, reference, where))
    return found


@dataclass
class MintedIndex:
    """The values minted so far in a dry run, by value: what a later call is scanned against."""

    by_value: dict[str | int, list[Minted]] = field(default_factory=dict)
    longest: int = 0
    """The length of the longest minted value's text: how far inside a string one is looked for."""
    lengths: set[int] = field(default_factory=set)
    """The length of each minted value's text (up to `INNER_LIMIT`): only pieces of a longer string that
    long can be one, so a string is walked once per length, not once per piece."""
    runs: set[str] = field(default_factory=set)
    """The longest run of letters or digits of each minted value: a value whose run a part does not
    hold as a whole word cannot be in it, so most parts are passed over without being walked."""
    unfilterable: bool = False
    """A minted value has no letter or digit: every part is walked."""

    def add(self, minted: Iterable[Minted]) -> None:
        for item in minted:
            if kind_of(item.value) == "word":
                continue
            text = str(item.value)
            self.longest = max(self.longest, len(text))
            if len(text) <= INNER_LIMIT:
                self.lengths.add(len(text))
            runs = _ALNUM_RUN.findall(text)
            if runs:
                self.runs.add(max(runs, key=len))
            else:
                self.unfilterable = True
            holders = self.by_value.setdefault(item.value, [])
            # Two holders make a value ambiguous; a few are kept to name them (a server default every
            # create answers, such as a timestamp, would otherwise make each add cost the plan's length).
            if len(holders) < MAX_HOLDERS and all(other.reference != item.reference for other in holders):
                holders.append(item)

    def __bool__(self) -> bool:
        return bool(self.by_value)

    def scan(self, value: Any, where: str, *, path: bool = False) -> tuple[Any, list[Use]]:
        """`value` (an argument tree, a query, a body; or a request path when `path`) with each minted
        value that can be named recorded as its placeholder, and every use found."""
        if not self.by_value or not self._might_hold(value):
            return value, []
        uses: list[Use] = []
        if path and isinstance(value, str):
            return self._path(value, where, uses), uses
        return self._tree(value, where, uses), uses

    def _might_hold(self, value: Any) -> bool:
        """Whether `value` could carry a minted value: false only when none of their runs of letters
        or digits is a whole word of it. Read from its JSON text (a C encoder and regular expressions),
        escapes and placeholders blanked, percent-escapes read decoded too."""
        if self.unfilterable:
            return True
        try:
            encoded = msgspec.json.encode(value)
        except (TypeError, UnicodeEncodeError, msgspec.EncodeError):
            return True
        if b'"base64"' in encoded:
            return True  # bytes are looked through only once decoded
        text = _JSON_ESCAPE.sub(b" ", encoded).decode("utf-8", "replace")
        if MARK in text:
            text = PLACEHOLDER.sub(" ", text)
        if "%" in text:
            text += " " + urllib.parse.unquote(text)
        return not self.runs.isdisjoint(_ALNUM_RUN.findall(text))

    def _tree(self, value: Any, where: str, uses: list[Use]) -> Any:
        if isinstance(value, Mapping) and set(value) == {"base64"}:
            self._in_bytes(value, where, uses)
            return value
        if isinstance(value, Mapping):
            result: dict[Any, Any] = {}
            for key, child in value.items():
                self._text(str(key), f"{where}.{key} (its key)", uses, replace=False)
                result[key] = self._tree(child, f"{where}.{key}", uses)
            return result
        if isinstance(value, list | tuple):
            return [self._tree(child, f"{where}.{index}", uses) for index, child in enumerate(value)]
        if isinstance(value, str):
            return self._text(value, where, uses, replace=True)
        if isinstance(value, int) and not isinstance(value, bool) and value in self.by_value:
            return self._whole(value, where, uses, value)
        return value

    def _text(self, text: str, where: str, uses: list[Use], *, replace: bool) -> Any:
        """A string: carried whole, it becomes the placeholder (`replace`) or, as a key, a stop;
        inside a longer one, or as the text of a minted integer, a stop."""
        if MARK in text and PLACEHOLDER.fullmatch(text):
            return text
        if text in self.by_value:
            if replace:
                return self._whole(text, where, uses, text)
            self._use(text, where, uses, "a key")
            return text
        if text.isdigit() and text == str(int(text)) and int(text) in self.by_value:
            self._use(int(text), where, uses, "as text")
            return text
        for piece in _inner_values(text, self.lengths):
            key: str | int = int(piece) if piece.isdigit() and piece == str(int(piece)) else piece
            if key in self.by_value and kind_of(key) == "distinct":
                self._use(key, where, uses, "inside a longer string")
        return text

    def _in_bytes(self, body: Mapping[str, Any], where: str, uses: list[Use]) -> None:
        """A body held as its exact bytes (`reviewer.plan.bodies`): no placeholder can stand inside
        them, so a minted value found in their text is a stop."""
        try:
            text = exact_bytes(body).decode("utf-8", "replace")
        except BodyError:
            return
        whole = [text] if len(text) <= self.longest else []
        for piece in itertools.chain(whole, _inner_values(text, self.lengths)):
            key: str | int = int(piece) if piece.isdigit() and piece == str(int(piece)) else piece
            if key in self.by_value and kind_of(key) == "distinct":
                self._use(key, where, uses, "in bytes")

    def _path(self, path: str, where: str, uses: list[Use]) -> str:
        segments = path.split("/")
        for position, segment in enumerate(segments):
            if not segment or PLACEHOLDER.fullmatch(segment):
                continue
            decoded = urllib.parse.unquote(segment)
            key: str | int | None = None
            if decoded in self.by_value:
                key = decoded
            elif decoded.isdigit() and int(decoded) in self.by_value and decoded == str(int(decoded)):
                key = int(decoded)
            if key is not None:
                segments[position] = str(self._whole(key, f"{where} segment {position}", uses, segment))
                continue
            self._text(decoded, f"{where} segment {position}", uses, replace=False)
        return "/".join(segments)

    def _whole(self, key: str | int, where: str, uses: list[Use], original: Any) -> Any:
        """A value carried whole: its placeholder when exactly one nameable field minted it and it is
        distinctive; otherwise the use, with the reason it cannot be named, and the value unchanged."""
        holders = tuple(self.by_value[key])
        problem: Problem | None = None
        if len({holder.reference for holder in holders}) > 1:
            problem = "ambiguous"
        elif holders[0].reference is None:
            problem = "not nameable"
        elif kind_of(key) != "distinct":
            problem = "too short"
        uses.append(Use(where, key, holders, problem))
        if problem is not None:
            return original
        reference = holders[0].reference
        assert reference is not None
        return placeholder(reference.field, reference.seq)

    def _use(self, key: str | int, where: str, uses: list[Use], problem: Problem) -> None:
        uses.append(Use(where, key, tuple(self.by_value[key]), problem))


def with_placeholders(result: Any, minted: Iterable[Minted]) -> Any:
    """A dry-run answer as the agent sees it: each minted field that a placeholder can name replaced
    by that placeholder, wherever it sits (`items.0.id`)."""
    named = {item.where: item.reference.text() for item in minted if item.reference is not None}
    if not named:
        return result

    def rebuilt(value: Any, where: str) -> Any:
        if where in named:
            return named[where]
        if isinstance(value, Mapping):
            return {
                key: rebuilt(child, f"{where}.{key}" if where else str(key)) for key, child in value.items()
            }
        if isinstance(value, list | tuple):
            return [
                rebuilt(child, f"{where}.{index}" if where else str(index))
                for index, child in enumerate(value)
            ]
        return value

    return rebuilt(result, "")


def _inner_values(text: str, lengths: Collection[int]) -> Iterator[str]:
    """Each piece of `text` of one of `lengths` that starts and ends where a run of letters or digits
    does, except the whole: where a minted value can hide in a longer string (`x-tk-4`, `merged into
    tk-4.`) while `tk-40` does not hold `tk-4`. Linear in the runs, once per length."""
    runs = [(found.start(), found.end()) for found in _ALNUM_RUN.finditer(text)]
    ends = {end for _, end in runs}
    for start, _ in runs:
        for length in lengths:
            if start + length in ends and length < len(text):
                yield text[start : start + length]


# --- a whole plan: the hard-coded minted values a hand-written (or older) plan carries -----------------


def mints(call: Call, via: str) -> bool:
    """Whether a plan call's dry-run answer holds values only a real write produces: a create (or a
    POST) that an answering backend accepted."""
    if via == "record" or call.outcome is None or call.outcome.status != "ok":
        return False
    return call.effect == "create" or (call.request is not None and call.request.method.upper() == "POST")


def executed_parts(call: Call) -> list[tuple[str, Any, bool]]:
    """Where a call carries values that are sent: (name, value, is a path)."""
    parts: list[tuple[str, Any, bool]] = [("args", call.args, False)]
    if call.request is not None:
        parts += [
            ("request.path", call.request.path, True),
            ("request.query", call.request.query, False),
            ("request.body", call.request.body, False),
        ]
    return parts


def call_inputs(call: Call, dry_results: Mapping[int, Any]) -> InputValues:
    """What a call sent: its parts as written, and with their placeholders put in from the earlier
    calls' dry-run answers (what the backend saw), so an answer echoing an earlier id mints nothing."""
    parts = [value for _, value, _ in executed_parts(call)]
    if references_in(parts):
        parts.append(resolve(parts, from_results(dry_results)))
    return InputValues(parts)


def hard_coded(calls: Iterable[Call], via: str) -> Iterator[tuple[Call, list[Use]]]:
    """Each call that carries, by value, a value an earlier call's dry run minted, with the uses: the
    plan will send that value as written, to whatever holds it when the real run comes."""
    return ((call, uses) for call, uses in uses_by_call(calls, via) if uses and isinstance(call, Call))


class _GlanceRequest(msgspec.Struct):
    method: str = ""


class _GlanceOutcome(msgspec.Struct):
    status: str = ""


class CallGlance(msgspec.Struct):
    """What `mints` reads of a call, decoded from its JSON without its arguments, body or answer."""

    seq: int
    effect: str
    request: _GlanceRequest | None = None
    outcome: _GlanceOutcome | None = None


_glance = msgspec.json.Decoder(CallGlance)


def uses_by_call(calls: Iterable[Call], via: str) -> Iterator[tuple[Call | CallGlance, list[Use]]]:
    """Every call, in order, with the minted values of earlier calls it carries (often none): a reader
    can stop after any call, having paid only for the calls above it. Until a call mints, a parsed
    plan's calls are only glanced at (`CallGlance`, with no uses), never decoded whole: a plan that mints
    nothing costs no decoded call beside those its screen holds."""
    index = MintedIndex()
    dry_results: dict[int, Any] = {}
    if not isinstance(calls, CallList):
        for call in calls:
            yield from _read_call(call, via, index, dry_results)
        return
    for position, raw in enumerate(calls.raw(slice(None))):
        if not index:
            try:
                glance = _glance.decode(raw)
            except msgspec.DecodeError:
                glance = None  # not a call: decoded whole, it reads as the stand-in that says so
            if glance is not None and not mints(glance, via):  # type: ignore[arg-type]
                yield glance, []
                continue
        yield from _read_call(calls[position], via, index, dry_results)


def _read_call(
    call: Call, via: str, index: MintedIndex, dry_results: dict[int, Any]
) -> Iterator[tuple[Call, list[Use]]]:
    uses: list[Use] = []
    if index:
        for name, value, is_path in executed_parts(call):
            uses += index.scan(value, name, path=is_path)[1]
    yield call, uses
    result = call.outcome.result if call.outcome is not None else None
    # The inputs are read only for an answer to hold up.
    if mints(call, via) and isinstance(result, Mapping) and result:
        index.add(minted_fields(result, call.seq, call_inputs(call, dry_results)))
    if result is not None:
        dry_results[call.seq] = result
