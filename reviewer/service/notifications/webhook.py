"""The signed webhook: one POST of the event's JSON, bounded in time, never following a redirect, never
reading the receiver's answer beyond its status line and headers."""

from __future__ import annotations

import time
from typing import Final

import httpx

from reviewer.service.notifications.sender import DeliveryFailed, target_name
from reviewer.service.notifications.signature import signature_header
from reviewer.service.store import Clock, Delivery

DEFAULT_ATTEMPT_TIMEOUT: Final = 5.0
"""Seconds to connect, and between any two reads or writes, of one attempt."""


class WebhookSender:
    """POSTs an event's stored bytes to one URL, signed with the shared secret at the time of sending."""

    def __init__(
        self,
        url: str,
        secret: bytes,
        *,
        timeout: float = DEFAULT_ATTEMPT_TIMEOUT,
        clock: Clock = time.time,
        events: frozenset[str] | None = None,
    ) -> None:
        self.url = url
        self.events = events
        self.name = target_name(url)
        self.secret = secret
        self.clock = clock
        # No connection kept: a receiver that answered with 10 MB left them unread, and the next
        # attempt starts clean. Redirects are the receiver's data, not an instruction.
        self.client = httpx.Client(
            timeout=httpx.Timeout(timeout),
            follow_redirects=False,
            limits=httpx.Limits(max_keepalive_connections=0),
            trust_env=False,
        )

    def send(self, delivery: Delivery) -> None:
        headers = {
            "Content-Type": "application/json",
            "User-Agent": "reviewer-queue",
            "Reviewer-Event": delivery.event,
            "Reviewer-Delivery": delivery.event_id,
            "Reviewer-Signature": signature_header(self.secret, int(self.clock()), delivery.body),
        }
        try:
            with self.client.stream("POST", self.url, content=delivery.body, headers=headers) as response:
                status = response.status_code  # the body is never read: closing drops it
        except httpx.TimeoutException:
            raise DeliveryFailed("no answer in time") from None
        except httpx.HTTPError as error:
            raise DeliveryFailed(f"cannot reach it ({type(error).__name__})") from None
        if 300 <= status < 400:
            raise DeliveryFailed(f"answered {status}, a redirect, which is not followed")
        if not 200 <= status < 300:
            raise DeliveryFailed(f"answered {status}")

    def close(self) -> None:
        self.client.close()
