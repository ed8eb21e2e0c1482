"""Names an agent writes, compared as a reader sees them: confusable skeletons and base-URL patterns.

The skeleton follows UTS #39 (section 4): each character is replaced by the prototype of its class in
Unicode's confusables data, after case and width are folded (NFKC, casefold) and invisible
characters are removed, so `prоduction` (Cyrillic о), `PRODUCTION` and `produ\u200bction` share the
skeleton of `production`. The data is the one `confusable_homoglyphs` ships, generated from
Unicode's confusables.txt: it lists each pair both ways, so a class is a connected set of
characters, named by its ASCII member (else its smallest).
"""

from __future__ import annotations

import json
import unicodedata
from dataclasses import dataclass
from functools import cache
from importlib import resources
from typing import Final
from urllib.parse import urlsplit

from reviewer.plan.hosts import DEFAULT_PORTS, destination, wire_host

_DIGIT_LETTERS: Final = str.maketrans("0123456789", "olzeasgtbg")
"""The letter each digit passes for in a name (`pr0duction`, `a1ice`)."""


@cache
def _prototypes() -> dict[str, str]:
    """Each confusable character's prototype: one representative per class of look-alikes, or the
    sequence a character passes for (`m` for `rn`)."""
    data = json.loads(
        resources.files("confusable_homoglyphs").joinpath("confusables.json").read_text("utf-8")
    )
    parent: dict[str, str] = {}

    def find(character: str) -> str:
        root = character
        while parent.get(root, root) != root:
            root = parent[root]
        parent[character] = root
        return root

    sequences: dict[str, str] = {}
    for key, homoglyphs in data.items():
        character = _unmarked(key)
        for homoglyph in homoglyphs:
            other = _unmarked(homoglyph["c"])
            if len(character) == 1 and len(other) == 1:
                first, second = find(character), find(other)
                if first != second:
                    parent[max(first, second, key=_rank)] = min(first, second, key=_rank)
            elif len(character) == 1 and len(other) > 1:
                sequences[character] = other
    prototypes = {character: find(character) for character in list(parent)}
    for character, sequence in sequences.items():
        if prototypes.get(character, character) == character:
            prototypes[character] = "".join(prototypes.get(part, part) for part in sequence)
    return prototypes


def _unmarked(text: str) -> str:
    """The data's text without the left-to-right and right-to-left marks its generator kept from the
    comments of confusables.txt (they wrap right-to-left letters there)."""
    return text.replace("\u200e", "").replace("\u200f", "")


def _rank(character: str) -> tuple[bool, bool, str]:
    """The representative of a class: its lower-case ASCII member first, then the smallest code point."""
    return (not character.isascii(), not character.islower(), character)


def _invisible(character: str) -> bool:
    """Format characters (zero-width space and joiners, bidi controls, the BOM) and variation
    selectors: Default_Ignorable_Code_Point, near enough, with what a terminal draws as nothing."""
    return (
        unicodedata.category(character) in ("Cf", "Mn")
        and not unicodedata.combining(character)
        or (0xFE00 <= ord(character) <= 0xFE0F or 0xE0100 <= ord(character) <= 0xE01EF)
    )


def skeleton(name: str) -> str:
    """The confusable skeleton of `name`, case, width and surrounding spaces folded.

    Folding and mapping repeat until nothing changes (a prototype may be upper case, `Y`; a fold
    may make a new look-alike), so the skeleton of a skeleton is itself.
    """
    text = name
    for _ in range(_MAX_ROUNDS):
        folded = _fold_and_map(text)
        if folded == text:
            break
        text = folded
    return text


_MAX_ROUNDS: Final = 4


def _fold_and_map(text: str) -> str:
    folded = unicodedata.normalize("NFKC", text).casefold().strip()
    decomposed = unicodedata.normalize("NFD", folded)
    visible = "".join(character for character in decomposed if not _invisible(character))
    prototypes = _prototypes()
    mapped = "".join(prototypes.get(character, character) for character in visible)
    return unicodedata.normalize("NFD", mapped)


def folded(name: str) -> str:
    """A name as one reads it at a glance: its `skeleton` after digits became the letters they pass
    for and accents were dropped, so `PRODUCTİON`, `prŏduction` and `pr0duction` are `production`."""
    decomposed = unicodedata.normalize("NFKD", name.translate(_DIGIT_LETTERS).casefold())
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
