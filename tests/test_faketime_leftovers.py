"""The suite removes what libfaketime leaves in /dev/shm for a process that is gone, and only that
(`tests/conftest.py`): a stale semaphore made a `faketime` that drew the same pid refuse to start."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.faketime_leftovers import FAKETIME_LEFTOVERS, remove_faketime_leftovers


@pytest.mark.skipif(not Path("/dev/shm").is_dir(), reason="no /dev/shm")
def test_a_gone_processs_faketime_objects_are_removed_and_a_live_ones_kept() -> None:
    gone = subprocess.Popen(["true"])
    gone.wait()
    paths = {
        pid: [Path("/dev/shm") / f"{prefix}{pid}" for prefix in FAKETIME_LEFTOVERS]
        for pid in (gone.pid, os.getpid())
    }
    for path in paths[gone.pid] + paths[os.getpid()]:
        path.touch()
    try:
        remove_faketime_leftovers()
        assert [path.exists() for path in paths[gone.pid]] == [False, False]
        assert [path.exists() for path in paths[os.getpid()]] == [True, True], "a live process's"
    finally:
        for path in paths[os.getpid()]:
            path.unlink(missing_ok=True)
