"""How `reviewer serve` listens: the address rule, TLS, the read deadlines, and the bound socket.

Plain HTTP on a non-loopback address would carry bearer tokens and approvals in clear text, so it
is refused unless the operator says a TLS-terminating proxy is the only way in (and the service
logs that it relies on it). uvicorn is imported only when the server is configured.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from reviewer.plan.hosts import is_loopback
from reviewer.service.timeouts import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT


class ListenRefused(Exception):
    """`serve` cannot or must not listen as asked; the message is the one line the operator reads."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass(frozen=True)
class Listening:
    host: str
    port: int
    tls_cert: str | None = None
    tls_key: str | None = None
    behind_tls_proxy: bool = False
    header_timeout: float = DEFAULT_HEADER_TIMEOUT
    body_timeout: float = DEFAULT_BODY_TIMEOUT

    def check(self) -> None:
        """Refuse what would be unsafe or cannot work, before anything is opened."""
        if not 1 <= self.port <= 65535:
            raise ListenRefused(f"--port must be 1 to 65535, not {self.port}")
        if (self.tls_cert is None) != (self.tls_key is None):
            raise ListenRefused("--tls-cert and --tls-key go together: give both, or neither")
        for name, seconds in (
            ("--header-timeout", self.header_timeout),
            ("--body-timeout", self.body_timeout),
        ):
            if not 0 < seconds <= 3600:
                raise ListenRefused(f"{name} must be more than 0 and at most 3600 seconds, not {seconds}")
        if not is_loopback(self.host) and self.tls_cert is None and not self.behind_tls_proxy:
            raise ListenRefused(
                f"refusing to serve plain HTTP on {self.host}: tokens and approvals would cross the network "
                "in clear text; give --tls-cert and --tls-key, or --behind-tls-proxy if a TLS-terminating "
                "proxy is the only way in"
            )

    @property
    def scheme(self) -> str:
        return "https" if self.tls_cert else "http"

    def bind(self) -> socket.socket:
        """The listening socket, bound now, so a taken port is one clear line and a non-zero exit."""
        try:
            infos = socket.getaddrinfo(self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
        except socket.gaierror as error:
            raise ListenRefused(f"cannot listen on {self.host}: {error.strerror}") from None
        family, kind, proto, _, address = infos[0]
        listener = socket.socket(family, kind, proto)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind(address)
        except OSError as error:
            listener.close()
            raise ListenRefused(f"cannot listen on {self.host}:{self.port}: {error.strerror}") from None
        listener.set_inheritable(True)
        return listener

    def uvicorn_config(self, app: Any) -> Any:
        from uvicorn.config import Config

        from reviewer.service.deadlines import protocol_with_deadlines

        return Config(
            app,
            http=protocol_with_deadlines(self.header_timeout, self.body_timeout),
            access_log=False,
            log_config=None,
            server_header=False,
            ssl_certfile=self.tls_cert,
            ssl_keyfile=self.tls_key,
            timeout_keep_alive=int(min(self.header_timeout, 5)) or 1,
            ws="none",  # no route speaks WebSocket: uvicorn would import an implementation for nothing
        )

    def server(self, config: Any, on_shutdown: Callable[[], None]) -> Any:
        """uvicorn's server (asleep while idle), calling `on_shutdown` the moment it starts to shut
        down: before it waits for the requests in flight, so a long poll is answered then rather than
        at its wait's end."""
        from reviewer.quiet_server import QuietServer

        class Server(QuietServer):
            async def shutdown(self, sockets: list[socket.socket] | None = None) -> None:
                on_shutdown()
                await super().shutdown(sockets)

        return Server(config)
