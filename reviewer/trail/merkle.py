"""RFC 9162 Merkle tree hashing: leaf and node hashes, a root computed as leaves stream past, and
inclusion and consistency proofs (sections 2.1.3 and 2.1.4), made from stored subtree hashes and
checked from nothing but hashes.

A tree is described by ranges of leaves, `[start, end)`. Every range the RFC's recursion names
splits into perfect subtrees ("pieces", `(level, position)`: the `2**level` leaves from
`position * 2**level`), which a log stores as it appends; `pieces` lists them without reading a
hash, so a store fetches every hash a proof needs in one query.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Final

HASH_SIZE: Final = 32
LEAF_PREFIX: Final = b"\x00"
NODE_PREFIX: Final = b"\x01"
EMPTY_ROOT: Final = hashlib.sha256(b"").digest()
"""The root of the empty tree: the hash of no bytes at all."""

Piece = tuple[int, int]
"""A perfect subtree: `(level, position)`, the `2**level` leaves from `position * 2**level`."""
Range = tuple[int, int]
"""Leaves `[start, end)`."""


class ProofError(ValueError):
    """A proof that does not prove what it is said to; the message names what failed."""


def decoded_hash(text: str) -> bytes | None:
    """A hash as exports, proofs and checkpoints write it (base64 of 32 bytes); None when it is not."""
    try:
        value = base64.b64decode(text, validate=True)
    except binascii.Error:
        return None
    return value if len(value) == HASH_SIZE else None


def leaf_hash(data: bytes) -> bytes:
    return hashlib.sha256(LEAF_PREFIX + data).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    return hashlib.sha256(NODE_PREFIX + left + right).digest()


def _split(size: int) -> int:
    """The largest power of two smaller than `size` (at least 2): where the RFC splits a tree."""
    return 1 << ((size - 1).bit_length() - 1)


class CompactTree:
    """The root of a growing tree with O(log n) memory: the hashes of its perfect subtrees, left to
    right (one per bit set in the size). What a verifier streams a million leaves through."""

    __slots__ = ("frontier", "size")

    def __init__(self, size: int = 0, frontier: Sequence[bytes] = ()) -> None:
        if len(frontier) != size.bit_count():
            raise ProofError(
                f"a tree of {size} leaves has {size.bit_count()} perfect subtrees, not {len(frontier)}"
            )
        self.size = size
        self.frontier = list(frontier)

    def append_hash(self, hashed: bytes) -> None:
        frontier = self.frontier
        size = self.size
        while size & 1:
            hashed = hashlib.sha256(NODE_PREFIX + frontier.pop() + hashed).digest()
            size >>= 1
        frontier.append(hashed)
        self.size += 1

    def append(self, data: bytes) -> bytes:
        """Append a leaf; its leaf hash."""
        hashed = hashlib.sha256(LEAF_PREFIX + data).digest()
        self.append_hash(hashed)
        return hashed

    def root(self) -> bytes:
        if not self.frontier:
            return EMPTY_ROOT
        root = self.frontier[-1]
        for left in reversed(self.frontier[:-1]):
            root = node_hash(left, root)
        return root


def pieces(start: int, end: int) -> list[Piece]:
    """The perfect subtrees whose hashes make the RFC's hash of leaves `[start, end)`, left to right.

    The RFC splits a range at the largest power of two below its length; every range a proof names
    starts on a multiple of that power, so its left part is a perfect subtree and the rest is split
    again: the hash is `pieces` folded from the right with `node_hash`.
    """
    found: list[Piece] = []
    while end - start > 1:
        k = _split(end - start)
        level = k.bit_length() - 1
        if end - start == 2 * k:  # a perfect range: one piece
            break
        found.append((level, start >> level))
        start += k
    length = end - start
    level = length.bit_length() - 1
    found.append((level, start >> level))
    return found


def range_hash(start: int, end: int, hashes: Mapping[Piece, bytes]) -> bytes:
    """MTH of leaves `[start, end)`, from the hashes of its `pieces`."""
    parts = [hashes[piece] for piece in pieces(start, end)]
    result = parts[-1]
    for left in reversed(parts[:-1]):
        result = node_hash(left, result)
    return result


def inclusion_ranges(index: int, size: int) -> list[Range]:
    """RFC 9162 2.1.3.1 PATH(index, D[size]) as ranges, from the leaf upwards."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    ranges: list[Range] = []
    start, end = 0, size
    while end - start > 1:
        k = _split(end - start)
        if index - start < k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
    ranges.reverse()
    return ranges


def consistency_ranges(first: int, second: int) -> list[Range]:
    """RFC 9162 2.1.4.1 PROOF(first, D[second]) as ranges, from the bottom upwards."""
    if not 0 < first <= second:
        raise ProofError(f"no consistency proof from {first} to {second} leaves")
    ranges: list[Range] = []
    start, end, m, complete = 0, second, first, True
    while m != end - start:
        k = _split(end - start)
        if m <= k:
            ranges.append((start + k, end))
            end = start + k
        else:
            ranges.append((start, start + k))
            start += k
            m -= k
            complete = False
    if not complete:
        ranges.append((start, end))
    ranges.reverse()
    return ranges


def proof_hashes(
    ranges: Iterable[Range], fetch: Callable[[set[Piece]], Mapping[Piece, bytes]]
) -> list[bytes]:
    """The hashes of `ranges`, with every stored subtree they need fetched at once."""
    ranges = list(ranges)
    needed = {piece for start, end in ranges for piece in pieces(start, end)}
    hashes = fetch(needed) if needed else {}
    missing = needed - set(hashes)
    if missing:
        raise ProofError(f"the log holds no hash for the subtrees {sorted(missing)}")
    return [range_hash(start, end, hashes) for start, end in ranges]


def verify_inclusion(leaf: bytes, index: int, size: int, proof: Sequence[bytes], root: bytes) -> None:
    """RFC 9162 2.1.3.2: raises `ProofError` unless `leaf` (its leaf hash) is leaf `index` of the
    tree of `size` leaves whose root is `root`."""
    if not 0 <= index < size:
        raise ProofError(f"leaf {index} is not in a tree of {size} leaves")
    fn, sn, r = index, size - 1, leaf
    for p in proof:
        if sn == 0:
            raise ProofError("the inclusion proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            r = node_hash(p, r)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            r = node_hash(r, p)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the inclusion proof is shorter than the tree is deep")
    if r != root:
        raise ProofError(f"leaf {index} is not in the tree of {size} leaves with that root")


def verify_consistency(
    first: int, first_root: bytes, second: int, second_root: bytes, proof: Sequence[bytes]
) -> None:
    """RFC 9162 2.1.4.2: raises `ProofError` unless the tree of `second` leaves (root `second_root`)
    extends the one of `first` leaves (root `first_root`)."""
    if first > second:
        raise ProofError(f"a tree of {second} leaves cannot extend one of {first}")
    if first == second:
        if proof:
            raise ProofError("a proof between two trees of one size must be empty")
        if first_root != second_root:
            raise ProofError(f"two different roots for the tree of {first} leaves")
        return
    if first == 0:
        if proof:
            raise ProofError("a proof from the empty tree must be empty")
        return
    path = list(proof)
    if first & (first - 1) == 0:  # a power of two: the first tree is a subtree of the second
        path.insert(0, first_root)
    if not path:
        raise ProofError("the consistency proof is empty")
    fn, sn = first - 1, second - 1
    while fn & 1:
        fn >>= 1
        sn >>= 1
    fr = sr = path[0]
    for c in path[1:]:
        if sn == 0:
            raise ProofError("the consistency proof is longer than the tree is deep")
        if fn & 1 or fn == sn:
            fr = node_hash(c, fr)
            sr = node_hash(c, sr)
            while not fn & 1 and fn != 0:
                fn >>= 1
                sn >>= 1
        else:
            sr = node_hash(sr, c)
        fn >>= 1
        sn >>= 1
    if sn != 0:
        raise ProofError("the consistency proof is shorter than the tree is deep")
    if fr != first_root:
        raise ProofError(f"the tree of {second} leaves does not begin with the given tree of {first} leaves")
    if sr != second_root:
        raise ProofError(f"the consistency proof does not lead to the root of the tree of {second} leaves")
