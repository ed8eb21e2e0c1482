"""`reviewer trail verify`: an export checked offline against a public key, as a pure function of
the export's lines, the key and any checkpoint seen before.

Every leaf is hashed from its own bytes (the leaf hash the export states is only compared, never
trusted), the leaves are streamed through a `CompactTree` (constant memory for a million entries),
and the root they make must be the one the export's checkpoint signs, and, at the size of a
checkpoint seen before, the one that checkpoint signs: the log then extends what was shown before
(the export's frontier and entries are a consistency proof of their own). The first thing that does
not hold raises `TrailInvalid`, naming the entry or the checkpoint.
"""

from __future__ import annotations

import base64
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Final

import msgspec
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

from reviewer.trail import checkpoint as checkpoints
from reviewer.trail.checkpoint import Checkpoint, CheckpointError
from reviewer.trail.entries import (
    EXPORT_FORMAT,
    PROOF_FORMAT,
    Header,
    Kind,
    Line,
    ProofHeader,
    describe,
)
from reviewer.trail.merkle import LEAF_PREFIX, CompactTree, ProofError, decoded_hash, verify_inclusion


class TrailInvalid(Exception):
    """The export does not prove what it claims; the message names the first entry or checkpoint
    that fails."""


@dataclass(frozen=True)
class Verified:
    """What an export proved: its entries `[since, size)` make the tree its checkpoint signs."""

    checkpoint: Checkpoint
    since: int
    entries: int
    proof: bool = False
    """Whether it was one entry's inclusion proof rather than an export."""


_header: Final = msgspec.json.Decoder(Header)
_kind: Final = msgspec.json.Decoder(Kind)
_proof: Final = msgspec.json.Decoder(ProofHeader)
_line: Final = msgspec.json.Decoder(Line)


def _b64(text: str, what: str) -> bytes:
    value = decoded_hash(text)
    if value is None:
        raise TrailInvalid(f"{what} is not a base64 SHA-256 hash")
    return value


def _signed(text: str, key: Ed25519PublicKey, source: str) -> Checkpoint:
    try:
        return checkpoints.verify(text, key, source)
    except CheckpointError as error:
        raise TrailInvalid(str(error)) from None


def verify_export(lines: Iterable[bytes], key: Ed25519PublicKey, earlier: str | None = None) -> Verified:
    """Check an export (its lines as bytes), or one entry's proof (`reviewer trail prove`), against
    `key`, and against `earlier`, the text of a checkpoint seen before, if given. Raises
    `TrailInvalid` at the first failure."""
    iterator = iter(lines)
    first = next(iterator, b"")
    try:
        kind = _kind.decode(first).format
        if kind == PROOF_FORMAT:
            return _verify_proof(_proof.decode(first), iterator, key, earlier)
        header = _header.decode(first)
    except (msgspec.DecodeError, RecursionError) as error:
        raise TrailInvalid(f"the first line is not a trail export's header ({_why(error)})") from None
    if header.format != EXPORT_FORMAT:
        raise TrailInvalid(f"the export's format is {header.format[:60]!r}, not {EXPORT_FORMAT}")
    final = _signed(header.checkpoint, key, "the export's checkpoint")
    if final.size != header.size:
        raise TrailInvalid(f"the export says it holds {header.size} entries and its checkpoint {final.size}")
    seen = None if earlier is None else _signed(earlier, key, "the checkpoint seen before")
    if seen is not None:
        if seen.origin != final.origin:
            raise TrailInvalid(
                f"the checkpoint seen before is of {seen.origin}, the export of {final.origin}"
            )
        if seen.size > final.size:
            raise TrailInvalid(
                f"the log went backwards: the checkpoint seen before holds {seen.size} entries, the "
                f"export's only {final.size} (a database restored from an older copy?)"
            )
        if seen.size < header.since:
            raise TrailInvalid(
                f"the export begins at entry {header.since}, after the {seen.size} entries of the "
                f"checkpoint seen before; export with --since {seen.size} (or less) to check it"
            )
    if not 0 <= header.since <= header.size:
        raise TrailInvalid(f"the export begins at entry {header.since}, outside its {header.size} entries")
    try:
        tree = CompactTree(header.since, [_b64(text, "a frontier hash") for text in header.frontier])
    except ProofError as error:
        raise TrailInvalid(f"the export's frontier: {error}") from None
    if seen is not None and seen.size == header.since:
        _compare(tree, seen, "the checkpoint seen before")
    sha256 = hashlib.sha256
    append = tree.append_hash
    for number, raw in enumerate(iterator, start=header.since):
        try:
            line = _line.decode(raw)
        except (msgspec.DecodeError, RecursionError) as error:
            raise TrailInvalid(f"entry {number}: not an export line ({_why(error)})") from None
        if line.index != number:
            raise TrailInvalid(
                f"entry {number}: the line says it is entry {line.index}; an entry is missing or out of order"
            )
        content = bytes(line.leaf)
        hashed = sha256(LEAF_PREFIX + content).digest()
        if base64.b64encode(hashed).decode() != line.leaf_hash:
            raise TrailInvalid(
                f"entry {number} ({describe(content)}): its content does not hash to the leaf hash the "
                "log holds; it was changed after it was logged"
            )
        append(hashed)
        if seen is not None and tree.size == seen.size:
            _compare(tree, seen, "the checkpoint seen before")
    if tree.size != final.size:
        raise TrailInvalid(f"the export holds entries up to {tree.size}, and its checkpoint {final.size}")
    _compare(tree, final, "the export's checkpoint")
    return Verified(final, header.since, tree.size - header.since)


def _compare(tree: CompactTree, checkpoint: Checkpoint, which: str) -> None:
    if tree.root() != checkpoint.root:
        raise TrailInvalid(
            f"the first {tree.size} entries do not make the tree {which} signs ({checkpoint.describe()}): "
            "the log was changed or forked since"
        )


def _verify_proof(
    header: ProofHeader, rest: Iterator[bytes], key: Ed25519PublicKey, earlier: str | None
) -> Verified:
    """One entry in the tree its checkpoint signs; with `earlier`, that checkpoint must be the one
    seen before (prove an entry against a checkpoint you kept: `reviewer trail prove --size N`)."""
    signed = _signed(header.checkpoint, key, "the proof's checkpoint")
    if signed.size != header.size:
        raise TrailInvalid(
            f"the proof says the log holds {header.size} entries and its checkpoint {signed.size}"
        )
    if earlier is not None:
        seen = _signed(earlier, key, "the checkpoint seen before")
        if (seen.origin, seen.size, seen.root) != (signed.origin, signed.size, signed.root):
            raise TrailInvalid(
                f"the proof is against the {signed.describe()}, not the {seen.describe()} seen before; "
                f"prove the entry with --size {seen.size}"
            )
    raw = next(rest, b"")
    try:
        line = _line.decode(raw)
    except (msgspec.DecodeError, RecursionError) as error:
        raise TrailInvalid(f"the proof's entry is not an export line ({_why(error)})") from None
    content = bytes(line.leaf)
    hashed = hashlib.sha256(LEAF_PREFIX + content).digest()
    try:
        proof = [_b64(text, "an inclusion proof's hash") for text in header.inclusion]
        verify_inclusion(hashed, line.index, signed.size, proof, signed.root)
    except ProofError as error:
        raise TrailInvalid(f"entry {line.index} ({describe(content)}): {error}") from None
    if next(rest, None) is not None:
        raise TrailInvalid("the proof holds more than one entry")
    return Verified(signed, line.index, 1, proof=True)


def _why(error: Exception) -> str:
    """A line's decoding error in words: one nested past any limit is said so, not as a traceback."""
    return "it nests deeper than any trail entry" if isinstance(error, RecursionError) else str(error)
