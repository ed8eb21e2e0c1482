"""What drifted between two revisions of a plan (`diff_revisions`).

Calls are matched by what they do, never by position or `seq`, in three steps:

1. **Alignment on content.** Each call's content is its tool, effect, args and request (the
   `seq` is not content: a renumbering alone is no change). The two call lists are aligned with
   Myers' O(ND) diff, whose cost grows with the number of edits D, not with the plan: a long run of
   equal calls is compared a slice at a time, in C (`list == list`), on a cheap *key* per call,
   equal only for calls equal but for their seq: for a parsed plan (`CallList`) the call's JSON
   without its `seq` member, cut from the text with no call decoded; for calls built in code, the
   struct's other fields. Only the pair that ends a run of equal keys is decoded and compared, so the
   same call written otherwise (spaces, key order) still aligns as equal, and a 100,000-call
   drift decodes a handful of calls, not the plan. Calls named by placeholders are looked up
   by seq without decoding the plan either (bisection in a parsed plan, whose seqs increase).
   Two calls also align when they differ only in their dry-run outcome, or only in the call
   numbers of their placeholders (`<id from call 5>` against `<id from call 6>` when call 5 moved
   to 6 because a call was inserted before it): a placeholder is compared by the identity of the
   call it names (tool, effect, resource), not by its number.

   Myers explores about D²/2 points, so past `MAX_EDITS_FOR_MYERS` (64) edits it gives up and
   the plan is *anchored* instead, in time linear in the plan: every call is keyed once by its
   content (tool, effect, args and request as JSON with sorted keys, so however it was written;
   no outcome; placeholder numbers left out), and the calls whose key is unique on each side
   pair up; the longest chain of those pairs in the same order on both sides (patience sorting,
   O(U log U)) is aligned, each anchored pair checked as Myers' snakes check theirs. Between two
   anchors, a gap of n old and m new calls gets Myers again, allowed √(4(n + m)) edits (and at
   most `MAX_EDITS_FOR_MYERS`), so no gap costs more than about 2(n + m) probes (its snakes pass
   over the gap's keys, in C, once per diagonal at most); a gap that needs more, or a plan where
   no call is unique (nothing to anchor), is left to the pairing below.
   The worst case is linear too: a plan of one call repeated has no anchor, and every pair of its
   one gap is decoded and compared.
2. **Pairing what is left.** Between two aligned runs, the leftover old and new calls are paired
   when they touch the same thing: first the same (tool, effect, resource), then the same (tool,
   resource), then the same (tool, effect), each in order. A pair is a *changed* call; what stays
   unpaired is *removed* (old) or *added* (new). Pairing stays inside one gap: a call that moved
   past others is shown where it left and where it arrived, because order is part of what executes.
   Before pairing, a run of repeated calls is slid when that joins an insertion and a removal on
   either side of it into one gap (`[A, A]` to `[A', A]` is one changed call, not two edits).
3. **Comparing each pair.** A pair is compared field by field (`args.amount_cents`,
   `request.path`, `effect`); a placeholder is equal to another when the calls they name are
   paired with each other, so a renumbering is not a change, while an unchanged number that now
   names another call is. A pair whose only differences are in the dry-run outcome is reported
   apart (`outcome_changed`): drift is about what would execute.

The two revisions are always aligned in one canonical orientation (decided by the first calls
that differ) and the result mirrored when needed, so `diff_revisions(b, a)` is exactly the mirror
of `diff_revisions(a, b)` even where several alignments are equally good.
"""

from __future__ import annotations

import gc
import re
from abc import ABC, abstractmethod
from bisect import bisect_left
from collections import defaultdict, deque
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from itertools import compress, count, islice
from operator import attrgetter, itemgetter, ne
from typing import Any, Final, Literal

import msgspec

from reviewer.plan.matching import MISSING, FieldChange
from reviewer.plan.placeholders import PLACEHOLDER, PLACEHOLDER_BYTES
from reviewer.plan.proposal import Call, CallList, Proposal, dumps, same_json
from reviewer.reading._alignment import Block, align
from reviewer.reading.analysis import resource_of

MAX_EDITS_FOR_MYERS: Final = 64
"""Beyond this many inserted plus deleted calls, Myers' exploration (quadratic in the edits) costs
more than keying every call once and anchoring on the unique ones (`_alignment.anchored`), which
takes over."""

_LONGEST_CHUNK: Final = 512
"""The most calls compared (or searched) at once: their JSON is a hundred kilobytes or so, which the
allocator recycles, and the keys made past a difference are few."""

_PLACEHOLDER_MARK: Final = b" from call "
_PLACEHOLDER_SEARCH: Final = re.compile(rb"from call").search
"""Finding the mark in a plan's bytes: `re` scans these bytes about twice as fast as `in` does."""


CallStatus = Literal["added", "changed", "unchanged"]


# ----------------------------------------------------------------------------------------------
# Results


@dataclass(frozen=True, slots=True)
class ChangedCall:
    """An old call and the new call it became; `fields` is what would execute differently."""

    old_index: int
    new_index: int
    old_seq: int
    new_seq: int
    fields: tuple[FieldChange, ...]
    outcome_fields: tuple[FieldChange, ...] = ()
    """Differences in the dry run's answer (`outcome.status`...), shown apart from `fields`."""


@dataclass(frozen=True, slots=True)
class Drift:
    """Revision-to-revision drift. Indexes are positions in `calls` of the old or new proposal."""

    added: tuple[int, ...]
    """New calls that match no old call, as indexes into the new plan, in order."""
    removed: tuple[int, ...]
    """Old calls that match no new call, as indexes into the old plan, in order."""
    changed: tuple[ChangedCall, ...]
    """Pairs whose content (tool, effect, args, request) differs, in new-plan order."""
    outcome_changed: tuple[ChangedCall, ...]
    """Pairs whose content is the same and only the dry-run outcome differs, in new-plan order."""
    target_changed: tuple[FieldChange, ...]
    unchanged: int
    """Pairs with nothing different at all (a renumbered seq or placeholder is nothing)."""
    removed_positions: tuple[int, ...] = ()
    """For each of `removed`, the new index it would stand before (len(new) at the end): where a
    view draws the removed row among the new ones."""
    _status_by_new: dict[int, CallStatus] = field(default_factory=dict, repr=False, compare=False)
    _pair_by_new: dict[int, ChangedCall] = field(default_factory=dict, repr=False, compare=False)

    def __post_init__(self) -> None:
        statuses: dict[int, CallStatus] = dict.fromkeys(self.added, "added")
        statuses.update((pair.new_index, "changed") for pair in self.changed)
        pairs = {pair.new_index: pair for pair in self.outcome_changed}
        pairs.update((pair.new_index, pair) for pair in self.changed)
        object.__setattr__(self, "_status_by_new", statuses)
        object.__setattr__(self, "_pair_by_new", pairs)

    @property
    def is_empty(self) -> bool:
        """Nothing that would execute differs (dry-run outcomes may still have changed)."""
        return not (self.added or self.removed or self.changed or self.target_changed)

    @property
    def summary(self) -> str:
        """`1 added, 1 removed, 1 changed`, or `no drift`; outcome-only changes are named apart."""
        parts = [
            f"{len(items)} {word}"
            for items, word in ((self.added, "added"), (self.removed, "removed"), (self.changed, "changed"))
            if items
        ]
        if self.target_changed:
            parts.append("target changed")
        text = ", ".join(parts) if parts else "no drift"
        if self.outcome_changed:
            count = len(self.outcome_changed)
            text += f" ({count} dry-run outcome{'s' if count != 1 else ''} changed)"
        return text

    def status_of_new(self, index: int) -> CallStatus:
        """The mark of a row of the new plan; an outcome-only change is `unchanged` (see `pair_of_new`)."""
        return self._status_by_new.get(index, "unchanged")

    def pair_of_new(self, index: int) -> ChangedCall | None:
        """The changed or outcome-changed pair a new row belongs to, for its detail view."""
        return self._pair_by_new.get(index)

    def removed_calls(self, old: Proposal) -> tuple[tuple[int, Call], ...]:
        """The removed calls of `old` (the revision this drift was computed from), for display."""
        return tuple((index, old.calls[index]) for index in self.removed)


# ----------------------------------------------------------------------------------------------
# Drift between revisions


def diff_revisions(old: Proposal, new: Proposal, *, max_edits_for_myers: int = MAX_EDITS_FOR_MYERS) -> Drift:
    """Drift from `old` to `new`; the module docstring says how calls are matched.

    `max_edits_for_myers` is where Myers gives way to the anchors (0: always anchor, as tests do to
    hold both alignments to the same properties).
    """
    with _collection_paused():
        sides = _Sides(old.calls, new.calls, max_edits_for_myers)
        prefix = sides.snake(0, 0, len(sides.old), len(sides.new))
        backwards = _aligns_backwards(sides, prefix)
        raw = _diff(sides.swapped() if backwards else sides, prefix)
        if backwards:
            raw = raw.mirrored()
    return Drift(
        added=raw.added,
        removed=raw.removed,
        changed=raw.changed,
        outcome_changed=raw.outcome_changed,
        target_changed=tuple(
            _changes(msgspec.to_builtins(old.target), msgspec.to_builtins(new.target), "target")
        ),
        unchanged=raw.unchanged,
        removed_positions=raw.removed_positions,
    )


@contextmanager
def _collection_paused() -> Iterator[None]:
    """No cyclic garbage collection while a drift runs.

    Keying allocates an object per call compared; a collection triggered midway walks every
    object alive (millions when plans are held as structs) and finds nothing, since nothing
    allocated here forms a cycle. Pausing it saves a large share of a large drift; the previous
    state returns.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()


class _Calls(ABC):
    """One revision's calls as drift reads them: keys to align on, seqs, and a search for placeholders.

    Alignment compares runs of content *keys*, one per call, as lists in C. Equal keys are always
    equal content; different keys only mean "decode the two calls and look" (`_Sides.decoded_match`),
    so no result depends on how a plan's JSON happens to be written. `exact` items are equal only
    when the calls are, seq included: cheaper still, for the stretch before any renumbering.
    """

    def __init__(self, calls: Sequence[Call]) -> None:
        self.calls = calls

    def __len__(self) -> int:
        return len(self.calls)

    def __getitem__(self, index: int) -> Call:
        return self.calls[index]

    def seq(self, index: int) -> int:
        return self.calls[index].seq

    @abstractmethod
    def exact(self, start: int, stop: int) -> Sequence[object]: ...

    @abstractmethod
    def keys(self, start: int, stop: int) -> Sequence[object]: ...

    def content_hashes(self, start: int, stop: int) -> list[int]:
        """For each of calls[start:stop], a hash of its tool, effect, args and request (no seq, no
        outcome), placeholder numbers left out: calls loosely equal share one, so anchors survive a
        renumbering or a new dry run, and the same content written otherwise hashes alike. Only a
        hint of where to align: anchored pairs are compared (a collision costs a worse alignment)."""
        hashes: list[int] = []
        for chunk_start in range(start, stop, _LONGEST_CHUNK):
            keys = self._content_keys(chunk_start, min(chunk_start + _LONGEST_CHUNK, stop))
            text = b"\x00".join(keys)
            if _PLACEHOLDER_SEARCH(text) is not None:
                keys = _CALL_NUMBER.sub(b" from call #", text).split(b"\x00")
            hashes += map(hash, keys)
        return hashes

    @abstractmethod
    def _content_keys(self, start: int, stop: int) -> list[bytes]:
        """Each call's tool, effect, args and request as JSON with keys sorted: no seq, no outcome;
        the same content gives the same text, whether built or parsed, however it was written."""

    @abstractmethod
    def index_of_seq(self, seq: int) -> int | None: ...

    @abstractmethod
    def may_hold_placeholder(self, start: int, stop: int) -> bool:
        """Whether any of calls[start:stop] may hold a placeholder: never no when one does."""


class _ParsedCalls(_Calls):
    """A parsed plan's calls (`CallList`), read through their JSON: none is decoded to be aligned.

    A call's key is its JSON without its leading `"seq": N` member, cut out by one regular
    expression over a slice of calls joined with NUL (a byte no JSON text holds). A call whose seq
    is not its first member keeps it in its key, and aligns through the decoded comparison.
    """

    calls: CallList

    def __init__(self, calls: CallList) -> None:
        super().__init__(calls)
        self._index_by_seq: dict[int, int | None] = {}

    def exact(self, start: int, stop: int) -> list[msgspec.Raw]:
        return self.calls.raw(slice(start, stop))

    def keys(self, start: int, stop: int) -> list[bytes]:
        return _SEQ_MEMBER_SPLIT(b"\x00".join([b"", *self.calls.raw(slice(start, stop))]))[1:]

    def seq(self, index: int) -> int:
        """Decoded alone: the other members are parsed, not built."""
        return _SEQ_DECODER.decode(self.calls.raw(index)).seq

    def _content_keys(self, start: int, stop: int) -> list[bytes]:
        """The calls decoded in one go, as plain values, and written again."""
        contents = _CONTENT_DECODER.decode(b"[" + b",".join(self.calls.raw(slice(start, stop))) + b"]")
        return list(map(_CONTENT_ENCODE, contents))

    def index_of_seq(self, seq: int) -> int | None:
        """By bisection, decoding a few calls: `parse_proposal` checked that seqs increase."""
        if seq not in self._index_by_seq:
            index = bisect_left(range(len(self.calls)), seq, key=self.seq)
            found = index < len(self.calls) and self.seq(index) == seq
            self._index_by_seq[seq] = index if found else None
        return self._index_by_seq[seq]

    def may_hold_placeholder(self, start: int, stop: int) -> bool:
        """JSON may spell a placeholder with `\\u` escapes, so one is a reason to look too. Either
        needs a `<` or a backslash: those single bytes are looked for first, at memchr speed, since
        most plans hold neither; only then is the slower search for the mark run."""
        text = b"".join(self.calls.raw(slice(start, stop)))
        return (b"<" in text or b"\\" in text) and (_PLACEHOLDER_SEARCH(text) is not None or b"\\u" in text)


class _BuiltCalls(_Calls):
    """Calls built in code (`Call` structs): a call's key is its fields but seq, written as JSON,
    since Python's `==` holds `true` equal to `1`. Also serves a parsed plan held against a built one."""

    def __init__(self, calls: Sequence[Call]) -> None:
        super().__init__(calls)
        self._index_by_seq: dict[int, int] | None = None

    def exact(self, start: int, stop: int) -> list[bytes]:
        return list(map(dumps, self.calls[start:stop]))

    def keys(self, start: int, stop: int) -> list[bytes]:
        return [dumps(_CONTENT_FIELDS(call)) for call in self.calls[start:stop]]

    def _content_keys(self, start: int, stop: int) -> list[bytes]:
        return list(map(_CONTENT_ENCODE, map(_TOOL_EFFECT_ARGS_REQUEST, self.calls[start:stop])))

    def index_of_seq(self, seq: int) -> int | None:
        if self._index_by_seq is None:
            self._index_by_seq = {seq: index for index, seq in enumerate(map(_SEQ_OF, self.calls))}
        return self._index_by_seq.get(seq)

    def may_hold_placeholder(self, start: int, stop: int) -> bool:
        return _PLACEHOLDER_SEARCH(msgspec.msgpack.encode(self.calls[start:stop])) is not None


_SEQ_MEMBER_SPLIT: Final = re.compile(
    rb'\x00(?:\{[ \t\n\r]*+"seq"[ \t\n\r]*+:[ \t\n\r]*+\d++[ \t\n\r]*+,)?'
).split
"""Cuts a NUL-led chunk of calls into each call without its leading seq member (kept when not first).
Possessive quantifiers: nothing to backtrack into, and a tenth faster."""
_CONTENT_FIELDS: Final = attrgetter("args", "request", "outcome", "tool", "effect")
"""Everything of a call but its seq, most likely to differ first."""
_SEQ_OF: Final = attrgetter("seq")
_TOOL_EFFECT_ARGS_REQUEST: Final = attrgetter("tool", "effect", "args", "request")


class _Content(msgspec.Struct):
    """What a call would execute, decoded as plain values (no seq, no outcome, no validation)."""

    tool: str
    effect: str
    args: Any = None
    request: Any = None


class _Seq(msgspec.Struct):
    seq: int


_CONTENT_DECODER: Final = msgspec.json.Decoder(list[_Content])
_SEQ_DECODER: Final = msgspec.json.Decoder(_Seq)
_CONTENT_ENCODE: Final = msgspec.json.Encoder(order="sorted", enc_hook=float).encode
"""Keys sorted, so that a call keys alike however its JSON was written; floats a proposal tags are floats."""
_CALL_NUMBER: Final = re.compile(rb" from call \d+")

_Match = Literal["same", "loose", "different"]


class _Sides:
    """The two revisions' calls of one alignment and what is looked up or computed about them lazily."""

    def __init__(self, old: Sequence[Call], new: Sequence[Call], max_edits_for_myers: int) -> None:
        self.max_edits_for_myers = max_edits_for_myers
        self.old: _Calls
        self.new: _Calls
        if isinstance(old, CallList) and isinstance(new, CallList):
            self.old, self.new = _ParsedCalls(old), _ParsedCalls(new)
        else:
            self.old, self.new = _BuiltCalls(old), _BuiltCalls(new)
        self.loose_pairs: set[tuple[int, int]] = set()
        """Aligned pairs whose content is not the same (loosely equal, or aligned by `claim`): compared
        in full."""
        self._canonical_old: dict[int, bytes] = {}
        self._canonical_new: dict[int, bytes] = {}

    def swapped(self) -> _Sides:
        other = object.__new__(_Sides)
        other.old, other.new = self.new, self.old
        other.max_edits_for_myers = self.max_edits_for_myers
        other.loose_pairs = {(y, x) for x, y in self.loose_pairs}
        other._canonical_old, other._canonical_new = self._canonical_new, self._canonical_old
        return other

    def snake(self, x: int, y: int, x_end: int, y_end: int, *, loose: bool = True) -> int:
        """How many calls from (x, y) align one to one: runs of equal keys in C, then the pair that
        stopped a run decoded, which still aligns if it is the same content written otherwise or,
        when `loose`, loosely equal."""
        start = x
        while x < x_end and y < y_end:
            run = self._equal_run(x, y, x_end, y_end)
            x, y = x + run, y + run
            if x == x_end or y == y_end:
                break
            match = self.decoded_match(x, y)
            if match == "different" or (match == "loose" and not loose):
                break
            if match == "loose":
                self.loose_pairs.add((x, y))
            x, y = x + 1, y + 1
        return x - start

    def claim(self, x: int, y: int, length: int) -> None:
        """Align old[x:x+length] with new[y:y+length] pair for pair, as anchors found them: each pair
        not the same content is noted to be compared in full, found as a snake finds it."""
        end = x + length
        while x < end:
            size = min(end - x, _LONGEST_CHUNK)
            equal = self._equal_keys(x, y, size)
            x, y = x + equal, y + equal
            if equal < size:
                if self.decoded_match(x, y) != "same":
                    self.loose_pairs.add((x, y))
                x, y = x + 1, y + 1

    def same_run(self, x: int, y: int, length: int) -> bool:
        """Whether old[x:x+length] and new[y:y+length] hold the same content, call for call."""
        return self.snake(x, y, x + length, y + length, loose=False) == length

    def _equal_run(self, x: int, y: int, x_end: int, y_end: int) -> int:
        """How many calls from (x, y) have equal keys: growing slices compared in C, never one by one,
        each call's key made once (the first difference is found in the slices already keyed)."""
        start = x
        size = 1
        while x < x_end and y < y_end:
            size = min(size, x_end - x, y_end - y)
            equal = self._equal_keys(x, y, size)
            x, y = x + equal, y + equal
            if equal < size:
                break
            size = 16 if size == 1 else min(size * 2, _LONGEST_CHUNK)
        return x - start

    def _equal_keys(self, x: int, y: int, size: int) -> int:
        """How many of the `size` calls from (x, y) have equal keys before the first that differs."""
        old, new = self.old, self.new
        if old.exact(x, x + size) == new.exact(y, y + size):
            return size
        return _common_prefix(old.keys(x, x + size), new.keys(y, y + size))

    def first_seq_difference(self, x: int, y: int, length: int) -> int | None:
        """The first offset in old[x:x+length] and new[y:y+length] where the seqs differ: identical
        calls (seq included) are passed a slice at a time in C; only the others are decoded."""
        offset = 0
        while offset < length:
            size = min(_LONGEST_CHUNK, length - offset)
            same = _common_prefix(
                self.old.exact(x + offset, x + offset + size), self.new.exact(y + offset, y + offset + size)
            )
            offset += same
            if same < size:
                if self.old.seq(x + offset) != self.new.seq(y + offset):
                    return offset
                offset += 1
        return None

    def decoded_match(self, x: int, y: int) -> _Match:
        """Old call x against new call y, decoded: the same content, loosely equal (only the
        outcome differs, or only placeholder numbers), or different."""
        old, new = self.old[x], self.new[y]
        if old.tool != new.tool or old.effect != new.effect:
            return "different"
        if same_json(old.args, new.args) and same_json(old.request, new.request):
            return "same" if same_json(old.outcome, new.outcome) else "loose"
        same = self.canonical(x, old_side=True) == self.canonical(y, old_side=False)
        return "loose" if same else "different"

    def canonical(self, index: int, *, old_side: bool) -> bytes:
        """The call's content as sorted JSON, each placeholder naming its call by identity, not number."""
        cache = self._canonical_old if old_side else self._canonical_new
        found = cache.get(index)
        if found is None:
            calls = self.old if old_side else self.new
            found = _content_json(calls[index])
            if _PLACEHOLDER_MARK in found:

                def by_identity(match: re.Match[bytes]) -> bytes:
                    named = calls.index_of_seq(int(match.group(2)))
                    identity = "?" if named is None else "|".join(_identity(calls[named]))
                    return b"<" + match.group(1) + b" from " + msgspec.json.encode(identity) + b">"

                found = PLACEHOLDER_BYTES.sub(by_identity, found)
            cache[index] = found
        return found


def _content_json(call: Call) -> bytes:
    return msgspec.json.encode(
        {"tool": call.tool, "effect": call.effect, "args": call.args, "request": call.request},
        order="sorted",
    )


def _identity(call: Call) -> tuple[str, str, str]:
    """(tool, effect, resource): what a call does to what; placeholder numbers in the resource are dropped."""
    resource = resource_of(call)
    if " from call " in resource:
        resource = PLACEHOLDER.sub(r"<\1 from a call>", resource)
    return call.tool, call.effect, resource


def _common_prefix(old: Sequence[object], new: Sequence[object]) -> int:
    """How many leading items of two equally long lists are equal, compared in C."""
    if old == new:
        return len(old)
    return next(compress(count(), map(ne, old, new)), 0)


def _aligns_backwards(sides: _Sides, first_difference: int) -> bool:
    """Whether to align new against old and mirror the result, so that A→B mirrors B→A exactly.

    Decided by what both directions see alike: the first calls that differ (as msgpack bytes),
    or, when one plan is a prefix of the other, which one is longer.
    """
    old, new = sides.old, sides.new
    if first_difference >= min(len(old), len(new)):
        return len(old) > len(new)
    return msgspec.msgpack.encode(old[first_difference]) > msgspec.msgpack.encode(new[first_difference])


@dataclass(frozen=True, slots=True)
class _RawDrift:
    added: tuple[int, ...]
    removed: tuple[int, ...]
    changed: tuple[ChangedCall, ...]
    outcome_changed: tuple[ChangedCall, ...]
    unchanged: int
    removed_positions: tuple[int, ...]
    added_positions: tuple[int, ...]

    def mirrored(self) -> _RawDrift:
        def swap(pair: ChangedCall) -> ChangedCall:
            return ChangedCall(
                pair.new_index,
                pair.old_index,
                pair.new_seq,
                pair.old_seq,
                _swapped(pair.fields),
                _swapped(pair.outcome_fields),
            )

        def in_new_order(pairs: tuple[ChangedCall, ...]) -> tuple[ChangedCall, ...]:
            return tuple(sorted(map(swap, pairs), key=attrgetter("new_index")))

        return _RawDrift(
            added=self.removed,
            removed=self.added,
            changed=in_new_order(self.changed),
            outcome_changed=in_new_order(self.outcome_changed),
            unchanged=self.unchanged,
            removed_positions=self.added_positions,
            added_positions=self.removed_positions,
        )


_MIRRORED_NOTES: Final = {"added field": "removed field", "removed field": "added field"}


def _swapped(changes: tuple[FieldChange, ...]) -> tuple[FieldChange, ...]:
    return tuple(
        FieldChange(change.path, change.new, change.old, _MIRRORED_NOTES.get(change.note, change.note))
        for change in changes
    )


def _diff(sides: _Sides, prefix: int) -> _RawDrift:
    old, new = sides.old, sides.new
    blocks = align(sides, prefix)
    old_partner = [-1] * len(old)
    new_partner = [-1] * len(new)
    for old_start, new_start, length in blocks:
        old_partner[old_start : old_start + length] = range(new_start, new_start + length)
        new_partner[new_start : new_start + length] = range(old_start, old_start + length)
    gaps = _Gaps()
    compared: dict[tuple[int, int], ChangedCall | None] = {}
    for old_range, new_range in _gap_ranges(sides, blocks):
        paired_before = len(gaps.pairs)
        _pair_gap(sides, old_range, new_range, gaps)
        for old_index, new_index in gaps.pairs[paired_before:]:
            old_partner[old_index] = new_index
            new_partner[new_index] = old_index
            # Compared now, while the pairing has their calls decoded, unless a placeholder makes
            # the result depend on pairs not made yet.
            if not (
                old.may_hold_placeholder(old_index, old_index + 1)
                or new.may_hold_placeholder(new_index, new_index + 1)
            ):
                compared[old_index, new_index] = _compared(
                    sides, old_index, new_index, old_partner, new_partner
                )

    to_compare = {pair for pair in sides.loose_pairs if old_partner[pair[0]] == pair[1]} | set(gaps.pairs)
    to_compare |= _equal_pairs_naming_renumbered_calls(sides, blocks, gaps)

    changed: list[ChangedCall] = []
    outcome_changed: list[ChangedCall] = []
    for old_index, new_index in sorted(to_compare, key=itemgetter(1)):
        if (old_index, new_index) in compared:
            pair = compared[old_index, new_index]
        else:
            pair = _compared(sides, old_index, new_index, old_partner, new_partner)
        if pair is not None:
            (changed if pair.fields else outcome_changed).append(pair)
    return _RawDrift(
        added=tuple(gaps.added),
        removed=tuple(gaps.removed),
        changed=tuple(changed),
        outcome_changed=tuple(outcome_changed),
        unchanged=len(old) - len(gaps.removed) - len(changed) - len(outcome_changed),
        removed_positions=tuple(gaps.removed_positions),
        added_positions=tuple(gaps.added_positions),
    )


def _compared(
    sides: _Sides, old_index: int, new_index: int, old_partner: list[int], new_partner: list[int]
) -> ChangedCall | None:
    """The pair's differences, or None when nothing differs (a renumbering is nothing)."""
    old_call, new_call = sides.old[old_index], sides.new[new_index]
    fields = tuple(_call_changes(old_call, new_call, sides, old_partner, new_partner))
    outcome_fields = tuple(_changes(_plain(old_call.outcome), _plain(new_call.outcome), "outcome"))
    if not (fields or outcome_fields):
        return None
    return ChangedCall(old_index, new_index, old_call.seq, new_call.seq, fields, outcome_fields)


@dataclass(slots=True)
class _Gaps:
    pairs: list[tuple[int, int]] = field(default_factory=list)
    added: list[int] = field(default_factory=list)
    removed: list[int] = field(default_factory=list)
    added_positions: list[int] = field(default_factory=list)
    removed_positions: list[int] = field(default_factory=list)


_PAIRING_TIERS: Final[tuple[Callable[[tuple[str, str, str]], tuple[str, ...]], ...]] = (
    lambda identity: identity,
    lambda identity: (identity[0], identity[2]),
    lambda identity: (identity[0], identity[1]),
)
"""Leftover calls pair when they touch the same thing: same (tool, effect, resource), then the same
tool and resource (the effect changed), then the same tool and effect (the resource changed)."""


def _gap_ranges(sides: _Sides, blocks: list[Block]) -> Iterator[tuple[range, range]]:
    """The old and new calls left between aligned runs, gap by gap, in order."""
    old_at, new_at = 0, 0
    for old_start, new_start, length in [*blocks, (len(sides.old), len(sides.new), 0)]:
        if old_at < old_start or new_at < new_start:
            yield range(old_at, old_start), range(new_at, new_start)
        old_at, new_at = old_start + length, new_start + length


def _pair_gap(sides: _Sides, old_range: range, new_range: range, gaps: _Gaps) -> None:
    """Pair a gap's leftover calls that touch the same thing; the rest are added or removed."""
    pairs: dict[int, int] = {}
    if old_range and new_range:
        old_identity = {index: _identity(sides.old[index]) for index in old_range}
        new_identity = {index: _identity(sides.new[index]) for index in new_range}
        for tier in _PAIRING_TIERS:
            if len(pairs) == min(len(old_range), len(new_range)):
                break  # every call of the shorter side is paired
            waiting: defaultdict[tuple[str, ...], deque[int]] = defaultdict(deque)
            paired_new = set(pairs.values())
            for index in new_range:
                if index not in paired_new:
                    waiting[tier(new_identity[index])].append(index)
            for index in old_range:
                if index not in pairs:
                    candidates = waiting.get(tier(old_identity[index]))
                    if candidates:
                        pairs[index] = candidates.popleft()
    gaps.pairs += pairs.items()
    if len(pairs) == len(old_range) == len(new_range):
        return  # the usual gap: one call changed in place
    partner_of_new = {new_index: old_index for old_index, new_index in pairs.items()}
    # Where an unpaired call stands on the other side: before the partner of the next paired call.
    next_new = new_range.stop
    positions: list[tuple[int, int]] = []
    for index in reversed(old_range):
        if index in pairs:
            next_new = pairs[index]
        else:
            positions.append((index, next_new))
    for index, position in reversed(positions):
        gaps.removed.append(index)
        gaps.removed_positions.append(position)
    next_old = old_range.stop
    positions = []
    for index in reversed(new_range):
        if index in partner_of_new:
            next_old = partner_of_new[index]
        else:
            positions.append((index, next_old))
    for index, position in reversed(positions):
        gaps.added.append(index)
        gaps.added_positions.append(position)


def _equal_pairs_naming_renumbered_calls(
    sides: _Sides, blocks: list[Block], gaps: _Gaps
) -> set[tuple[int, int]]:
    """Aligned `==` pairs that may still differ: a placeholder whose number did not change but whose
    call did (call 5 is another call now). Only calls after the first renumbered or unpaired call
    can hold one; their text is searched for placeholders in bulk, then call by call where found."""
    first = _first_renumbering(sides, blocks, gaps)
    if first is None:
        return set()
    at_risk: set[tuple[int, int]] = set()
    for old_start, new_start, length in blocks:
        skip = max(0, first - old_start)
        if skip >= length:
            continue
        for index in _indexes_with_placeholders(sides.old, old_start + skip, old_start + length):
            at_risk.add((index, new_start + index - old_start))
    return at_risk


def _first_renumbering(sides: _Sides, blocks: list[Block], gaps: _Gaps) -> int | None:
    """The first old index from which one call number may name different calls in the two plans:
    an unpaired call on either side, or a pair whose two seqs differ."""
    old, new = sides.old, sides.new
    candidates = [*gaps.removed[:1], *gaps.added_positions[:1]]
    candidates += islice(
        (old_index for old_index, new_index in gaps.pairs if old.seq(old_index) != new.seq(new_index)), 1
    )
    for old_start, new_start, length in blocks:
        old_last, new_last = old_start + length - 1, new_start + length - 1
        if (
            old.seq(old_start) == new.seq(new_start)
            and old.seq(old_last) == new.seq(new_last)
            and old.seq(old_last) - old.seq(old_start) == length - 1
        ):
            continue
        offset = sides.first_seq_difference(old_start, new_start, length)
        if offset is not None:
            candidates.append(old_start + offset)
        break
    return min(candidates, default=None)


def _indexes_with_placeholders(calls: _Calls, start: int, stop: int) -> Iterator[int]:
    """Calls in calls[start:stop] whose text may hold a placeholder: the text of a chunk of calls at
    a time searched in C, halved only where the mark is found, so a plan without placeholders costs
    one pass and never more than a chunk's text at once."""
    for chunk_start in range(start, stop, _LONGEST_CHUNK):
        pending = [(chunk_start, min(chunk_start + _LONGEST_CHUNK, stop))]
        while pending:
            low, high = pending.pop()
            if not calls.may_hold_placeholder(low, high):
                continue
            if high - low == 1:
                yield low
                continue
            middle = (low + high) // 2
            pending += ((middle, high), (low, middle))


# ----------------------------------------------------------------------------------------------
# Comparing one pair


_ABSENT: Final = MISSING
"""Stands for a field one side does not have (shown as absent, unlike an explicit null)."""


def _plain(value: Any) -> Any:
    return None if value is None else msgspec.to_builtins(value)


def _call_changes(
    old: Call, new: Call, sides: _Sides, old_partner: list[int], new_partner: list[int]
) -> list[FieldChange]:
    """The fields of what would execute that differ; a placeholder is compared by the call it names."""

    def old_reference(seq: int) -> tuple[str, int]:
        index = sides.old.index_of_seq(seq)
        if index is None:
            return ("old call that does not exist", seq)
        partner = old_partner[index]
        return ("pair", index) if partner >= 0 else ("removed call", index)

    def new_reference(seq: int) -> tuple[str, int]:
        index = sides.new.index_of_seq(seq)
        if index is None:
            return ("new call that does not exist", seq)
        partner = new_partner[index]
        return ("pair", partner) if partner >= 0 else ("added call", index)

    compare = _Comparison(old_reference, new_reference)
    found: list[FieldChange] = []
    compare.walk(old.tool, new.tool, "tool", found)
    compare.walk(old.effect, new.effect, "effect", found)
    compare.walk(old.args, new.args, "args", found)
    compare.walk(_plain(old.request), _plain(new.request), "request", found)
    return found


def _changes(old: Any, new: Any, path: str) -> list[FieldChange]:
    """Field-by-field differences of two JSON-like values, placeholders compared as text."""
    found: list[FieldChange] = []
    _Comparison(None, None).walk(old, new, path, found)
    return found


class _Comparison:
    """Walks two JSON-like values in step, naming each leaf that differs by its path."""

    def __init__(
        self,
        old_reference: Callable[[int], tuple[str, int]] | None,
        new_reference: Callable[[int], tuple[str, int]] | None,
    ) -> None:
        self.old_reference = old_reference
        self.new_reference = new_reference

    def walk(self, old: Any, new: Any, path: str, found: list[FieldChange]) -> None:
        """Appends to `found` each leaf of `old` and `new` that differs, in the order old lists them."""
        if isinstance(old, dict) and isinstance(new, dict):
            for key, value in old.items():
                other = new.get(key, _ABSENT)
                kind = type(value)
                if (
                    kind is type(other)
                    and kind in _LEAVES
                    and value == other
                    and not (kind is str and " from call " in value)
                ):
                    continue  # the usual case, an equal leaf, passed without a call
                self.walk(value, other, f"{path}.{key}", found)
            for key, value in new.items():
                if key not in old:
                    found.append(FieldChange(f"{path}.{key}", _ABSENT, value, "added field"))
            return
        if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
            for position, (old_item, new_item) in enumerate(zip(old, new, strict=True)):
                self.walk(old_item, new_item, f"{path}[{position}]", found)
            return
        if isinstance(old, str) and isinstance(new, str) and self.old_reference is not None:
            self._walk_string(old, new, path, found)
            return
        if old is _ABSENT:
            found.append(FieldChange(path, old, new, "added field"))
        elif new is _ABSENT:
            found.append(FieldChange(path, old, new, "removed field"))
        elif old != new or _kind(old) != _kind(new):
            found.append(FieldChange(path, old, new))

    def _walk_string(self, old: str, new: str, path: str, found: list[FieldChange]) -> None:
        if " from call " not in old and " from call " not in new:
            if old != new:
                found.append(FieldChange(path, old, new))
            return
        assert self.old_reference is not None and self.new_reference is not None
        old_parts = _split_placeholders(old, self.old_reference)
        new_parts = _split_placeholders(new, self.new_reference)
        if old_parts != new_parts:
            note = "the placeholder names another call" if old == new else ""
            found.append(FieldChange(path, old, new, note))


_LEAVES: Final = frozenset({str, int, float, bool, type(None)})
"""JSON scalars whose `==` is JSON's when both sides are of one type (`1 == True` is across types)."""


def _kind(value: Any) -> str:
    """1 and 1.0 are the same JSON number (RFC 8785 writes both as 1); true and 1 are not."""
    if isinstance(value, bool):
        return "boolean"
    return "number" if isinstance(value, int | float) else type(value).__name__


def _split_placeholders(text: str, reference: Callable[[int], tuple[str, int]]) -> list[Any]:
    """Text with each placeholder replaced by (field, the call it names as seen from both plans)."""
    parts: list[Any] = []
    position = 0
    for match in PLACEHOLDER.finditer(text):
        parts.append(text[position : match.start()])
        parts.append((match.group(1), reference(int(match.group(2)))))
        position = match.end()
    parts.append(text[position:])
    return parts
