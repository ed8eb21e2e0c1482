"""The trail's Merkle log in the queue's database: each trail event appended as a leaf in the
transaction that writes the event, the tree's stored subtree hashes, and the heads, proofs and
entries the trail routes serve.

`trail_log` holds each leaf's bytes by position; `trail_tree` the hash of every perfect subtree,
`(level, position)`, written as the subtree completes. Both are append-only. An append runs under
the store's one write lock (`BEGIN IMMEDIATE`, PostgreSQL's advisory lock), so the replicas of a
queue append to one log in one order; it reads the leaves' count and the few left neighbours the
new leaf completes, and writes the leaf and about two hashes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from reviewer.service.store.base import Transaction
from reviewer.trail import merkle
from reviewer.trail.entries import leaf
from reviewer.trail.merkle import Piece

EXPORT_BATCH: Final = 2000
"""Entries read per query while an export streams."""


def size(db: Transaction) -> int:
    row = db.one("SELECT max(leaf_index) AS last FROM trail_log")
    return 0 if row is None or row["last"] is None else int(row["last"]) + 1


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
        revision=int(trail_row["revision"]),
        plan_sha256=trail_row["plan_sha256"],
        reason=trail_row["reason"],
        statement=trail_row["statement"],
        signature=trail_row["signature"],
        key_fingerprint=trail_row["key_fingerprint"],
        report_sha256=report_sha256,
    )
    db.run(
        "INSERT INTO trail_log (leaf_index, seq, leaf) VALUES (:index, :seq, :leaf)",
        index=index,
        seq=int(trail_row["seq"]),
        leaf=content.decode(),
    )
    hashed = merkle.leaf_hash(content)
    level, position = 0, index
    _store(db, level, position, hashed)
    while position & 1:
        sibling = db.one(
            "SELECT hash FROM trail_tree WHERE level = :level AND position = :position",
            level=level,
            position=position - 1,
        )
        assert sibling is not None, "the log lost a subtree it completed"
        hashed = merkle.node_hash(bytes(sibling["hash"]), hashed)
        level, position = level + 1, position >> 1
        _store(db, level, position, hashed)
    return index


def _store(db: Transaction, level: int, position: int, hashed: bytes) -> None:
    db.run(
        "INSERT INTO trail_tree (level, position, hash) VALUES (:level, :position, :hash)",
        level=level,
        position=position,
        hash=hashed,
    )


def catch_up(db: Transaction) -> int:
    """Log the trail events written before the queue kept a log (a database from an older release),
    in their order; answers how many. Their reports' digests are not known any more: null."""
    rows = db.all(
        "SELECT * FROM trail WHERE seq > coalesce((SELECT max(seq) FROM trail_log), 0) ORDER BY seq"
    )
    for row in rows:
        append(db, row)
    return len(rows)


def hashes(db: Transaction, wanted: Iterable[Piece]) -> dict[Piece, bytes]:
    """The stored hashes of these subtrees, in one query."""
    wanted = sorted(set(wanted))
    if not wanted:
        return {}
    params: dict[str, int] = {}
    terms = []
    for number, (level, position) in enumerate(wanted):
        params[f"l{number}"], params[f"p{number}"] = level, position
        terms.append(f"(level = :l{number} AND position = :p{number})")
    rows = db.all("SELECT level, position, hash FROM trail_tree WHERE " + " OR ".join(terms), **params)
    return {(int(row["level"]), int(row["position"])): bytes(row["hash"]) for row in rows}


def frontier(db: Transaction, leaves: int) -> list[bytes]:
    """The hashes of the perfect subtrees the first `leaves` entries make, left to right."""
    if leaves == 0:
        return []
    pieces = merkle.pieces(0, leaves)
    found = hashes(db, pieces)
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


def consistency(db: Transaction, first: int, second: int) -> list[bytes]:
    """RFC 9162 PROOF(first, D[second])."""
    return merkle.proof_hashes(merkle.consistency_ranges(first, second), lambda wanted: hashes(db, wanted))


def inclusion(db: Transaction, index: int, leaves: int) -> list[bytes]:
    """RFC 9162 PATH(index, D[leaves])."""
    return merkle.proof_hashes(merkle.inclusion_ranges(index, leaves), lambda wanted: hashes(db, wanted))


def entries(db: Transaction, start: int, end: int) -> list[tuple[int, bytes, bytes]]:
    """Entries `[start, end)`: position, leaf hash, leaf bytes."""
    rows = db.all(
        "SELECT l.leaf_index, l.leaf, t.hash FROM trail_log l JOIN trail_tree t "
        "ON t.level = 0 AND t.position = l.leaf_index "
        "WHERE l.leaf_index >= :start AND l.leaf_index < :end ORDER BY l.leaf_index",
        start=start,
        end=end,
    )
    return [(int(row["leaf_index"]), bytes(row["hash"]), row["leaf"].encode()) for row in rows]
