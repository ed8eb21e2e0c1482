"""What libfaketime leaves behind, removed: the suite calls `remove_faketime_leftovers` as it starts
and after each test (`tests/conftest.py`)."""

from __future__ import annotations

import contextlib
import os

FAKETIME_LEFTOVERS = ("faketime_shm_", "sem.faketime_sem_")
"""What libfaketime 0.9.10 leaves in /dev/shm for every process it was preloaded in, however the
process ends (a shared memory object and a semaphore, named by the pid). Left there, they make a
later `faketime` whose pid is the same refuse to start (`sem_open: File exists`)."""


def remove_faketime_leftovers() -> None:
    """Those of processes that are gone: a live process's are its own."""
    with os.scandir("/dev/shm") if os.path.isdir("/dev/shm") else contextlib.nullcontext([]) as entries:
        for entry in entries:
            prefix = next((prefix for prefix in FAKETIME_LEFTOVERS if entry.name.startswith(prefix)), None)
            pid = entry.name.removeprefix(prefix or "")
            if prefix and pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
                with contextlib.suppress(OSError):  # another user's, or removed meanwhile
                    os.unlink(entry.path)
