"""The gate's loopback address inside COMMAND's network namespace: `python -I -S relay.py SOCKET PORT
COMMAND ARGS...` listens on 127.0.0.1:PORT, forwards each connection to the gate's Unix socket SOCKET,
and runs COMMAND.

The gate itself listens on no TCP port: outside the namespace there is nothing to find in
/proc/net/tcp, connect to or fill, and the socket sits in a folder only the operator may open. Inside,
127.0.0.1:PORT is the child's own loopback: no other process of the machine reaches it, so the URL the
child is given carries no secret.

It is run as a file, by the interpreter `reviewer run` itself runs on, with the standard library only:
no site-packages, no `.pth`, nothing the child could have planted. The listener is bound before
COMMAND starts, so its first request finds it; the relay lives in a process of its own in the
sandbox's PID namespace and ends with it.
"""

from __future__ import annotations

import contextlib
import os
import socket
import sys
import threading

BUFFER = 64 * 1024


def _pump(source: socket.socket, target: socket.socket) -> None:
    """Copy `source` to `target` until `source` ends, then end `target`'s writing half. When `target`
    stops taking data (the gate answered early, a 413 for a body over its limit, and closed), the rest
    of `source` is read and dropped: closing a socket with unread data resets the connection, and the
    child would lose the answer it is owed."""
    taking = True
    try:
        while chunk := source.recv(BUFFER):
            if taking:
                try:
                    target.sendall(chunk)
                except OSError:
                    taking = False
    except OSError:
        pass
    finally:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_WR)


def _serve(connection: socket.socket, gate_socket: str) -> None:
    with connection, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as gate:
        try:
            gate.connect(gate_socket)
        except OSError:
            return
        back = threading.Thread(target=_pump, args=(gate, connection), daemon=True)
        back.start()
        _pump(connection, gate)
        back.join()


def relay(listener: socket.socket, gate_socket: str) -> None:
    while True:
        connection, _ = listener.accept()
        threading.Thread(target=_serve, args=(connection, gate_socket), daemon=True).start()


def main(arguments: list[str]) -> None:
    gate_socket, port, *command = arguments
    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind(("127.0.0.1", int(port)))
    listener.listen(128)
    if os.fork() == 0:
        os.setsid()
        quiet = os.open(os.devnull, os.O_RDWR)
        for stream in (0, 1, 2):  # whoever reads COMMAND's output sees its end when COMMAND ends
            os.dup2(quiet, stream)
        try:
            relay(listener, gate_socket)
        finally:
            os._exit(0)
    listener.close()
    try:
        os.execvp(command[0], command)
    except OSError as error:
        print(f"reviewer run: cannot start {command[0]!r}: {error.strerror or error}", file=sys.stderr)
        os._exit(127)


if __name__ == "__main__":
    main(sys.argv[1:])
