"""The gate's process keeps its secrets from the other processes of its user.

- It is made non-dumpable (`prctl(PR_SET_DUMPABLE, 0)`): its `/proc/PID/environ`, `mem` and the
  rest belong to root then, and no process of the same user may trace it.
- Its initial environment holds no secret. `/proc/PID/environ` shows the environment a process was
  started with, whatever it does to `os.environ` later; so when the secrets are in it, `reviewer run`
  starts itself again (`execve`, the same process id) with an environment without them, and hands
  them to its new self through a pipe, read once and closed.
"""

from __future__ import annotations

import ctypes
import json
import os
import sys
from collections.abc import Iterable, Mapping
from typing import Final

from reviewer.run.errors import RunRefused

SEALED_FD_ENV: Final = "REVIEWER_RUN_SEALED_FD"
"""The pipe the secrets wait in, in the environment of the process started again."""
_PR_SET_DUMPABLE: Final = 4
_PIPE_CAPACITY: Final = 60_000
"""Under Linux's 64 KiB pipe buffer: written whole before the exec, without a reader."""


def make_undumpable() -> None:
    """No process of this user may read this one's memory or environment, or trace it."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise RunRefused(f"cannot make the gate non-dumpable: {os.strerror(ctypes.get_errno())}")


def unsealed_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment `reviewer run` was given: its own, plus the secrets its earlier self moved into
    the pipe (read and closed here, once)."""
    environment = dict(os.environ if environ is None else environ)
    if environ is None:
        os.environ.pop(SEALED_FD_ENV, None)
    descriptor = environment.pop(SEALED_FD_ENV, None)
    if descriptor is None:
        return environment
    try:
        with os.fdopen(int(descriptor), "rb") as pipe:
            secrets = json.loads(pipe.read())
    except (OSError, ValueError) as error:
        raise RunRefused(f"cannot read the secrets back from {SEALED_FD_ENV}: {error}") from None
    return {**environment, **secrets}


def start_again_without(names: Iterable[str], environment: Mapping[str, str]) -> None:
    """When this process's initial environment holds any of `names`, replace the process by the same
    command with an environment without them (their values wait in a pipe); else return."""
    present = sorted(name for name in set(names) if name in os.environ)
    if not present:
        return
    payload = json.dumps({name: environment[name] for name in present if name in environment}).encode()
    if len(payload) > _PIPE_CAPACITY:
        raise RunRefused(f"the secrets in the environment ({', '.join(present)}) are too long to hand on")
    read_end, write_end = os.pipe()
    try:
        os.write(write_end, payload)
    finally:
        os.close(write_end)
    os.set_inheritable(read_end, True)
    clean = {name: value for name, value in os.environ.items() if name not in present}
    clean[SEALED_FD_ENV] = str(read_end)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, sys.orig_argv, clean)
