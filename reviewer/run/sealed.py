"""The gate's process keeps its secrets from the other processes of its user.

- It is made non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): its `/proc/PID/environ`, `mem` and the
  rest belong to root then, and no process of the same user may trace it.
- Its initial environment holds no secret. `/proc/PID/environ` shows the memory the kernel put the
  process's environment in when it started, whatever it does to `os.environ` later (unsetting a
  variable only drops a pointer to it). So the secrets' entries are overwritten there with zeros, in
  place, and taken out of `os.environ`, so nothing this process starts inherits them; the values
  live on only in the mapping `reviewer run` hands to the gate.
"""

from __future__ import annotations

import ctypes
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Final

from reviewer.run.errors import RunRefused

_PR_SET_DUMPABLE: Final = 4
_ENV_START_FIELD: Final = 50
"""`/proc/self/stat`'s fields 50 and 51 (counted from 1): where the initial environment lies."""


def make_undumpable() -> None:
    """No process of this user may read this one's memory or environment, or trace it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise RunRefused(f"cannot make the gate non-dumpable: {os.strerror(ctypes.get_errno())}")


def _initial_environment_span() -> tuple[int, int]:
    stat = Path("/proc/self/stat").read_text()
    # Fields after the command name (in parentheses, which may hold spaces) start at field 3.
    fields = stat[stat.rindex(")") + 2 :].split()
    start = int(fields[_ENV_START_FIELD - 3])
    return start, int(fields[_ENV_START_FIELD - 2])


def scrub_initial_environment(names: Iterable[str]) -> None:
    """Overwrite each `NAME=value` entry of `names` in this process's initial environment with zeros,
    and take them out of `os.environ`: neither `/proc/PID/environ` nor a process started from here
    shows them again."""
    hidden = {name.encode("utf-8", "surrogateescape") for name in names}
    for name in hidden:
        os.environ.pop(name.decode("utf-8", "surrogateescape"), None)
    start, end = _initial_environment_span()
    offset = 0
    for entry in ctypes.string_at(start, end - start).split(b"\0"):
        if entry.partition(b"=")[0] in hidden:
            ctypes.memset(start + offset, 0, len(entry))
        offset += len(entry) + 1
