"""Files only their owner may read (a token, a session, the trail's checkpoint, a gate's recordings):
written whole or not at all, and never for a moment with a mode wider than 0600."""

from __future__ import annotations

import os
import tempfile
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
