"""Loopback ports for the servers tests start, unique across the whole run.

Asking the kernel for port 0 and closing the probe is a race: another process (a second pytest
worker, or any outgoing connection) can be given the same port before the server binds it. Ports
here come from below the kernel's ephemeral range, where it never hands ports out by itself, from a
slice of that range each pytest-xdist worker has to itself, and never twice in one process. Each
process walks its slice from a random place, so two runs on one machine (two CI jobs, or a suite
beside a suite) do not try the same ports in the same order.
"""

from __future__ import annotations

import itertools
import os
import random
import socket

FIRST_PORT = 10_000
LAST_PORT = 32_767
"""Below Linux's default ephemeral range (32768-60999), so no bind(0) or connect takes these."""


def _worker_index() -> int:
    """0 without pytest-xdist, 1 + N for its worker gwN."""
    worker = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(worker.removeprefix("gw")) + 1 if worker.startswith("gw") else 0


SLICE = (LAST_PORT + 1 - FIRST_PORT) // (int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "0")) + 1)
"""Ports a process may hand out: the range shared evenly by this process and its sibling workers."""
_slice = range(FIRST_PORT + _worker_index() * SLICE, FIRST_PORT + (_worker_index() + 1) * SLICE)
_start = random.randrange(SLICE)
_candidates = itertools.cycle([*_slice[_start:], *_slice[:_start]])


def free_port() -> int:
    """A loopback port nobody listens on now that no other test process of this run is given."""
    for _ in range(SLICE):
        port = next(_candidates)
        with socket.socket() as probe:
            try:
                probe.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError(f"no free loopback port in this worker's slice of {SLICE}")
