"""What every sender shares, and what the targets, the webhook and the chat sender all use: the
`Sender` protocol, its two errors and a target's name (which never holds a URL's secret part).
It imports no sender, so the senders and the module that picks them import it, never one another."""

from __future__ import annotations

import hashlib
from typing import Final, Protocol
from urllib.parse import urlsplit

from reviewer.service.store import Delivery

WEBHOOK_SCHEMES: Final = ("http", "https")


class NotifyRefused(Exception):
    """A `--notify` URL or the secret file that `serve` cannot use; the message is one line."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DeliveryFailed(Exception):
    """One attempt that did not reach the receiver, or that it did not accept; retried later."""


class Sender(Protocol):
    name: str
    events: frozenset[str] | None
    """The events this target gets; None for all."""

    def send(self, delivery: Delivery) -> None:
        """Deliver once, within a bounded time; raise `DeliveryFailed` when it did not arrive."""


def target_name(url: str) -> str:
    """A webhook's `scheme://host[:port]`, an Apprise URL's `scheme://` alone (its host is often a
    token), and a digest of the whole URL: tells targets apart, shows no secret."""
    parts = urlsplit(url)
    digest = hashlib.sha256(url.encode()).hexdigest()[:8]
    if parts.scheme.lower() not in WEBHOOK_SCHEMES:
        return f"{parts.scheme}:// #{digest}"
    host = parts.hostname or ""
    port = f":{parts.port}" if parts.port else ""
    return f"{parts.scheme}://{host}{port} #{digest}"
