"""Bearer tokens: minting, the hash the store keeps instead of the token, and reading the header.

A token is 32 random bytes; only its SHA-256 is stored, so a stolen database yields no credential.
The token text never enters a log line, an error message or a repr; `redact_tokens` keeps one out
even when a caller pastes it into a path, a query or a body.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from dataclasses import dataclass
from typing import Literal

from reviewer.redaction import redact

Role = Literal["agent", "reviewer", "metrics", "auditor"]
Kind = Literal["minted", "break-glass", "provider"]
"""How a caller signed in: a token `reviewer token create` minted, one minted `--break-glass` (a
reviewer's way in while the provider is down, marked in the trail), or the team's OpenID provider."""
ROLES: tuple[Role, ...] = ("agent", "reviewer", "metrics", "auditor")
"""`metrics`: reads `/metrics` and nothing else (it owns no proposal and may decide nothing);
`auditor`: reads the trail and its checkpoints, and nothing else."""
TOKEN_PREFIX = "rvw_"
TOKEN_SHAPED = re.compile(
    re.escape(TOKEN_PREFIX) + r"[A-Za-z0-9_-]+|(?-i:eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]*)?)",
    re.IGNORECASE,
)
"""The prefix and the base64url text after it: a token in `mint_token`'s format, or a piece of one;
or a JWT's header and body (an identity token from the provider, which authenticates for minutes)."""


@dataclass(frozen=True)
class Identity:
    """Who a request comes from; a decision takes its author from here, never from the body."""

    token_id: int
    name: str
    role: Role
    kind: Kind = "minted"
    subject: str | None = None
    """The provider's `iss` and `sub` of a person signed in through it, as `ISSUER#SUBJECT`; for a
    minted reviewer token, those of the person it was bound to (`token create --person`), if any."""

    @property
    def principal(self) -> str:
        """The deciding identity as the trail records it: `token:NAME`, `break-glass:NAME`, or
        `oidc:ISSUER#SUBJECT` (the provider's own name for the person, which outlives an email)."""
        if self.kind == "provider" and self.subject is not None:
            return f"oidc:{self.subject}"
        return f"{'break-glass' if self.kind == 'break-glass' else 'token'}:{self.name}"

    @property
    def person_id(self) -> str | None:
        """The provider's person behind the caller, `oidc:ISSUER#SUBJECT`: a quorum counts them once
        whatever token or session they decide through. None for a minted token bound to no one."""
        return None if self.subject is None else f"oidc:{self.subject}"


def mint_token() -> str:
    """A new token; the prefix lets secret scanners and humans recognise it."""
    return TOKEN_PREFIX + secrets.token_urlsafe(32)


def hash_token(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


def hashes_match(stored_sha256: str, presented_sha256: str) -> bool:
    """Constant-time comparison, so response timing reveals nothing about a stored hash."""
    return hmac.compare_digest(stored_sha256.encode(), presented_sha256.encode())


def redact_tokens(text: str) -> str:
    """`text` with every token-shaped string replaced, for what the service logs or answers.

    A token pasted into a URL path, a query or a JSON body by mistake would otherwise come back in
    a 404 or 422 message and land in the request log. The request log and every error body pass
    through here; a name or an id that merely starts with the prefix is redacted too, which costs
    nothing but a less precise message.
    """
    return redact(text, patterns=(TOKEN_SHAPED,))
