"""COMMAND's one way out of its network, where the operator allows it: `--allow-net HOST:PORT`.

In the `namespaces` sandbox COMMAND's network holds only its own loopback. With `--allow-net`, the relay
there (`reviewer.sandbox.relay`) hands out a listener on 127.0.0.1:8480, which `reviewer run` serves from
outside: an HTTP proxy that answers `CONNECT HOST:PORT` and nothing else. It tunnels a connection only
to a HOST:PORT the operator named, and answers 403 with the reason for any other:

- the host is compared after the normalisation the executor uses (`reviewer.plan.hosts.wire_host`:
  lower case, IDNA, no trailing dot), the port exactly;
- an IP literal is reached only where the operator named that very literal;
- a name is resolved here, outside the sandbox, and the connection goes to the address found, never
  to a loopback, private, link-local or otherwise non-public one (a name whose DNS answers 127.0.0.1
  does not open the host's loopback services), unless the operator named the host as a local one:
  an IP literal, or `localhost` (which reaches loopback addresses only);
- plain HTTP (`GET http://...`) is never forwarded: every method but CONNECT is refused.

TLS runs end to end between COMMAND and the host: the proxy sees the host and the port, not what
travels. It holds at most 64 connections at once (a 503 beyond), waits 10 s for a request and for a
connection, and ends a tunnel where nothing moved either way for 5 minutes. It logs nothing.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import re
import socket
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Final

from reviewer.plan.hosts import wire_host

EGRESS_PORT: Final = 8480
"""The proxy's port on the sandbox's own loopback."""
MAX_CONNECTIONS: Final = 64
HEAD_LIMIT: Final = 8 * 1024
CROWDED_WAIT: Final = 1.0
"""Seconds a connection past `MAX_CONNECTIONS` is read from before its 503 (not the head's 10 s)."""
HEAD_TIMEOUT: Final = 10.0
IDLE_TIMEOUT: Final = 300.0
BUFFER: Final = 64 * 1024
LOCAL_NAMES: Final = frozenset({"localhost"})
_NAME: Final = re.compile(r"[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
Resolver = Callable[[str, int], Awaitable[list[str]]]


@dataclass(frozen=True, order=True)
class Allowed:
    """A HOST:PORT the proxy tunnels to: the host normalised (an IP literal in its short form)."""

    host: str
    port: int

    @property
    def literal(self) -> Address | None:
        with contextlib.suppress(ValueError):
            return ipaddress.ip_address(self.host)
        return None

    def __str__(self) -> str:
        literal = self.literal
        return (
            f"[{self.host}]:{self.port}"
            if literal is not None and literal.version == 6
            else f"{self.host}:{self.port}"
        )


def parse_host_port(value: str, said: str = "--allow-net") -> Allowed:
    """`HOST:PORT` (`[V6]:PORT` for an IPv6 literal) as an `Allowed`; ValueError with a one-line reason."""
    shown = repr(value[:100])
    host, colon, port = value.strip().rpartition(":")
    if not colon or not port.isascii() or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{said} {shown} is not HOST:PORT (a port from 1 to 65535, e.g. api.openai.com:443)")
    if host.startswith("[") and host.endswith("]"):
        try:
            return Allowed(str(ipaddress.IPv6Address(host[1:-1])), int(port))
        except ValueError:
            raise ValueError(f"{said} {shown}: {host[:60]!r} is not an IPv6 address") from None
    with contextlib.suppress(ValueError):
        literal = ipaddress.ip_address(host)
        if literal.version == 4:
            return Allowed(str(literal), int(port))
    if (address := _loose_ipv4(host)) is not None:
        raise ValueError(
            f"{said} {shown}: {host[:60]!r} is the IPv4 address {address} written another way (octal, hex "
            f"or short), which resolvers read as that address and no DNS name can be; write {address}:{port}"
        )
    try:
        name = wire_host(host)
    except ValueError:
        name = ""
    if not _NAME.fullmatch(name) or len(name) > 253:
        raise ValueError(f"{said} {shown}: the host is neither a DNS name nor an IP address")
    return Allowed(name, int(port))


def _loose_ipv4(host: str) -> str | None:
    """The dotted address `host` stands for where the C library reads it as one (`0177.0.0.1`,
    `0x7f.1`, `2130706433`), though it is not written a.b.c.d; None for anything else."""
    if not host or not all(part.isascii() and part.isalnum() for part in host.split(".")):
        return None
    try:
        return socket.inet_ntoa(socket.inet_aton(host))
    except OSError:
        return None


def _public(address: Address) -> bool:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_global and not address.is_multicast


def address_refused(named: Allowed, address: Address) -> str | None:
    """Why the proxy does not connect to `address` for `named`, or None when it may."""
    if named.literal is not None:
        return None if address == named.literal else f"{address} is not the address named"
    if named.host in LOCAL_NAMES:
        return None if address.is_loopback else f"{named.host} resolves to {address}, not a loopback address"
    if not _public(address):
        return (
            f"{named.host} resolves to {address}, which is not a public address (loopback, private or "
            "link-local): only a host named as an IP address or localhost reaches those"
        )
    return None


async def resolve(host: str, port: int) -> list[str]:
    """The addresses `host` resolves to, here, outside the sandbox."""
    found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(entry[4][0]) for entry in found))


class Refused(Exception):
    """A request the proxy answers with `status` and `reason` instead of a tunnel."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.status = status
        self.reason = reason


class EgressProxy:
    """The CONNECT proxy for `allowed`; `resolver` finds a name's addresses, within `head_timeout` a
    request must come and a connection be made, and a tunnel idle both ways for `idle_timeout` ends
    (a test gives its own)."""

    def __init__(
        self,
        allowed: Iterable[Allowed],
        resolver: Resolver = resolve,
        *,
        head_timeout: float = HEAD_TIMEOUT,
        idle_timeout: float = IDLE_TIMEOUT,
    ) -> None:
        self.allowed = frozenset(allowed)
        self.resolver = resolver
        self.head_timeout = head_timeout
        self.idle_timeout = idle_timeout
        self.open = 0
        self.tasks: set[asyncio.Task[None]] = set()

    async def __call__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        """One connection from COMMAND, counted while it lasts."""
        task = asyncio.current_task()
        if task is not None:
            self.tasks.add(task)
        self.open += 1
        try:
            await self._handle(reader, writer, crowded=self.open > MAX_CONNECTIONS)
        except asyncio.CancelledError:
            writer.close()  # the run ends: its tunnels end with it (and the task ends, not cancelled)
        finally:
            self.open -= 1
            if task is not None:
                self.tasks.discard(task)

    async def _handle(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, *, crowded: bool
    ) -> None:
        try:
            if crowded:  # a connection past the limit is held a second at most, then refused
                with contextlib.suppress(TimeoutError, OSError):
                    async with asyncio.timeout(CROWDED_WAIT):
                        await reader.read(HEAD_LIMIT)  # what it sends first, so the close is no reset
                raise Refused(503, f"the proxy holds {MAX_CONNECTIONS} connections already")
            async with asyncio.timeout(self.head_timeout):
                head = await self._head(reader)
            named = self._allowed(head)
            upstream_reader, upstream_writer = await self._connect(named)
        except Refused as refused:
            await _answer(writer, refused.status, refused.reason)
            return
        except (TimeoutError, OSError):
            writer.close()
            return
        try:
            writer.write(b"HTTP/1.1 200 Connection Established\r\n\r\n")
            await writer.drain()
            await _tunnel(reader, writer, upstream_reader, upstream_writer, self.idle_timeout)
        except OSError:
            pass
        finally:
            for end in (writer, upstream_writer):
                end.close()

    @staticmethod
    async def _head(reader: asyncio.StreamReader) -> bytes:
        try:
            return await reader.readuntil(b"\r\n\r\n")
        except asyncio.LimitOverrunError:
            raise Refused(431, f"the request's head is over {HEAD_LIMIT} bytes") from None
        except asyncio.IncompleteReadError:
            raise Refused(400, "the request ended before its head did") from None

    def _allowed(self, head: bytes) -> Allowed:
        line = head.split(b"\r\n", 1)[0].decode("latin-1")
        words = line.split(" ")
        if len(words) != 3 or not words[2].startswith("HTTP/1."):
            raise Refused(400, "the request line is not METHOD TARGET HTTP/1.x")
        if words[0] != "CONNECT":
            raise Refused(
                403,
                "only CONNECT HOST:PORT is forwarded (https); plain HTTP is not, to any host",
            )
        try:
            target = parse_host_port(words[1], "CONNECT")
        except ValueError as error:
            raise Refused(400, str(error)) from None
        if target not in self.allowed:
            raise Refused(403, f"{target} is not a host reviewer run was told to allow (--allow-net)")
        return target

    async def _connect(self, named: Allowed) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        literal = named.literal
        try:
            async with asyncio.timeout(self.head_timeout):
                found = [str(literal)] if literal is not None else await self.resolver(named.host, named.port)
        except (OSError, TimeoutError):
            raise Refused(502, f"{named.host} does not resolve") from None
        reasons: list[str] = []
        for text in found:
            address = ipaddress.ip_address(text)
            refused = address_refused(named, address)
            if refused is not None:
                reasons.append(refused)
                continue
            try:
                async with asyncio.timeout(self.head_timeout):
                    return await asyncio.open_connection(str(address), named.port)
            except (OSError, TimeoutError) as error:
                reasons.append(f"{address}: {type(error).__name__}")
        if reasons and all(
            "not a public address" in reason or "not a loopback" in reason for reason in reasons
        ):
            raise Refused(403, reasons[0])
        raise Refused(502, f"{named} could not be reached ({'; '.join(reasons)[:300] or 'no address'})")


async def _answer(writer: asyncio.StreamWriter, status: int, reason: str) -> None:
    titles = {
        400: "Bad Request",
        403: "Forbidden",
        431: "Request Header Fields Too Large",
        502: "Bad Gateway",
    }
    body = f"reviewer run: {reason}\n".encode("ascii", "replace")
    writer.write(
        f"HTTP/1.1 {status} {titles.get(status, 'Service Unavailable')}\r\nContent-Type: text/plain\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode("ascii")
        + body
    )
    with contextlib.suppress(OSError):
        await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    writer.close()


async def _tunnel(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    upstream_reader: asyncio.StreamReader,
    upstream_writer: asyncio.StreamWriter,
    idle_timeout: float,
) -> None:
    """Copy both ways until both ends have finished, or nothing moved either way for `idle_timeout`."""
    loop = asyncio.get_running_loop()
    moved = [loop.time()]

    async def pump(source: asyncio.StreamReader, target: asyncio.StreamWriter) -> None:
        while True:
            try:
                chunk = await asyncio.wait_for(source.read(BUFFER), idle_timeout)
            except TimeoutError:
                if loop.time() - moved[0] >= idle_timeout:
                    raise
                continue
            if not chunk:
                if target.can_write_eof():
                    with contextlib.suppress(OSError):
                        target.write_eof()
                return
            moved[0] = loop.time()
            target.write(chunk)
            await target.drain()

    pumps = [
        asyncio.ensure_future(pump(reader, upstream_writer)),
        asyncio.ensure_future(pump(upstream_reader, writer)),
    ]
    try:
        await asyncio.gather(*pumps)
    except (TimeoutError, OSError):
        pass
    finally:
        for running in pumps:
            running.cancel()


@asynccontextmanager
async def serving_egress(proxy: EgressProxy, listener: socket.socket) -> AsyncIterator[None]:
    """Serve `proxy` on `listener` (COMMAND's 127.0.0.1:8480) until the block ends. Tunnels still
    open when it ends are closed."""
    server = await asyncio.start_server(proxy, sock=listener, limit=HEAD_LIMIT, backlog=MAX_CONNECTIONS)
    try:
        yield
    finally:
        server.close()
        still_open = list(proxy.tasks)
        for task in still_open:
            task.cancel()
        await asyncio.gather(*still_open, return_exceptions=True)


def proxy_environment(url: str, gate_hosts: Iterable[str] = ("127.0.0.1", "localhost")) -> dict[str, str]:
    """The variables that send COMMAND's HTTP clients through the proxy at `url`, and the gate's own
    loopback host past it (curl reads no port in NO_PROXY, so the whole host)."""
    no_proxy = ",".join(gate_hosts)
    names = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
    return {**dict.fromkeys(names, url), "NO_PROXY": no_proxy, "no_proxy": no_proxy}
