"""Bearer tokens: minting, the hash the store keeps instead of the token, and reading the header.

A token is 32 random bytes; only its SHA-256 is stored, so a stolen database yields no credential.
The token text never enters a log line, an error message or a repr.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from typing import Literal

Role = Literal["agent", "reviewer"]
ROLES: tuple[Role, ...] = ("agent", "reviewer")
TOKEN_PREFIX = "rvw_"


@dataclass(frozen=True)
class Identity:
    """Who a request comes from; a decision takes its author from here, never from the body."""

    token_id: int
    name: str
    role: Role


def mint_token() -> str:
    """A new token; the prefix lets secret scanners and humans recognise it."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def hashes_match(stored_sha256: str, presented_sha256: str) -> bool:
    """Constant-time comparison, so response timing reveals nothing about a stored hash."""
    return hmac.compare_digest(stored_sha256.encode(), presented_sha256.encode())
