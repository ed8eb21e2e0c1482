"""The newest trail log this queue signed a checkpoint of, remembered outside its database.

A database restored from an older copy (`pg_restore`, a snapshot, `reviewer db restore`) holds a
trail shorter than one the queue already signed, or another one: served as it is, it would reopen
what was decided since, and every executor that saw the newer checkpoint would refuse it. So a
queue that signs checkpoints (`serve --trail-key`) keeps the size and root of the largest log it
signed in a file of its own (`serve --signed-memory FILE`, by default one per trail key in the
user's state folder: a key signs one log, whatever database holds it), `serve` refuses to start on
a log that does not extend it, naming `reviewer db reopen`, which closes what the copy left open and
makes the copy's log the one remembered, and a running queue never signs a smaller log than one it
signed (a database swapped under it).

Replicas on one database may share the file (a volume of their own): every write is checked
under an exclusive lock and renamed into place, so a smaller size never replaces a larger one.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import threading
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

import platformdirs

from reviewer import json_text
from reviewer.private_files import locked, write_private
from reviewer.queue.config import APP_NAME
from reviewer.service.errors import DatabaseUnusable
from reviewer.service.store import QueueStore
from reviewer.trail.merkle import ProofError, verify_consistency

MEMORY_FORMAT: Final = "reviewer.queue-signed-log/v1"


def default_memory(public_key: str) -> Path:
    """`~/.local/state/reviewer/signed/<hash of the trail key's OpenSSH public key>.json`."""
    name = hashlib.sha256(" ".join(public_key.split()[:2]).encode()).hexdigest()[:32]
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)) / "signed" / f"{name}.json"


class SmallerLog(Exception):
    """The log is smaller than one this queue signed: its database was replaced under it."""

    def __init__(self, size: int, signed: int) -> None:
        super().__init__(
            f"the queue's trail holds {size} entries, fewer than the {signed} it signed before: its "
            "database was replaced by an older copy; its operator runs `reviewer db reopen`"
        )


@dataclass(frozen=True)
class Signed:
    size: int
    root: bytes


class SignedMemory:
    """The file that remembers the largest log signed for one database."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._largest = -1
        """The largest size written or read by this process: a smaller one needs no file access."""
        self._lock = threading.Lock()

    def read(self) -> Signed | None:
        try:
            data = json_text.loads(self.path.read_text())
            signed = Signed(int(data["size"]), base64.b64decode(data["root"], validate=True))
            if data.get("format") != MEMORY_FORMAT or signed.size < 0:
                raise ValueError("not a remembered log")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, binascii.Error) as error:
            raise DatabaseUnusable(
                f"cannot read the signed log remembered in {self.path} ({error}); restore or remove it"
            ) from None
        return signed

    def remember(self, size: int, root: bytes) -> None:
        """Called before each checkpoint is signed: kept when larger than the one remembered;
        `SmallerLog` when smaller (the checkpoint must not be signed)."""
        if size < self._largest:
            raise SmallerLog(size, self._largest)
        if size == self._largest:
            return
        with self._lock, self._locked():
            saved = self.read()
            if saved is not None and size < saved.size:
                self._largest = saved.size
                raise SmallerLog(size, saved.size)
            if saved is None or size > saved.size:
                self._write(Signed(size, root))
            self._largest = size

    def replace(self, signed: Signed) -> None:
        """`reviewer db reopen`: the copy's log is the one remembered from now on."""
        with self._lock, self._locked():
            self._write(signed)
            self._largest = signed.size

    def _write(self, signed: Signed) -> None:
        document = {
            "format": MEMORY_FORMAT,
            "size": signed.size,
            "root": base64.b64encode(signed.root).decode(),
        }
        try:
            write_private(self.path, json.dumps(document).encode())
        except OSError as error:
            raise DatabaseUnusable(
                f"cannot remember the signed log in {self.path}: {error.strerror}"
            ) from None

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with ExitStack() as held:
            try:
                held.enter_context(locked(self.path))
            except OSError as error:
                raise self._unwritable(error) from None
            yield

    def _unwritable(self, error: OSError) -> DatabaseUnusable:
        return DatabaseUnusable(f"cannot remember the signed log in {self.path}: {error.strerror}")


def check_extends(memory: SignedMemory, store: QueueStore) -> None:
    """Refuse (`DatabaseUnusable`) a store whose trail does not extend the log remembered."""
    saved = memory.read()
    if saved is None or saved.size == 0:
        return
    head = store.trail_head(saved.size)
    location, size = store.location, head.size
    reopen = f"run `reviewer db reopen --db {location}` to close what the copy left open, then start again"
    if size < saved.size:
        raise DatabaseUnusable(
            f"{location}'s trail holds {size} entries, fewer than the {saved.size} this queue signed "
            f"before (a copy restored from a backup?); {reopen}"
        )
    try:
        verify_consistency(saved.size, saved.root, size, head.root, head.consistency or [])
    except ProofError:
        raise DatabaseUnusable(
            f"{location}'s trail is not the one this queue signed before ({saved.size} entries remembered "
            f"in {memory.path}): another database, or a copy of another history; {reopen}"
        ) from None
