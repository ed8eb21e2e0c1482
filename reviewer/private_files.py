"""Files only their owner may read (a token, a session, the trail's checkpoint, a gate's recordings):
written whole or not at all, and never for a moment with a mode wider than 0600; the folders that hold
them (0700), and the lock beside a file that processes on one host read and write in turn."""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def write_private(path: Path, data: bytes) -> None:
    """`data` in `path`, atomically: a new file beside it (0600, a name of its own, never a link
    followed), synced, then renamed over the old one; on any failure the old file stays as it was."""
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def private_folder(folder: Path, *, tighten: bool = False) -> Path:
    """`folder`, made with mode 0700 where it is missing (its parents as the umask says). `tighten` also
    takes a folder that is there down to 0700: only for a folder of the reviewer's own (the config
    folder), never one a user named, which may be shared on purpose."""
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    if tighten and stat.S_IMODE(folder.stat().st_mode) != 0o700:
        folder.chmod(0o700)
    return folder


@contextmanager
def locked(path: Path) -> Iterator[None]:
    """An exclusive `flock` of the lock file beside `path` (its suffix `.lock`, 0600) while the block
    runs, in a folder made private where it is missing: two processes on one host that read, check and
    write `path` take turns, so neither writes an older state over a newer one. `OSError` when the lock
    file cannot be made; the lock is let go with its descriptor, whatever ends the block."""
    private_folder(path.parent)
    descriptor = os.open(path.with_suffix(".lock"), os.O_RDWR | os.O_CREAT, 0o600)
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX)
        yield
    finally:
        os.close(descriptor)
