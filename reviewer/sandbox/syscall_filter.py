"""The system calls COMMAND is refused in its sandbox: a seccomp filter, compiled by libseccomp.

COMMAND reaches the gate and the proxy over TCP on its own loopback; it needs no Unix socket of the
host, so it is given no way to open one, whatever the file system holds or will hold later (a tmux
server started after the run, a service's socket made in the working directory):

- `socket(AF_UNIX, ...)` fails with EACCES. The domain is compared on its low 32 bits, as the kernel
  reads it, so a value with bits set above them is refused too. `socketpair` stays allowed: it joins
  a program's own processes and nothing else.
- `io_uring_setup` fails with ENOSYS: io_uring opens sockets without the `socket` call.
- A system call of another architecture than the machine's (i386's `socketcall`, x32) kills the
  process, libseccomp's default for a filter that names one architecture.

The filter is compiled by libseccomp (through `pyseccomp`, its bindings over ctypes) and handed to
bubblewrap, which loads it after setting up the sandbox and before running anything in it.
"""

from __future__ import annotations

import errno
import os
import socket
from typing import Final

LOW_32_BITS: Final = 0xFFFFFFFF


class FilterUnavailable(Exception):
    """No seccomp filter can be compiled here: the reason, in words."""


def no_unix_sockets() -> bytes:
    """The BPF program that refuses COMMAND a Unix socket (and io_uring), as bubblewrap's `--seccomp`
    reads it. Raises `FilterUnavailable` where libseccomp or its bindings are missing."""
    try:
        import pyseccomp
    except (ImportError, OSError, RuntimeError) as error:  # pyseccomp loads libseccomp as it is imported
        raise FilterUnavailable(f"libseccomp cannot be loaded ({error})") from None
    rules = pyseccomp.SyscallFilter(pyseccomp.ALLOW)
    try:
        rules.add_rule(
            pyseccomp.ERRNO(errno.EACCES),
            "socket",
            pyseccomp.Arg(0, pyseccomp.MASKED_EQ, LOW_32_BITS, socket.AF_UNIX),
        )
        rules.add_rule(pyseccomp.ERRNO(errno.ENOSYS), "io_uring_setup")
        reading, writing = os.pipe()
        try:
            with open(writing, "wb", closefd=True) as sink:
                rules.export_bpf(sink)
            with open(reading, "rb", closefd=False) as source:
                program = source.read()
        finally:
            os.close(reading)
    except OSError as error:
        raise FilterUnavailable(f"libseccomp could not compile the filter ({error})") from None
    if not program or len(program) % 8:
        raise FilterUnavailable("libseccomp compiled no filter")
    return program
