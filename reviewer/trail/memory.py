"""What an executor remembers of a queue's trail: the newest checkpoint it saw, one file per queue in
the user's state directory, and the check that the queue's log only grew since.

`check_trail` is the one call every executor (the agent library's `Gate`, `reviewer run`,
`mcp-gate`) makes before it claims an approval: it asks the queue for its checkpoint and the RFC
9162 consistency proof from the size remembered, and refuses a queue whose log is smaller than
before (a database restored from an older copy), whose proof fails (a log rewritten or forked), whose
key changed, or which signed checkpoints before and signs none now. A queue that never signed one is
left alone: there is nothing to compare.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import contextlib
import hashlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import platformdirs

from reviewer import json_text
from reviewer.private_files import locked, write_private
from reviewer.queue.client import QueueClient
from reviewer.queue.config import APP_NAME
from reviewer.queue.refusals import NotFound, QueueError
from reviewer.trail import checkpoint as checkpoints
from reviewer.trail.checkpoint import CheckpointError
from reviewer.trail.merkle import ProofError, verify_consistency

MEMORY_FORMAT: Final = "reviewer.trail-memory/v1"


class TrailRefused(QueueError):
    """The queue's trail is not an extension of the one this executor saw before: nothing is run."""


@dataclass(frozen=True)
class Remembered:
    checkpoint: str
    public_key: str


def memory_dir() -> Path:
    """`~/.local/state/reviewer/trail` (XDG_STATE_HOME is honoured)."""
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)) / "trail"


def memory_file(queue_url: str, directory: Path | None = None) -> Path:
    """One file per queue, named by its URL's SHA-256 (a URL is no file name)."""
    name = hashlib.sha256(queue_url.rstrip("/").encode()).hexdigest()[:32]
    return (directory or memory_dir()) / f"{name}.json"


def _read(path: Path) -> Remembered | None:
    try:
        data = json_text.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        raise TrailRefused(
            f"cannot read the trail checkpoint remembered in {path} ({error}); restore or remove it"
        ) from None
    if not isinstance(data, dict) or data.get("format") != MEMORY_FORMAT:
        raise TrailRefused(f"{path} is not a remembered trail checkpoint; restore or remove it")
    return Remembered(str(data.get("checkpoint", "")), str(data.get("public_key", "")))


def _write(path: Path, queue_url: str, remembered: Remembered) -> None:
    """Atomically (a new file renamed over the old), 0600."""
    text = json.dumps(
        {
            "format": MEMORY_FORMAT,
            "queue": queue_url,
            "checkpoint": remembered.checkpoint,
            "public_key": remembered.public_key,
        }
    )
    try:
        write_private(path, text.encode())
    except OSError as error:
        raise TrailRefused(
            f"cannot keep the trail's checkpoint in {path} ({error.strerror}); nothing was run"
        ) from None


@contextlib.asynccontextmanager
async def _locked(path: Path) -> AsyncIterator[None]:
    """The memory's lock held while it is read, checked and written: two executors on one host checking
    at once never write an older checkpoint over a newer one. Taken off the loop: others wait."""
    with contextlib.ExitStack() as held:
        try:
            await asyncio.to_thread(held.enter_context, locked(path))
        except OSError as error:
            raise TrailRefused(
                f"cannot keep the trail's checkpoint beside {path} ({error.strerror}); nothing was run"
            ) from None
        yield


async def check_trail(client: QueueClient, directory: Path | None = None) -> checkpoints.Checkpoint | None:
    """Refuse (`TrailRefused`) a queue whose trail went backwards or forked since this executor last
    saw it, and remember its newest checkpoint; the checkpoint, or None when the queue signs none."""
    path = memory_file(client.base_url, directory)
    async with _locked(path):
        return await _check(client, path)


async def _check(client: QueueClient, path: Path) -> checkpoints.Checkpoint | None:
    saved = _read(path)
    seen = None
    if saved is not None:
        try:
            seen = checkpoints.parse(saved.checkpoint, str(path))
        except CheckpointError as error:
            raise TrailRefused(f"{error}; restore or remove it") from None
    try:
        answer = await client.trail_checkpoint(None if seen is None else seen.size)
    except NotFound:
        if seen is None:
            return None
        raise TrailRefused(
            f"the queue at {client.base_url} signed its trail before ({seen.describe()}) and signs none "
            "now: it may be another database or a restored copy; nothing was run"
        ) from None
    where = f"the queue at {client.base_url}"
    if saved is not None and saved.public_key.split()[:2] != answer.public_key.split()[:2]:
        raise TrailRefused(
            f"{where} signs its trail with another key than before; nothing was run (if its operator "
            f"replaced the key on purpose, remove {path})"
        )
    try:
        key = checkpoints.parse_public_key(answer.public_key, f"{where}'s trail key")
        current = checkpoints.verify(answer.checkpoint, key, f"{where}'s checkpoint")
    except CheckpointError as error:
        raise TrailRefused(f"{error}; nothing was run") from None
    if seen is not None:
        _require_extension(where, seen, current, answer.consistency or [])
    if seen is None or current.size > seen.size:
        _write(path, client.base_url, Remembered(current.text, answer.public_key))
    return current


def _require_extension(
    where: str, seen: checkpoints.Checkpoint, current: checkpoints.Checkpoint, proof_text: list[str]
) -> None:
    if current.origin != seen.origin:
        raise TrailRefused(
            f"{where} now answers for the log {current.origin}, not {seen.origin}; nothing was run"
        )
    if current.size < seen.size:
        raise TrailRefused(
            f"{where}'s trail went backwards: {current.size} entries now, and {seen.size} in the newest "
            "checkpoint this executor saw (a database restored from an older copy?); nothing was run"
        )
    try:
        proof = [base64.b64decode(text, validate=True) for text in proof_text]
        verify_consistency(seen.size, seen.root, current.size, current.root, proof)
    except (ProofError, binascii.Error) as error:
        raise TrailRefused(
            f"{where}'s trail forked: its log of {current.size} entries does not extend the "
            f"{seen.describe()} this executor saw ({error}); nothing was run"
        ) from None
