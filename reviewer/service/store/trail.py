"""The trail's Merkle log in the queue's database: each trail event appended as a leaf in the
transaction that writes the event, and the heads, proofs and entries the trail routes serve.

One append-only table, `trail_log`: leaf `i`'s row holds its bytes, its leaf hash and the hashes of
the perfect subtrees leaf `i` completes (as many as `i` ends in 1 bits), so every subtree hash is
stored once, in the row of its last leaf, and an append writes one row at the end of one index: a
submission's commit grows by about one page. An append runs under the store's one write lock
(`BEGIN IMMEDIATE`, PostgreSQL's advisory lock), so a queue's replicas append to one log in one
order; it reads the log's size and the left neighbours the new leaf completes, in two queries.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from reviewer.service.store.base import Transaction
from reviewer.trail import merkle
from reviewer.trail.entries import leaf
from reviewer.trail.merkle import HASH_SIZE, Piece

EXPORT_BATCH: Final = 2000
"""Entries read per query while an export streams, or trail rows while earlier events are logged."""


def size(db: Transaction) -> int:
    row = db.one("SELECT max(leaf_index) AS last FROM trail_log")
    return 0 if row is None or row["last"] is None else int(row["last"]) + 1


def _last_leaf(piece: Piece) -> int:
    """The row a subtree's hash is stored in: its last leaf's."""
    level, position = piece
    return ((position + 1) << level) - 1


def _rows(db: Transaction, indexes: Iterable[int]) -> dict[int, bytes]:
    """The stored hashes of these leaves' rows, in one query."""
    wanted = sorted(set(indexes))
    if not wanted:
        return {}
    params = {f"i{number}": index for number, index in enumerate(wanted)}
    rows = db.all(
        "SELECT leaf_index, hashes FROM trail_log WHERE leaf_index IN ("
        + ", ".join(f":{name}" for name in params)
        + ")",
        **params,
    )
    return {int(row["leaf_index"]): bytes(row["hashes"]) for row in rows}


def append(db: Transaction, trail_row: Mapping[str, Any], report_sha256: str | None = None) -> int:
    """Log a `trail` row (its columns by name) as the next leaf; its position."""
    index = size(db)
    content = leaf(
        index=index,
        seq=int(trail_row["seq"]),
        at=float(trail_row["at"]),
        actor=trail_row["actor"],
        event=trail_row["event"],
        proposal_id=trail_row["proposal_id"],
        revision=None if trail_row["revision"] is None else int(trail_row["revision"]),
        plan_sha256=trail_row["plan_sha256"],
        reason=trail_row["reason"],
        statement=trail_row["statement"],
        signature=trail_row["signature"],
        key_fingerprint=trail_row["key_fingerprint"],
        report_sha256=report_sha256,
        identity=trail_row["identity"],
    )
    hashed = merkle.leaf_hash(content)
    stored = [hashed]
    completes = (index ^ (index + 1)).bit_length() - 1  # the 1 bits `index` ends in
    if completes:
        # the left sibling at level l ends at leaf index - 2**l, the first hash of level l in its row
        neighbours = _rows(db, (index - (1 << level) for level in range(completes)))
        for level in range(completes):
            left = neighbours[index - (1 << level)][level * HASH_SIZE : (level + 1) * HASH_SIZE]
            hashed = merkle.node_hash(left, hashed)
            stored.append(hashed)
    db.run(
        "INSERT INTO trail_log (leaf_index, seq, leaf, hashes) VALUES (:index, :seq, :leaf, :hashes)",
        index=index,
        seq=int(trail_row["seq"]),
        leaf=content.decode(),
        hashes=b"".join(stored),
    )
    return index


def catch_up(db: Transaction) -> int:
    """Log, in their order, the trail events written after the log's last leaf by a writer that kept
    no log: a database from before the log, or a replica of an older release during a rolling
    upgrade; answers how many. Every append runs it first, under the same write lock, so another
    replica's events are folded in at the next append, and every event without a leaf is past the
    last leaf (both indexed look-ups, nothing read when there are none). Their reports' digests are
    not known: null."""
    logged = 0
    while rows := db.all(
        "SELECT * FROM trail WHERE seq > coalesce((SELECT seq FROM trail_log ORDER BY leaf_index DESC "
        "LIMIT 1), 0) ORDER BY seq LIMIT :batch",
        batch=EXPORT_BATCH,
    ):
        for row in rows:
            append(db, row)
        logged += len(rows)
    return logged


def hashes(db: Transaction, wanted: Iterable[Piece]) -> dict[Piece, bytes]:
    """The stored hashes of these subtrees, in one query."""
    wanted = set(wanted)
    rows = _rows(db, (_last_leaf(piece) for piece in wanted))
    found = {}
    for piece in wanted:
        row = rows.get(_last_leaf(piece))
        level = piece[0]
        if row is not None and len(row) >= (level + 1) * HASH_SIZE:
            found[piece] = row[level * HASH_SIZE : (level + 1) * HASH_SIZE]
    return found


def frontier(db: Transaction, leaves: int) -> list[bytes]:
    """The hashes of the perfect subtrees the first `leaves` entries make, left to right."""
    if leaves == 0:
        return []
    pieces = merkle.pieces(0, leaves)
    found = hashes(db, pieces)
    missing = [piece for piece in pieces if piece not in found]
    if missing:
        raise merkle.ProofError(f"the log holds no hash for the subtrees {missing}")
    return [found[piece] for piece in pieces]


def root(db: Transaction, leaves: int) -> bytes:
    return merkle.CompactTree(leaves, frontier(db, leaves)).root()


@dataclass(frozen=True)
class Head:
    """The log's size and root, and the consistency proof from a size asked for (None when that is
    no earlier size of this log: 0, or more than it holds)."""

    size: int
    root: bytes
    since: int | None = None
    consistency: list[bytes] | None = None


def head(db: Transaction, since: int | None = None) -> Head:
    leaves = size(db)
    proof = None
    if since is not None and 0 < since <= leaves:
        proof = consistency(db, since, leaves)
    return Head(leaves, root(db, leaves), since, proof)


@dataclass(frozen=True)
class Proof:
    """One entry, and its inclusion proof in the tree of `size` entries whose root is `root`."""

    index: int
    leaf_hash: bytes
    content: bytes
    size: int
    root: bytes
    inclusion: list[bytes]


def proof(db: Transaction, index: int, leaves: int | None = None) -> Proof | None:
    held = size(db)
    leaves = held if leaves is None else leaves
    if not 0 <= index < leaves <= held:
        return None
    [(_, leaf_hash, content)] = entries(db, index, index + 1)
    return Proof(index, leaf_hash, content, leaves, root(db, leaves), inclusion(db, index, leaves))


def consistency(db: Transaction, first: int, second: int) -> list[bytes]:
    """RFC 9162 PROOF(first, D[second])."""
    return merkle.proof_hashes(merkle.consistency_ranges(first, second), lambda wanted: hashes(db, wanted))


def inclusion(db: Transaction, index: int, leaves: int) -> list[bytes]:
    """RFC 9162 PATH(index, D[leaves])."""
    return merkle.proof_hashes(merkle.inclusion_ranges(index, leaves), lambda wanted: hashes(db, wanted))


def entries(db: Transaction, start: int, end: int) -> list[tuple[int, bytes, bytes]]:
    """Entries `[start, end)`: position, leaf hash, leaf bytes."""
    rows = db.all(
        "SELECT leaf_index, leaf, hashes FROM trail_log "
        "WHERE leaf_index >= :start AND leaf_index < :end ORDER BY leaf_index",
        start=start,
        end=end,
    )
    return [(int(row["leaf_index"]), bytes(row["hashes"])[:HASH_SIZE], row["leaf"].encode()) for row in rows]
