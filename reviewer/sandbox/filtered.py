"""bubblewrap with a seccomp program of its own: `python -I -S filtered.py PROGRAM BWRAP ARGS...` puts
PROGRAM (base64) in a pipe and runs BWRAP with `--seccomp` naming the pipe, then ARGS.

bubblewrap reads its filter from a descriptor it inherits, which a process started by another's
spawner (the MCP SDK starts `mcp-gate`'s upstream) cannot be handed; so the filter travels on the
command line, where it is no secret (it says which system calls are refused), and becomes a descriptor
here, just before bubblewrap starts. Standard library only, run by the interpreter `reviewer` itself
runs on, without site-packages.
"""

from __future__ import annotations

import base64
import os
import sys


def main(arguments: list[str]) -> None:
    program, bwrap, *rest = arguments
    reading, writing = os.pipe()
    os.write(writing, base64.b64decode(program, validate=True))  # a few hundred bytes: the pipe holds them
    os.close(writing)
    os.set_inheritable(reading, True)
    try:
        os.execvp(bwrap, [bwrap, "--seccomp", str(reading), *rest])
    except OSError as error:
        print(f"reviewer: cannot start {bwrap!r}: {error.strerror or error}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
