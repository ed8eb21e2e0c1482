"""What bubblewrap is handed as descriptors, made just before it starts, for a sandbox started by
another's spawner (the MCP SDK starts `mcp-gate`'s upstream, and passes no descriptor along):

    python -I -S launcher.py [--seccomp PROGRAM] [--connect SOCKET] -- BWRAP ARGS...

- `--seccomp PROGRAM` (base64): the seccomp filter, put in a pipe that BWRAP reads (`--seccomp FD`).
  It travels on the command line, where it is no secret: it says which system calls are refused.
- `--connect SOCKET`: a connection to the gate's handover point (`reviewer.sandbox.handover`), made
  here, outside the sandbox and before the filter applies, for the relay inside to hand its
  listeners out through; `{handover}` in ARGS becomes its descriptor.

Standard library only, run by the interpreter `reviewer` itself runs on, without site-packages.
"""

from __future__ import annotations

import base64
import os
import socket
import sys

HANDOVER_WORD = "{handover}"


def main(arguments: list[str]) -> None:
    split = arguments.index("--")
    options, (bwrap, *rest) = arguments[:split], arguments[split + 1 :]
    words = [bwrap]
    for option, value in zip(options[::2], options[1::2], strict=True):
        if option == "--seccomp":
            reading, writing = os.pipe()
            os.write(
                writing, base64.b64decode(value, validate=True)
            )  # a few hundred bytes: the pipe holds them
            os.close(writing)
            os.set_inheritable(reading, True)
            words += ["--seccomp", str(reading)]
        elif option == "--connect":
            handover = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            handover.connect(value)
            handover.set_inheritable(True)
            rest = [str(handover.detach()) if word == HANDOVER_WORD else word for word in rest]
    try:
        os.execvp(bwrap, [*words, *rest])
    except OSError as error:
        print(f"reviewer: cannot start {bwrap!r}: {error.strerror or error}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
