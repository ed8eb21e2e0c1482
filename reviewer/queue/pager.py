"""Text for a person: through `$PAGER` on a terminal, plain into a pipe, and quiet when the reader
stops (`| head`, `q` in the pager).

As git does: the pager is `$PAGER` (else `less`, else `more`), `less` gets `LESS=FRX` unless the
user set `LESS` (quit when it fits one screen, keep the text on the screen after quitting), and
`PAGER=cat` or an empty `PAGER` prints plainly.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterable


def pager_command() -> list[str] | None:
    """The pager to run, or None to print plainly."""
    configured = os.environ.get("PAGER")
    if configured is not None:
        words = shlex.split(configured) if configured.strip() else []
        if not words or words[0] == "cat":
            return None
        return words if shutil.which(words[0]) else None
    for name in ("less", "more"):
        if shutil.which(name):
            return [name]
    return None


def page_lines(lines: Iterable[str], *, paged: bool | None = None) -> None:
    """Write `lines` to standard output, through the pager when it is a terminal (`paged` decides
    otherwise). A reader that stops early (`BrokenPipeError`) ends it quietly: see `quiet_stdout`."""
    if paged is None:
        paged = sys.stdout.isatty()
    command = pager_command() if paged else None
    if command is None:
        for line in lines:
            sys.stdout.write(line + "\n")
        sys.stdout.flush()
        return
    environment = dict(os.environ)
    environment.setdefault("LESS", "FRX")
    with subprocess.Popen(command, stdin=subprocess.PIPE, env=environment, text=True) as pager:
        assert pager.stdin is not None
        # A reader who quits the pager before the end closes its input: nothing is wrong.
        with contextlib.suppress(BrokenPipeError):
            for line in lines:
                pager.stdin.write(line + "\n")
        with contextlib.suppress(BrokenPipeError):
            pager.stdin.close()
        pager.wait()


def quiet_stdout() -> None:
    """After a `BrokenPipeError` on standard output: point it at /dev/null, so the interpreter's own
    flush at exit does not print a second traceback."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)
