"""Aligning two sequences on a comparison they supply: Myers' O(ND) diff, and anchors past it.

The drift between two revisions (`reviewer.reading.drift`) aligns its calls with this: `align`
returns the runs of aligned items, in order, as (old_start, new_start, length) blocks. The sides
bring the comparisons (`snake`, `same_run`, `claim`) and the content keys the anchors use; the
aligner knows nothing of what is compared. Its cost grows with the edits, not with the sequences:
Myers up to `max_edits_for_myers` edits, then anchors on items unique on both sides (the longest
chain of them in the same order, by patience sorting) with a bounded Myers between two anchors,
and finally repeated runs slid so that an insertion and a removal around them meet in one gap.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from collections.abc import Hashable, Sequence
from itertools import islice
from math import isqrt
from operator import itemgetter, lt
from typing import Protocol

Block = tuple[int, int, int]
"""(old_start, new_start, length): a run of aligned items."""


class Side(Protocol):
    """One of the two sequences: its length, and a key per item that is equal for items alike."""

    def __len__(self) -> int: ...
    def content_hashes(self, start: int, stop: int) -> Sequence[Hashable]: ...


class Sides(Protocol):
    """The two sequences and the comparisons the aligner asks of them."""

    max_edits_for_myers: int

    @property
    def old(self) -> Side: ...
    @property
    def new(self) -> Side: ...

    def snake(self, x: int, y: int, x_end: int, y_end: int) -> int:
        """How many items from (x, y) align one to one, before x_end or y_end."""
        ...

    def same_run(self, x: int, y: int, length: int) -> bool:
        """Whether old[x:x+length] and new[y:y+length] are the same, item for item."""
        ...

    def claim(self, x: int, y: int, length: int) -> None:
        """Take old[x:x+length] and new[y:y+length] as aligned, pair for pair (an anchored run)."""
        ...


def align(sides: Sides, prefix: int) -> list[Block]:
    """Runs of aligned calls, in order: the common prefix, then Myers over the rest, or, past
    `sides.max_edits_for_myers` edits, anchors on unique calls with a bounded Myers between them."""
    old_length, new_length = len(sides.old), len(sides.new)
    blocks: list[Block] = [(0, 0, prefix)]
    middle = myers(sides, prefix, prefix, old_length, new_length, sides.max_edits_for_myers)
    if middle is None:
        middle = anchored(sides, prefix, old_length, new_length)
    blocks += middle
    return slide_blocks(sides, [block for block in blocks if block[2] > 0])


def slide_blocks(sides: Sides, blocks: list[Block]) -> list[Block]:
    """Move a run of repeated calls so that an insertion and a removal around it meet in one gap.

    `[A, A]` to `[A', A]` aligns the unchanged A with either old A; Myers may pick the first,
    which leaves A' added before the run and the second A removed after it, where the pairing
    (which stays inside a gap) cannot make them one changed call. When the run reads the same
    shifted by s calls, it is moved by s and the two gaps become one.
    """
    old, new = sides.old, sides.new
    slid: list[Block] = []
    previous_end = (0, 0)
    for position, (old_start, new_start, length) in enumerate(blocks):
        following = blocks[position + 1] if position + 1 < len(blocks) else (len(old), len(new), 0)
        added_before = new_start - previous_end[1] if old_start == previous_end[0] else 0
        removed_after = following[0] - (old_start + length) if following[1] == new_start + length else 0
        removed_before = old_start - previous_end[0] if new_start == previous_end[1] else 0
        added_after = following[1] - (new_start + length) if following[0] == old_start + length else 0
        shift = min(added_before, removed_after)
        if shift and sides.same_run(old_start + shift, new_start, length):
            old_start += shift
        else:
            shift = min(removed_before, added_after)
            if shift and sides.same_run(old_start, new_start + shift, length):
                new_start += shift
        slid.append((old_start, new_start, length))
        previous_end = (old_start + length, new_start + length)
    return slid


def myers(
    sides: Sides, old_lo: int, new_lo: int, old_end: int, new_end: int, max_edits: int
) -> list[Block] | None:
    """Myers' greedy O(ND) alignment of old[old_lo:old_end] with new[new_lo:new_end]; None past
    `max_edits` edits. It probes (max_edits + 1)(max_edits + 2) / 2 points at most."""
    old_length, new_length = old_end - old_lo, new_end - new_lo
    if old_length == 0 or new_length == 0:
        return []
    furthest: dict[int, int] = {1: 0}
    trace: list[dict[int, int]] = []
    for edits in range(min(old_length + new_length, max_edits) + 1):
        trace.append(furthest.copy())
        for diagonal in range(-edits, edits + 1, 2):
            if diagonal == -edits or (diagonal != edits and furthest[diagonal - 1] < furthest[diagonal + 1]):
                x = furthest[diagonal + 1]
            else:
                x = furthest[diagonal - 1] + 1
            y = x - diagonal
            if x < old_length and y < new_length:
                x += sides.snake(old_lo + x, new_lo + y, old_end, new_end)
            furthest[diagonal] = x
            if x >= old_length and x - diagonal >= new_length:
                return myers_blocks(trace, old_length, new_length, old_lo, new_lo)
    return None


def myers_blocks(trace: list[dict[int, int]], x: int, y: int, old_lo: int, new_lo: int) -> list[Block]:
    """Walk the trace back from the end: each step is one edit followed by a diagonal run."""
    blocks: list[Block] = []
    for edits in range(len(trace) - 1, -1, -1):
        furthest = trace[edits]
        diagonal = x - y
        if diagonal == -edits or (diagonal != edits and furthest[diagonal - 1] < furthest[diagonal + 1]):
            previous_diagonal = diagonal + 1
        else:
            previous_diagonal = diagonal - 1
        previous_x = furthest.get(previous_diagonal, 0)
        previous_y = previous_x - previous_diagonal
        if edits == 0:
            run_x, run_y = 0, 0
        elif previous_diagonal == diagonal + 1:
            run_x, run_y = previous_x, previous_y + 1
        else:
            run_x, run_y = previous_x + 1, previous_y
        if x > run_x:
            blocks.append((old_lo + run_x, new_lo + run_y, x - run_x))
        x, y = previous_x, previous_y
    blocks.reverse()
    return blocks


def anchored(sides: Sides, lo: int, old_end: int, new_end: int) -> list[Block]:
    """A heavily rewritten plan: anchored on calls unique on both sides, Myers only between anchors.

    Every call of old[lo:] and new[lo:] is keyed once by its content (`Side.content_hashes`); a
    key held by exactly one call on each side pairs those two calls, and the longest chain of such
    pairs in the same order on both sides (patience sorting, O(U log U) for U pairs) is aligned.
    Between two anchors, a gap of n old and m new calls gets Myers with at most √(4(n + m)) edits,
    so its exploration costs about 2(n + m) probes, whatever the gap; a gap that needs more is
    left to the caller's pairing (drift's `_pair_gap` matches such calls by what they touch).
    """
    anchors = unique_anchors(sides, lo, old_end, new_end)
    blocks: list[Block] = []
    old_at, new_at = lo, lo
    for old_start, new_start, length in [*anchors, (old_end, new_end, 0)]:
        old_gap, new_gap = old_start - old_at, new_start - new_at
        whole_range = old_gap == old_end - lo and new_gap == new_end - lo
        # A 1-by-1 gap aligns (loosely equal) or pairs (same target) alike; the whole range failed above.
        if old_gap and new_gap and old_gap + new_gap > 2 and not whole_range:
            max_edits = min(sides.max_edits_for_myers, isqrt(4 * (old_gap + new_gap)))
            blocks += myers(sides, old_at, new_at, old_start, new_start, max_edits) or []
        if length:
            sides.claim(old_start, new_start, length)
            blocks.append((old_start, new_start, length))
        old_at, new_at = old_start + length, new_start + length
    return blocks


def unique_anchors(sides: Sides, lo: int, old_end: int, new_end: int) -> list[Block]:
    """Runs of calls whose content key is unique on both sides, in an order both sides share."""
    old_hashes = sides.old.content_hashes(lo, old_end)
    new_hashes = sides.new.content_hashes(lo, new_end)
    old_count, new_count = Counter(old_hashes), Counter(new_hashes)
    new_at_key = dict(zip(new_hashes, range(lo, new_end), strict=True))
    pairs = [
        (old_position, new_at_key[key])
        for old_position, key in enumerate(old_hashes, start=lo)
        if old_count[key] == 1 and new_count.get(key) == 1
    ]
    blocks: list[Block] = []
    for old_position, new_position in longest_increasing_chain(pairs):
        if blocks:
            old_start, new_start, length = blocks[-1]
            if (old_start + length, new_start + length) == (old_position, new_position):
                blocks[-1] = (old_start, new_start, length + 1)
                continue
        blocks.append((old_position, new_position, 1))
    return blocks


def longest_increasing_chain(pairs: list[tuple[int, int]]) -> list[tuple[int, int]]:
    """The longest run of `pairs` (in increasing old position) whose new positions increase too:
    patience sorting, each pair placed once with a bisection."""
    new_positions = list(map(itemgetter(1), pairs))
    if all(map(lt, new_positions, islice(new_positions, 1, None))):
        return pairs  # no call moved: the usual case, checked in C
    tails: list[int] = []
    """tails[k]: the smallest new position that ends a chain of k + 1 pairs so far."""
    tail_pair: list[int] = []
    before = [-1] * len(pairs)
    for index, (_, new_position) in enumerate(pairs):
        length = len(tails) if not tails or new_position > tails[-1] else bisect_left(tails, new_position)
        if length:
            before[index] = tail_pair[length - 1]
        if length == len(tails):
            tails.append(new_position)
            tail_pair.append(index)
        else:
            tails[length] = new_position
            tail_pair[length] = index
    chain: list[tuple[int, int]] = []
    index = tail_pair[-1] if tail_pair else -1
    while index >= 0:
        chain.append(pairs[index])
        index = before[index]
    chain.reverse()
    return chain
