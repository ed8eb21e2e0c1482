"""How the listeners the relay makes inside a sandbox's own network reach the process that serves
them outside (`reviewer.sandbox.relay`): over a socket the relay inherits, as SCM_RIGHTS.

`reviewer run` starts COMMAND itself and hands the relay one end of a socket pair: no socket exists
that any other process could connect to. `mcp-gate`'s upstream is started by the MCP SDK, which hands
down no descriptor, so the gate opens a handover point instead: a Unix socket in a folder of its own
(0700), to which the sandbox's launcher connects before bubblewrap starts and before any filter
applies. The gate takes one connection, from a process it started (its peer's credentials name a
descendant of the gate), and removes the point at once: a process of the same user that connects
first is refused and the point stays open for the real one, until its time is up.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import socket
import struct
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import AbstractAsyncContextManager, AsyncExitStack, asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Final

HANDOVER_TIMEOUT_SECONDS: Final = 30.0
MAX_LISTENERS: Final = 8
SOCKET_PATH_LIMIT: Final = 107


@dataclass(frozen=True)
class InnerService:
    """A service the sandboxed program reaches on its own loopback: the port there, and how it is
    served, from outside, on the listener the relay hands out (the gate, `--allow-net`'s proxy)."""

    port: int
    served_on: Callable[[socket.socket], AbstractAsyncContextManager[object]]


async def serve_handed(
    serving: AsyncExitStack, handover: socket.socket, services: Sequence[InnerService]
) -> bool:
    """Serve each of `services` on the listener the relay hands out through `handover`, until
    `serving` closes; False when the relay handed out none (its program could not start)."""
    listeners = await handed_listeners(handover, len(services))
    for service, listener in zip(services, listeners, strict=False):
        await serving.enter_async_context(service.served_on(listener))
    return bool(listeners)


async def handed_listeners(handover: socket.socket, count: int) -> list[socket.socket]:
    """The listening sockets the relay hands out through `handover`: as many as it was asked for, or
    none where it ended first (COMMAND could not start; it says why itself)."""
    loop = asyncio.get_running_loop()
    handover.setblocking(False)
    readable: asyncio.Future[None] = loop.create_future()

    def ready() -> None:
        if not readable.done():
            readable.set_result(None)

    loop.add_reader(handover.fileno(), ready)
    try:
        await readable
    finally:
        loop.remove_reader(handover.fileno())
    try:
        _, descriptors, _, _ = socket.recv_fds(handover, 64, MAX_LISTENERS)
    except OSError:
        return []
    listeners = [socket.socket(fileno=descriptor) for descriptor in descriptors]
    if len(listeners) != count or any(listener.type != socket.SOCK_STREAM for listener in listeners):
        for listener in listeners:
            listener.close()
        return []
    return listeners


def descends_from_us(pid: int) -> bool:
    """Whether process `pid` was started by this process, or by one it started."""
    ours = os.getpid()
    seen = 0
    while pid > 1 and seen < 64:
        if pid == ours:
            return True
        try:
            status = Path(f"/proc/{pid}/status").read_text()
        except OSError:
            return False
        parent = next((line.split()[1] for line in status.splitlines() if line.startswith("PPid:")), "0")
        pid, seen = int(parent), seen + 1
    return False


class HandoverPoint:
    """A Unix socket in a folder of its own, where one sandbox's launcher connects."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self.path = str(folder / "handover.sock")
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(self.path)
        self.listener.listen(4)
        self.listener.setblocking(False)

    async def taken(self, timeout: float = HANDOVER_TIMEOUT_SECONDS) -> socket.socket | None:
        """The first connection from a process this one started, or None when none comes in time;
        any other connection is closed unread."""
        loop = asyncio.get_running_loop()
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(timeout):
                while True:
                    connection, _ = await loop.sock_accept(self.listener)
                    pid, _, _ = socket_credentials(connection)
                    if descends_from_us(pid):
                        return connection
                    connection.close()
        return None

    def close(self) -> None:
        self.listener.close()
        shutil.rmtree(self.folder, ignore_errors=True)


def socket_credentials(connection: socket.socket) -> tuple[int, int, int]:
    """The peer's pid, uid and gid, as the kernel recorded them when it connected."""
    pid, uid, gid = struct.unpack("3i", connection.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
    return pid, uid, gid


@asynccontextmanager
async def handover_point() -> AsyncIterator[HandoverPoint]:
    """A handover point for one sandbox, removed when the block ends (or once taken)."""
    # Mode 0700: no other user may connect. A Unix socket's path holds at most 107 bytes: where the
    # temporary folder's is too long (a deep TMPDIR), the point is made in /tmp.
    under = tempfile.gettempdir()
    under = under if len(under) < SOCKET_PATH_LIMIT - 48 else "/tmp"
    point = HandoverPoint(Path(tempfile.mkdtemp(prefix="reviewer-handover-", dir=under)))
    try:
        yield point
    finally:
        point.close()
