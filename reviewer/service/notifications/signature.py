"""The `Reviewer-Signature` header: Stripe's scheme, `t=UNIX_SECONDS,v1=HEX` with HEX the HMAC-SHA256 of
`"{t}.{body}"` under the shared secret, so a receiver can check the sender and refuse a replay."""

from __future__ import annotations

import hashlib
import hmac
from typing import Final

DEFAULT_TOLERANCE: Final = 300
"""How old a signature a receiver accepts, in seconds: older is a replay."""


def signature_header(secret: bytes, timestamp: int, body: bytes) -> str:
    mac = hmac.new(secret, f"{timestamp}.".encode() + body, hashlib.sha256).hexdigest()
    return f"t={timestamp},v1={mac}"


def verify(header: str, body: bytes, secret: bytes, now: float, tolerance: float = DEFAULT_TOLERANCE) -> bool:
    """True when `header` signs `body` under `secret` and is at most `tolerance` seconds old."""
    fields: dict[str, list[str]] = {}
    for part in header.split(","):
        name, _, value = part.strip().partition("=")
        fields.setdefault(name, []).append(value)
    try:
        timestamp = int(fields.get("t", [""])[0])
    except ValueError:
        return False
    if abs(now - timestamp) > tolerance:
        return False
    expected = signature_header(secret, timestamp, body).split("v1=", 1)[1]
    return any(hmac.compare_digest(expected, given) for given in fields.get("v1", []))
