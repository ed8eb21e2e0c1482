"""A base URL's host as it will be resolved, and what in it should stop a reviewer: look-alikes.

`wire_host` and `destination` are the one answer to "which host does this URL reach": the policy
(which environment owns a plan), the review screen (its alarms) and the executor (is a request still
under the approved base URL) all ask them, so none of them can name a host the others do not.

`target.base_url` is the one target field the executor enforces, so the reviewer must read the host
the request will really go to, not the one the text seems to name. The host is shown as the
executor's HTTP client (httpx) encodes it: IDNA, so `аpi.example.com` with a Cyrillic `а` reads
`xn--pi-8kc.example.com`. Alarms, each a sentence for the screen (agent text: sanitize to show):
- a label that mixes scripts or whose letters all pass for Latin (also when written as `xn--`);
- userinfo (`http://api.example.com@evil.example/v1` goes to `evil.example`);
- an IP address where a name was expected: any address but loopback, and any number a resolver reads
  as an address (`2130706433`, `0x7f.1`), which no one writes but to disguise one;
- a base URL that does not parse (the executor refuses it).
"""

from __future__ import annotations

import ipaddress
import re
import socket
import urllib.parse
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

import httpx
import idna

from reviewer.plan.lookalikes import lookalike_identifier

DEFAULT_PORTS: Final = {"http": 80, "https": 443}
_NUMERIC_LABEL: Final = re.compile(r"(0x[0-9a-f]*|[0-9]+)", re.IGNORECASE)
_NAME: Final = re.compile(r"[A-Za-z0-9.-]+|\[[0-9A-Fa-f:.]+\]|[0-9A-Fa-f:.]+")
"""What a DNS name or an IP literal is made of; anything else in a host is a trick or a mistake."""


def wire_host(host: str) -> str:
    """The host as the executor's HTTP client puts it on the wire: lower case, each non-ASCII label in
    IDNA 2008 after UTS 46 mapping (`straße` is `xn--strae-oqa`, not IDNA 2003's `strasse`; fullwidth
    `ＡＰＩ` is `api`), `xn--` labels as written, and without the trailing dot DNS ignores
    (`api.example.`). ValueError when the host has no such form."""
    bare = host.strip()
    bare = bare[:-1] if bare.endswith(".") else bare
    if bare.isascii():
        return bare.lower()
    try:
        return idna.encode(bare, uts46=True).decode("ascii")
    except idna.IDNAError as error:
        raise ValueError(f"the host {host!r} has no IDNA form: {error}") from None


def is_loopback(host: str | None) -> bool:
    """`localhost` or a loopback address: where plain http keeps a token on this machine."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host or "").is_loopback
    except ValueError:
        return False


def fully_unquoted(path: str) -> str:
    """`path` percent-decoded until nothing changes (a bounded number of times): a server or proxy that
    decodes twice must not find a dot segment the check did not see."""
    for _ in range(4):
        decoded = urllib.parse.unquote(path)
        if decoded == path:
            break
        path = decoded
    return path


def dot_segments(path: str) -> str | None:
    """Why a request path could land outside the approved base URL once a server resolves it, or None:
    a backslash, or a `.` or `..` segment, also with path parameters (`..;x=1`: servlet containers strip
    them and then resolve the dots), also percent-encoded (`fully_unquoted`). Refused outright, never
    normalised: a server or proxy may resolve them after the check."""
    decoded = fully_unquoted(path)
    if "\\" in decoded or any(segment.split(";", 1)[0] in (".", "..") for segment in decoded.split("/")):
        return f"its path {path[:200]!r} holds dot segments or backslashes"
    return None


@dataclass(frozen=True)
class Destination:
    """Where a URL's requests go: its scheme, its `wire_host`, and its port (the scheme's default
    when none is written)."""

    scheme: str
    host: str
    port: int


def destination(url: str) -> Destination:
    """Where requests to `url` go, read as the executor's client (httpx) reads it: the host after any
    `user@`; a host httpx refuses to encode (a fullwidth name) is read by the standard parser and
    mapped by UTS 46, so its owner is still found. ValueError for a URL that does not parse."""
    try:
        parsed = httpx.URL(url.strip())
        scheme, host, port = parsed.scheme, parsed.raw_host.decode("ascii"), parsed.port
    except (httpx.InvalidURL, UnicodeError):
        parts = urlsplit(url.strip())
        scheme, host, port = parts.scheme, parts.hostname or "", parts.port
    return Destination(scheme, wire_host(host), port or DEFAULT_PORTS.get(scheme, 0))


@dataclass(frozen=True)
class HostReading:
    """What a base URL's host is once resolved, and why it might not be what it seems."""

    resolved_url: str
    """The base URL with its host as it goes on the wire (ASCII, IDNA-encoded)."""
    host: str
    """The host as it goes on the wire."""
    written_host: str | None
    """The host in Unicode, when that differs from `host` (an IDNA name)."""
    alarms: tuple[str, ...]

    @property
    def plain(self) -> bool:
        """Nothing to add to the base URL as written: an ASCII host and no alarm."""
        return self.written_host is None and not self.alarms


def read_host(base_url: str) -> HostReading:
    """The host of `base_url` as the executor's client will resolve it, with every alarm it deserves."""
    try:
        url = httpx.URL(base_url)
        host = wire_host(url.raw_host.decode("ascii"))
    except (httpx.InvalidURL, UnicodeError, ValueError) as error:
        refused = f"the base URL does not parse ({error}); the executor refuses it"
        try:
            mapped = destination(base_url).host
        except ValueError:
            return HostReading(base_url, "", None, (refused,))
        return HostReading(base_url, mapped, _unicode_host(mapped), (refused,))
    alarms: list[str] = []
    if not host:
        alarms.append("the base URL names no host")
    elif not _NAME.fullmatch(host):
        alarms.append(f"the host {host!r} holds characters no DNS name has")
    written = _unicode_host(host)
    if url.userinfo:
        before = url.userinfo.decode("ascii", "replace")
        alarms.append(f"{before!r} before the @ is not the host: requests go to {written or host}")
    alarms.extend(_lookalike_labels(written or host))
    address = _address(host)
    if address is not None:
        alarms.append(address)
    resolved = str(url.copy_with(userinfo=b"")) if url.userinfo else str(url)
    return HostReading(resolved, host, written if written != host else None, tuple(alarms))


def _unicode_host(host: str) -> str | None:
    """The Unicode form of an IDNA host (`xn--` labels decoded), or None when it has none."""
    if "xn--" not in host.lower():
        return None
    labels = []
    for label in host.split("."):
        try:
            labels.append(idna.decode(label) if label.lower().startswith("xn--") else label)
        except idna.IDNAError:
            labels.append(label)
    return ".".join(labels)


def _lookalike_labels(host: str) -> list[str]:
    return [
        f"the host's label {label!r} mixes scripts or passes for Latin: a look-alike of another name"
        for label in host.split(".")
        if lookalike_identifier(label)
    ]


def _address(host: str) -> str | None:
    """An alarm for an IP address that stands where a name was expected, or None."""
    bare = host.strip("[]")
    try:
        address = ipaddress.ip_address(bare)
    except ValueError:
        address = None
    if address is not None:
        if address.is_loopback:
            return None
        return f"the host is the IP address {address}, not a name: nothing says whose machine it is"
    labels = [label for label in bare.rstrip(".").split(".")]
    if labels and all(_NUMERIC_LABEL.fullmatch(label) for label in labels):
        try:
            meant = socket.inet_ntoa(socket.inet_aton(bare))
        except OSError:
            return f"the host {host!r} is made of numbers: a resolver may read it as an IP address"
        return f"the host {host!r} is the IP address {meant} written as a number, a disguise"
    return None
