"""Names an agent writes, compared as a reader sees them: names read at a glance and base-URL patterns.

A name's look-alike letters are read by `reviewer.plan.lookalikes.skeleton` (UTS #39, with case and
width folded and invisible characters removed), the one table the review screen's look-alike
alarms use too; `folded` also reads digits as letters and drops accents.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass
from typing import Final
from urllib.parse import urlsplit

from reviewer.plan.hosts import DEFAULT_PORTS, destination, wire_host
from reviewer.plan.lookalikes import skeleton

_DIGIT_LETTERS: Final = str.maketrans("0123456789", "olzeasgtbg")
"""The letter each digit passes for in a name (`pr0duction`, `a1ice`)."""


def folded(name: str) -> str:
    """A name as one reads it at a glance: its `skeleton` after digits became the letters they pass
    for and accents were dropped, so `PRODUCTİON`, `prŏduction` and `pr0duction` are `production`."""
    decomposed = unicodedata.normalize("NFKD", name.translate(_DIGIT_LETTERS))
    return skeleton("".join(character for character in decomposed if not unicodedata.combining(character)))


@dataclass(frozen=True)
class BaseUrlPattern:
    """`https://api.prod.example/*`: a scheme, a host (`*.prod.example` for any subdomain), an
    optional port, and a path that is exact or, ending in `/*`, a prefix of whole segments."""

    text: str
    scheme: str
    host: str
    port: int
    path: str
    prefix: bool

    @classmethod
    def parse(cls, text: str) -> BaseUrlPattern:
        """The pattern in `text`; ValueError saying what is wrong."""
        parts = urlsplit(text)
        if parts.scheme not in DEFAULT_PORTS:
            raise ValueError(f"{text!r}: a base URL pattern starts with https:// or http://")
        if parts.username is not None or parts.password is not None or parts.query or parts.fragment:
            raise ValueError(f"{text!r}: a base URL pattern has no user, query or fragment")
        host = parts.hostname or ""
        wildcard = host.startswith("*.")
        if not host or "*" in (host[2:] if wildcard else host):
            raise ValueError(f"{text!r}: the host is a name, or *.name for its subdomains")
        path = parts.path or "/"
        prefix = path.endswith("/*")
        if prefix:
            path = path[:-2]
        if "*" in path:
            raise ValueError(f"{text!r}: a path pattern ends in /* or has no *")
        try:
            port = parts.port or DEFAULT_PORTS[parts.scheme]
            encoded = "*." + wire_host(host[2:]) if wildcard else wire_host(host)
        except ValueError as error:
            raise ValueError(f"{text!r}: {error}") from None
        return cls(text, parts.scheme, encoded, port, path.rstrip("/"), prefix)

    def owns_host(self, host: str) -> bool:
        """Whether `host` (a `wire_host`) is this pattern's host, on whatever scheme or port."""
        if self.host.startswith("*."):
            return host.endswith(self.host[1:]) and host != self.host[2:]
        return host == self.host

    def matches(self, base_url: str) -> bool:
        """Whether a plan's base URL is under this pattern, read as the executor will reach it
        (`reviewer.plan.hosts.destination`): the host after any `user@`, as it goes on the wire, the
        port the scheme implies."""
        try:
            reached = destination(base_url)
            path = urlsplit(base_url.strip()).path.rstrip("/")
        except ValueError:
            return False
        if reached.scheme != self.scheme or reached.port != self.port or not self.owns_host(reached.host):
            return False
        if self.prefix:
            return path == self.path or path.startswith(self.path + "/")
        return path == self.path
