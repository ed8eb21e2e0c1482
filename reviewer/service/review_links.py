"""The review page's link for a proposal's revision: the queue's page origin, the revision, and a key
only the queue can make (HMAC-SHA256 of the proposal id under a secret kept in its database), so a
page of a proposal is shown to whoever holds its link, and to no one guessing ids."""

from __future__ import annotations

import hashlib
import hmac
from typing import Final
from urllib.parse import quote

KEY_HEX: Final = 32
"""128 bits of the HMAC in the link: far beyond guessing, short enough for a pager's message."""


def link_key(secret: bytes, proposal_id: str) -> str:
    return hmac.new(secret, proposal_id.encode(), hashlib.sha256).hexdigest()[:KEY_HEX]


def key_matches(secret: bytes, proposal_id: str, key: str) -> bool:
    """Whether `key` is this proposal's, compared in constant time."""
    return hmac.compare_digest(link_key(secret, proposal_id).encode(), key.encode("utf-8", "replace"))


def review_link(origin: str, secret: bytes, proposal_id: str, revision: int) -> str:
    return f"{origin}/review/{quote(proposal_id, safe='')}/{revision}?key={link_key(secret, proposal_id)}"
