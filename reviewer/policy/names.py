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

_DEFAULT_PORTS: Final = {"http": 80, "https": 443}


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
        if parts.scheme not in _DEFAULT_PORTS:
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
            port = parts.port or _DEFAULT_PORTS[parts.scheme]
        except ValueError as error:
            raise ValueError(f"{text!r}: {error}") from None
        return cls(text, parts.scheme, _ascii_host(host), port, path.rstrip("/"), prefix)

    def matches(self, base_url: str) -> bool:
        """Whether a plan's base URL is under this pattern, read as the executor will reach it: the
        host after any `user@`, in its ASCII (IDNA) form, the port the scheme implies."""
        try:
            parts = urlsplit(base_url.strip())
            port = parts.port or _DEFAULT_PORTS.get(parts.scheme, 0)
            host = _ascii_host(parts.hostname or "")
        except ValueError:
            return False
        if parts.scheme != self.scheme or port != self.port:
            return False
        if self.host.startswith("*."):
            if not host.endswith(self.host[1:]) or host == self.host[2:]:
                return False
        elif host != self.host:
            return False
        path = parts.path.rstrip("/")
        if self.prefix:
            return path == self.path or path.startswith(self.path + "/")
        return path == self.path


def _ascii_host(host: str) -> str:
    """The host as DNS reads it: lower case, non-ASCII labels in punycode (ValueError if it cannot be)."""
    host = host.rstrip(".").lower()
    if host.isascii():
        return host
    try:
        return host.encode("idna").decode("ascii")
    except UnicodeError as error:
        raise ValueError(f"host {host!r} has no ASCII form: {error}") from None
