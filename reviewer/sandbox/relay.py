"""The gate's loopback address inside COMMAND's network namespace: `python -I -S relay.py FD PORT...
-- COMMAND ARGS...` listens on 127.0.0.1:PORT for each PORT, hands the listening sockets out through
the Unix socket FD it inherited, and becomes COMMAND.

`reviewer run` serves the gate (and `--allow-net`'s proxy) on those very sockets, from outside: they
belong to COMMAND's network, where no other process of the machine can connect, and the gate has no
socket of its own, named, abstract or on a port, that any other process could find or fill. No byte
is copied on the way: COMMAND's connections are the gate's.

It is run as a file, by the interpreter `reviewer run` itself runs on, with the standard library only:
no site-packages, no `.pth`, nothing the child could have planted. The listeners are bound before
COMMAND starts, so its first request finds them, and the descriptor is closed before COMMAND starts,
so COMMAND holds none of it.
"""

from __future__ import annotations

import os
import socket
import sys

NOT_FOUND_HINT = "the sandbox shows the system's /usr, the working directory and --readable paths"


def main(arguments: list[str]) -> None:
    handover, *rest = arguments
    split = rest.index("--")
    ports, command = rest[:split], rest[split + 1 :]
    listeners = []
    for port in ports:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", int(port)))
        listener.listen(128)
        listeners.append(listener)
    with socket.socket(fileno=int(handover)) as out:
        socket.send_fds(out, [b"listening"], [listener.fileno() for listener in listeners])
    for listener in listeners:
        listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as error:
        said = error.strerror or str(error)
        hint = f" ({NOT_FOUND_HINT})" if isinstance(error, FileNotFoundError) else ""
        print(f"reviewer run: cannot start {command[0]!r}: {said}{hint}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
