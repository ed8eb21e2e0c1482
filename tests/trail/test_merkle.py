"""The Merkle log's hashing and proofs against RFC 6962's published vectors, and against the RFC's
recursive definitions for every tree up to 40 leaves (what a stored-subtree shortcut must equal)."""

from __future__ import annotations

import hashlib

import pytest

from reviewer.trail import merkle

VECTOR_LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
VECTOR_ROOTS = [
    "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855",
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
    "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
    "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
    "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
    "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
    "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
]
VECTOR_INCLUSION = {
    (0, 8): [
        "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (5, 8): [
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
}
VECTOR_CONSISTENCY = {
    (2, 8): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4",
    ],
    (6, 8): [
        "0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a",
        "ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
    ],
    (2, 5): [
        "5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e",
        "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    ],
}


def mth(leaves: list[bytes]) -> bytes:
    """RFC 9162 2.1.1, as written."""
    if not leaves:
        return hashlib.sha256(b"").digest()
    if len(leaves) == 1:
        return merkle.leaf_hash(leaves[0])
    k = 1 << ((len(leaves) - 1).bit_length() - 1)
    return merkle.node_hash(mth(leaves[:k]), mth(leaves[k:]))


def stored_subtrees(leaves: list[bytes]) -> dict[merkle.Piece, bytes]:
    """Every perfect subtree's hash, as the queue's `trail_tree` holds them."""
    found = {}
    for level in range(len(leaves).bit_length()):
        width = 1 << level
        for position in range(len(leaves) // width):
            found[(level, position)] = mth(leaves[position * width : (position + 1) * width])
    return found


def fetcher(stored):
    return lambda wanted: {piece: stored[piece] for piece in wanted if piece in stored}


def test_the_roots_are_rfc_6962s_for_the_published_leaves() -> None:
    tree = merkle.CompactTree()
    assert tree.root().hex() == VECTOR_ROOTS[0]
    for size, data in enumerate(VECTOR_LEAVES, start=1):
        tree.append(data)
        assert tree.root().hex() == VECTOR_ROOTS[size]


def test_the_proofs_are_rfc_6962s_for_the_published_leaves() -> None:
    stored = stored_subtrees(VECTOR_LEAVES)
    for (index, size), expected in VECTOR_INCLUSION.items():
        proof = merkle.proof_hashes(merkle.inclusion_ranges(index, size), fetcher(stored))
        assert [h.hex() for h in proof] == expected
    for (first, second), expected in VECTOR_CONSISTENCY.items():
        proof = merkle.proof_hashes(merkle.consistency_ranges(first, second), fetcher(stored))
        assert [h.hex() for h in proof] == expected


def test_every_proof_up_to_40_leaves_verifies_and_a_changed_one_does_not() -> None:
    leaves = [bytes([n, n * 7 % 256]) for n in range(40)]
    stored = stored_subtrees(leaves)
    for size in range(1, len(leaves) + 1):
        root = mth(leaves[:size])
        assert merkle.range_hash(0, size, stored) == root
        for index in range(size):
            proof = merkle.proof_hashes(merkle.inclusion_ranges(index, size), fetcher(stored))
            merkle.verify_inclusion(merkle.leaf_hash(leaves[index]), index, size, proof, root)
            with pytest.raises(merkle.ProofError):
                merkle.verify_inclusion(merkle.leaf_hash(b"forged"), index, size, proof, root)
        for first in range(1, size + 1):
            proof = merkle.proof_hashes(merkle.consistency_ranges(first, size), fetcher(stored))
            first_root = mth(leaves[:first])
            merkle.verify_consistency(first, first_root, size, root, proof)
            forked = mth([*leaves[: first - 1], b"forked"])
            with pytest.raises(merkle.ProofError):
                merkle.verify_consistency(first, forked, size, root, proof)
            if proof:
                with pytest.raises(merkle.ProofError):
                    merkle.verify_consistency(first, first_root, size, root, proof[:-1])


def test_a_smaller_tree_never_extends_a_larger_one() -> None:
    with pytest.raises(merkle.ProofError, match="cannot extend"):
        merkle.verify_consistency(5, b"\0" * 32, 4, b"\0" * 32, [])
