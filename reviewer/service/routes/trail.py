"""`GET /v1/trail/checkpoint`, `GET /v1/trail/export` and `GET /v1/trail/entries/{index}/proof`: the
trail's Merkle log as anyone holding its public key can check it.

The checkpoint is signed on each request with the key `serve --trail-key` loaded (Ed25519 signs in
microseconds, and the same size and root always sign to the same note), so every replica answers
the same checkpoint for the same log. Any token may read it: executors remember it. The export
(reviewers and auditors) streams the entries after `since` as JSON lines behind a header holding
the checkpoint they end at; it reads in batches, each its own snapshot, which is safe because
entries are never changed: the export ends at the size its checkpoint was taken at. An entry's
proof (reviewers and auditors) is the entry and its inclusion proof in a tree of a size asked for.
"""

from __future__ import annotations

import base64
import logging
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

from fastapi import APIRouter, Path, Query, Request, Response
from fastapi.responses import StreamingResponse

from reviewer.queue.messages import TrailCheckpoint
from reviewer.service.auth import Role
from reviewer.service.deps import Caller, Store, require_role
from reviewer.service.errors import DatabaseUnusable, Forbidden, NotFound, Unavailable
from reviewer.service.responses import errors, json_response
from reviewer.service.signed_memory import SignedMemory, SmallerLog
from reviewer.service.store import QueueStore
from reviewer.service.store.trail import EXPORT_BATCH
from reviewer.trail import checkpoint as checkpoints
from reviewer.trail.entries import entry_line, header_line, proof_line

if TYPE_CHECKING:  # a queue signs checkpoints with --trail-key only: cryptography loads with the key
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

router = APIRouter(prefix="/v1/trail", tags=["trail"])

EXPORTERS: tuple[Role, ...] = ("reviewer", "auditor")
NDJSON = "application/x-ndjson"


def _key(request: Request) -> Ed25519PrivateKey:
    key: Ed25519PrivateKey | None = getattr(request.app.state, "trail_key", None)
    if key is None:
        raise NotFound(
            "this queue signs no checkpoints: its operator starts `reviewer serve --trail-key KEY`"
        )
    return key


def _remember(request: Request, size: int, root: bytes) -> None:
    """Keep the largest log signed outside the database (`signed_memory`): a copy restored from an
    older backup is then refused at start, and a smaller log is never signed (503). A memory that
    cannot be written is logged, and the checkpoint still served: executors remember it too."""
    memory: SignedMemory | None = getattr(request.app.state, "signed_memory", None)
    if memory is None:
        return
    try:
        memory.remember(size, root)
    except SmallerLog as smaller:
        logging.getLogger("reviewer.service").error("%s", smaller)
        raise Unavailable(str(smaller)) from None
    except DatabaseUnusable as error:
        logging.getLogger("reviewer.service").warning("%s", error.message)


@router.get("/checkpoint", responses=errors(404))
def checkpoint(
    request: Request,
    identity: Caller,
    store: Store,
    since: Annotated[int | None, Query(ge=0, le=2**53)] = None,
) -> Response:
    """A plain `def`: a proof reads a few dozen stored hashes, off the event loop."""
    if identity.role == "metrics":  # a metrics token reads /metrics and nothing else
        raise Forbidden(f"a metrics token ({identity.name}) reads /metrics only, not the trail")
    key = _key(request)
    head = store.trail_head(since)
    _remember(request, head.size, head.root)
    signed = checkpoints.sign(key, head.size, head.root)
    proof = None if head.consistency is None else [base64.b64encode(h).decode() for h in head.consistency]
    return json_response(
        TrailCheckpoint(
            checkpoint=signed.text,
            public_key=checkpoints.openssh_public(key.public_key()),
            size=head.size,
            since=since,
            consistency=proof,
        )
    )


@router.get("/export", responses=errors(403, 404))
def export(
    request: Request,
    identity: Caller,
    store: Store,
    since: Annotated[int, Query(ge=0, le=2**53)] = 0,
) -> Response:
    """The header line, then one line per entry from `since` to the checkpoint's size."""
    require_role(identity, EXPORTERS, "read the trail's entries")
    key = _key(request)
    head = store.trail_head()
    if since > head.size:
        raise NotFound(f"the trail holds {head.size} entries; --since {since} is after its end")
    signed = checkpoints.sign(key, head.size, head.root)
    first = header_line(since, head.size, signed.text, store.trail_frontier(since))
    return StreamingResponse(_lines(store, first, since, head.size), media_type=NDJSON)


@router.get("/entries/{index}/proof", responses=errors(403, 404))
def proof(
    request: Request,
    identity: Caller,
    store: Store,
    index: Annotated[int, Path(ge=0, le=2**53)],
    size: Annotated[int | None, Query(ge=1, le=2**53)] = None,
) -> Response:
    """Entry `index` and its RFC 9162 inclusion proof in the tree of `size` entries, signed: what
    proves one decision to someone who holds the key and, ideally, a checkpoint of that size."""
    require_role(identity, EXPORTERS, "read the trail's entries")
    key = _key(request)
    found = store.trail_proof(index, size)
    if found is None:
        raise NotFound(
            f"the trail has no entry {index}" + ("" if size is None else f" in a log of {size} entries")
        )
    signed = checkpoints.sign(key, found.size, found.root)
    return Response(
        proof_line(found.size, signed.text, found.inclusion)
        + entry_line(index, found.leaf_hash, found.content),
        media_type=NDJSON,
    )


def _lines(store: QueueStore, first: bytes, start: int, end: int) -> Iterator[bytes]:
    """Run by Starlette in its thread pool, batch by batch."""
    yield first
    for batch_start in range(start, end, EXPORT_BATCH):
        batch = store.trail_entries(batch_start, min(end, batch_start + EXPORT_BATCH))
        yield b"".join(entry_line(index, hashed, content) for index, hashed, content in batch)
