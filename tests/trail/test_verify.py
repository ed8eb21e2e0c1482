"""`verify_export` as a pure function of an export, a key and a checkpoint seen before: what holds
passes, and each way a log can lie is named."""

from __future__ import annotations

import base64
import json

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reviewer.trail import checkpoint, merkle
from reviewer.trail.entries import entry_line, header_line, leaf, proof_line
from reviewer.trail.verify import TrailInvalid, verify_export

KEY = Ed25519PrivateKey.generate()
PUBLIC = KEY.public_key()


def leaves(count: int, actor: str = "alice") -> list[bytes]:
    return [
        leaf(
            index=index,
            seq=index + 1,
            at=1_780_000_000.0 + index,
            actor=actor,
            event="approved",
            proposal_id=f"p-{index}",
            revision=1,
            plan_sha256="5be1" * 16,
            reason=None,
        )
        for index in range(count)
    ]


def signed_at(contents: list[bytes], size: int) -> str:
    tree = merkle.CompactTree()
    for content in contents[:size]:
        tree.append(content)
    return checkpoint.sign(KEY, size, tree.root()).text


def export(contents: list[bytes], since: int = 0) -> list[bytes]:
    tree = merkle.CompactTree()
    hashes = [tree.append(content) for content in contents]
    before = merkle.CompactTree()
    for hashed in hashes[:since]:
        before.append_hash(hashed)
    lines = [header_line(since, len(contents), signed_at(contents, len(contents)), before.frontier)]
    return lines + [entry_line(i, hashes[i], contents[i]) for i in range(since, len(contents))]


def test_an_export_and_every_earlier_checkpoint_of_its_log_verify() -> None:
    contents = leaves(13)
    for since in (0, 5, 8, 13):
        for seen in range(since, 14):
            verified = verify_export(export(contents, since), PUBLIC, signed_at(contents, seen))
            assert (verified.since, verified.entries, verified.checkpoint.size) == (since, 13 - since, 13)


def test_a_checkpoint_of_a_larger_log_shows_it_went_backwards() -> None:
    contents = leaves(13)
    with pytest.raises(
        TrailInvalid, match="went backwards: the checkpoint seen before holds 13 entries, the export's only 9"
    ):
        verify_export(export(contents[:9]), PUBLIC, signed_at(contents, 13))


def test_an_export_that_begins_after_the_checkpoint_says_how_to_export() -> None:
    contents = leaves(13)
    with pytest.raises(TrailInvalid, match="export with --since 4"):
        verify_export(export(contents, 6), PUBLIC, signed_at(contents, 4))


def test_a_log_rewritten_with_every_hash_recomputed_fails_against_the_checkpoint_seen_before() -> None:
    honest, rewritten = leaves(13), leaves(13, actor="mallory")
    for seen in (5, 8, 13):  # inside the export, at its start, at its end
        since = 8 if seen >= 8 else 0
        with pytest.raises(
            TrailInvalid,
            match=f"the first {seen} entries do not make the tree the checkpoint seen before signs",
        ):
            verify_export(export(rewritten, since), PUBLIC, signed_at(honest, seen))


def test_an_edited_entry_is_named() -> None:
    lines = export(leaves(6))
    lines[3] = lines[3].replace(b'"actor":"alice"', b'"actor":"mallory"')
    with pytest.raises(
        TrailInvalid, match=r"entry 2 \(approved: proposal p-2 revision 1 by mallory\): its content"
    ):
        verify_export(lines, PUBLIC)


def test_a_missing_or_moved_entry_is_named() -> None:
    lines = export(leaves(6))
    with pytest.raises(TrailInvalid, match="entry 2: the line says it is entry 3"):
        verify_export(lines[:3] + lines[4:], PUBLIC)
    with pytest.raises(TrailInvalid, match="holds entries up to 5, and its checkpoint 6"):
        verify_export(lines[:-1], PUBLIC)


def test_a_checkpoint_by_another_key_or_a_forged_header_is_refused() -> None:
    contents = leaves(6)
    lines = export(contents)
    other = Ed25519PrivateKey.generate().public_key()
    with pytest.raises(TrailInvalid, match="the export's checkpoint carries no signature by the key given"):
        verify_export(lines, other)
    header = json.loads(lines[0])
    header["frontier"] = [base64.b64encode(b"\0" * 32).decode()]
    with pytest.raises(TrailInvalid, match="frontier"):
        verify_export([json.dumps(header).encode(), *lines[1:]], PUBLIC)
    with pytest.raises(TrailInvalid, match="not a trail export's header"):
        verify_export([b"not json", *lines[1:]], PUBLIC)
    with pytest.raises(TrailInvalid, match="not a trail export's header"):
        verify_export([], PUBLIC)


def proof_document(contents: list[bytes], index: int, size: int) -> list[bytes]:
    tree = merkle.CompactTree()
    hashes = [tree.append(content) for content in contents[:size]]
    stored = {}
    for level in range(size.bit_length()):
        for position in range(size >> level):
            piece = merkle.CompactTree()
            for hashed in hashes[position << level : (position + 1) << level]:
                piece.append_hash(hashed)
            stored[(level, position)] = piece.root()
    proof = merkle.proof_hashes(merkle.inclusion_ranges(index, size), lambda wanted: stored)
    return [
        proof_line(size, signed_at(contents, size), proof),
        entry_line(index, hashes[index], contents[index]),
    ]


def test_one_entry_s_proof_verifies_against_the_checkpoint_it_names_and_a_changed_one_does_not() -> None:
    contents = leaves(11)
    verified = verify_export(proof_document(contents, 6, 9), PUBLIC, signed_at(contents, 9))
    assert (verified.proof, verified.since, verified.checkpoint.size) == (True, 6, 9)
    changed = proof_document(contents, 6, 9)
    changed[1] = changed[1].replace(b'"actor":"alice"', b'"actor":"mallory"')
    with pytest.raises(
        TrailInvalid, match=r"entry 6 \(approved: proposal p-6 revision 1 by mallory\): leaf 6 is not"
    ):
        verify_export(changed, PUBLIC)
    with pytest.raises(TrailInvalid, match="prove the entry with --size 11"):
        verify_export(proof_document(contents, 6, 9), PUBLIC, signed_at(contents, 11))


def test_a_line_nested_past_any_limit_is_refused_in_words_not_a_traceback() -> None:
    """200,000 brackets deep: the decoder's recursion limit is said as what it is, for an entry and
    for the header alike."""
    deep = b'{"index":2,"leaf":' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    lines = export(leaves(6))
    with pytest.raises(
        TrailInvalid, match=r"^entry 2: not an export line \(it nests deeper than any trail entry\)$"
    ):
        verify_export([*lines[:3], deep, *lines[4:]], PUBLIC)
    with pytest.raises(TrailInvalid, match="the first line is not a trail export's header .it nests deeper"):
        verify_export([deep, *lines[1:]], PUBLIC)
