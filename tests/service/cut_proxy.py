"""A loopback TCP proxy the test controls: it forwards every connection to a server until told to
cut one off mid-conversation, as a network partition does (packets dropped, no FIN, no RST).

`cut_after(marker)` arms it: the next connection whose client sends bytes holding `marker` has
those bytes delivered, then nothing more in either direction, while both its sockets stay open.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import threading
from dataclasses import dataclass, field

from tests.service.ports import free_port


@dataclass
class CutProxy:
    target_port: int
    port: int = field(default_factory=free_port)
    cuts: int = 0
    """How many connections were cut off so far."""
    _marker: bytes | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _sockets: list[socket.socket] = field(default_factory=list)
    _listener: socket.socket | None = None

    def start(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port))
        threading.Thread(target=self._accept, daemon=True).start()

    def cut_after(self, marker: bytes) -> None:
        with self._lock:
            self._marker = marker

    def stop(self) -> None:
        if self._listener is not None:
            self._listener.close()
        for held in self._sockets:
            with contextlib.suppress(OSError):
                held.close()

    def _accept(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            server = socket.create_connection(("127.0.0.1", self.target_port))
            self._sockets += [client, server]
            threading.Thread(target=self._relay, args=(client, server), daemon=True).start()

    def _relay(self, client: socket.socket, server: socket.socket) -> None:
        peers = {client: server, server: client}
        with selectors.DefaultSelector() as selector:
            for end in peers:
                selector.register(end, selectors.EVENT_READ)
            while True:
                for key, _ in selector.select():
                    source: socket.socket = key.fileobj  # type: ignore[assignment]
                    try:
                        data = source.recv(65536)
                    except OSError:
                        return
                    if not data:
                        with contextlib.suppress(OSError):
                            peers[source].shutdown(socket.SHUT_WR)
                        return
                    peers[source].sendall(data)
                    if source is client and self._cuts_here(data):
                        return  # both sockets stay open, and nothing more is carried: a partition

    def _cuts_here(self, data: bytes) -> bool:
        with self._lock:
            if self._marker is None or self._marker not in data:
                return False
            self._marker = None
            self.cuts += 1
            return True
