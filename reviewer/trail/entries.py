"""What one trail event is as a leaf of the log: its JSON (RFC 8785, so the same event makes the same
bytes on every replica and in every release), and one line of an export.

A leaf names its position, the event, who did it (the name, and how they signed in: `token:NAME`,
`break-glass:NAME`, `oidc:ISSUER#SUBJECT`), the proposal, revision and digest it concerns,
the reason given, a signed decision's statement and signature, and a report's SHA-256. Every string
in it came from a token's owner or an agent and is hostile: a verifier shows one only through
`reviewer.plan.sanitize`.
"""

from __future__ import annotations

import base64
from datetime import UTC, datetime
from typing import Any, Final

import msgspec

from reviewer.plan.sanitize import clip, safe_text

LEAF_FORMAT: Final = "reviewer.trail/v1"
_canonical: Final = msgspec.json.Encoder(order="sorted")
"""RFC 8785 for what a leaf holds (strings, integers, null, objects): keys sorted, no whitespace,
strings escaped as the RFC says; a property test holds it to the `rfc8785` package. msgspec does it
in a few microseconds, where the package takes forty: it runs in every write transaction."""
EXPORT_FORMAT: Final = "reviewer.trail-export/v1"
PROOF_FORMAT: Final = "reviewer.trail-proof/v1"


def leaf(
    *,
    index: int,
    seq: int,
    at: float,
    actor: str,
    event: str,
    proposal_id: str | None,
    revision: int | None,
    plan_sha256: str | None,
    reason: str | None,
    statement: str | None = None,
    signature: str | None = None,
    key_fingerprint: str | None = None,
    report_sha256: str | None = None,
    identity: str | None = None,
) -> bytes:
    """The bytes leaf `index` of the log holds for the trail event `seq`; the end of a reviewer's
    sign-in (`sign_in_ended`) concerns no proposal: its proposal, revision and digest are null."""
    signed = (
        None
        if signature is None
        else {"statement": statement, "signature": signature, "key_fingerprint": key_fingerprint}
    )
    return _canonical.encode(
        {
            "format": LEAF_FORMAT,
            "index": index,
            "seq": seq,
            "at": datetime.fromtimestamp(at, UTC).isoformat(),
            "event": event,
            "actor": actor,
            "identity": identity,
            "proposal_id": proposal_id,
            "revision": revision,
            "plan_sha256": plan_sha256,
            "reason": reason,
            "signed": signed,
            "report_sha256": report_sha256,
        }
    )


class Header(msgspec.Struct, forbid_unknown_fields=False):
    """An export's first line: the checkpoint it ends at, and where it begins (`since`), with the
    hashes of the perfect subtrees of the entries before it, which a verifier starts its tree from."""

    format: str
    since: int
    size: int
    checkpoint: str
    frontier: list[str]


class Kind(msgspec.Struct, forbid_unknown_fields=False):
    """What a first line says it begins: an export or an entry's proof."""

    format: str


class ProofHeader(msgspec.Struct, forbid_unknown_fields=False):
    """A proof's first line: the checkpoint, and the RFC 9162 inclusion proof of the one entry on the
    next line in the tree that checkpoint signs."""

    format: str
    size: int
    checkpoint: str
    inclusion: list[str]


class Line(msgspec.Struct, forbid_unknown_fields=False):
    """One entry: its position, the leaf hash the log holds for it, and its leaf, byte for byte."""

    index: int
    leaf_hash: str
    leaf: msgspec.Raw


class Described(msgspec.Struct, forbid_unknown_fields=False):
    """The parts of a leaf an error message names."""

    event: Any = None
    proposal_id: Any = None
    revision: Any = None
    actor: Any = None
    index: Any = None


def header_line(since: int, size: int, checkpoint: str, frontier: list[bytes]) -> bytes:
    return (
        msgspec.json.encode(
            {
                "format": EXPORT_FORMAT,
                "since": since,
                "size": size,
                "checkpoint": checkpoint,
                "frontier": [base64.b64encode(hashed).decode() for hashed in frontier],
            }
        )
        + b"\n"
    )


def proof_line(size: int, checkpoint: str, inclusion: list[bytes]) -> bytes:
    return (
        msgspec.json.encode(
            {
                "format": PROOF_FORMAT,
                "size": size,
                "checkpoint": checkpoint,
                "inclusion": [base64.b64encode(hashed).decode() for hashed in inclusion],
            }
        )
        + b"\n"
    )


def entry_line(index: int, leaf_hash: bytes, leaf_bytes: bytes) -> bytes:
    """The leaf goes in as its own bytes (never decoded and encoded again), so its hash is checkable."""
    return (
        b'{"index":%d,"leaf_hash":"%s","leaf":' % (index, base64.b64encode(leaf_hash)) + leaf_bytes + b"}\n"
    )


_described: Final = msgspec.json.Decoder(Described)


def describe(leaf_bytes: bytes) -> str:
    """`approved: proposal P revision 2 by alice`, safe to print, for an error that names an entry."""
    try:
        parts = _described.decode(leaf_bytes)
    except msgspec.DecodeError:
        return "a leaf that is not a JSON object"
    words = [_shown(parts.event, 40) + ":"]
    if parts.proposal_id is not None:
        words += ["proposal", _shown(parts.proposal_id, 80)]
    if parts.revision is not None:
        words += ["revision", _shown(parts.revision, 20)]
    if parts.actor is not None:
        words += ["by", _shown(parts.actor, 80)]
    return " ".join(words)


def _shown(value: object, limit: int) -> str:
    """Clipped before it is sanitized: a 10 MB name costs nothing to name."""
    return safe_text(clip(str(value), limit))
