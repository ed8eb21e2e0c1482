"""An SDK's retry of a write: known by the id the SDK sends with it, recorded once, answered as the first was.

An SDK retries a write it got no usable answer to (a timeout, a 5xx, an answer it could not parse) by
sending the same request again, under the same `amz-sdk-invocation-id` (the AWS SDKs) or the same
`Idempotency-Key` (Stripe and others): the API treats them as one request, so the plan holds one call,
and the real run sends it once. The retry waits for the first request's answer and gets it, whatever it
was. A request repeated without such a header is a call of its own: two real calls may be intended.
The same key on another request (another method, path, query or body) is the client's mistake, refused
as APIs that take the key refuse it, and recorded nowhere.
"""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Final, Generic, TypeVar

RETRY_HEADERS: Final = ("idempotency-key", "amz-sdk-invocation-id")
"""The headers that say a request is a retry of an earlier one, first found first."""

Answer = TypeVar("Answer")


class KeyReused(Exception):
    """A retry key that came with another request; the message names the header."""


def retry_key(headers: Iterable[tuple[bytes, bytes]]) -> tuple[str, str] | None:
    """The header that makes a request one with its retries, and its value; None without one."""
    found = {name.decode("latin-1").lower(): value.decode("latin-1") for name, value in headers}
    for name in RETRY_HEADERS:
        value = found.get(name, "").strip()
        if value:
            return name, value
    return None


def fingerprint(
    method: str, path: str, query: bytes, body: bytes, headers: Mapping[str, str] | None = None
) -> str:
    """What a retry repeats exactly: the method, the path and query as sent, the body's bytes and the
    headers the plan holds (`reviewer.plan.request_headers`; an attempt counter is not one of them)."""
    digest = hashlib.sha256()
    held = "\n".join(f"{name}:{value}" for name, value in sorted((headers or {}).items()))
    for part in (method.encode(), path.encode("utf-8", "surrogatepass"), query, body, held.encode("utf-8")):
        digest.update(len(part).to_bytes(8, "big") + part)
    return digest.hexdigest()


@dataclass
class Retries(Generic[Answer]):
    """The requests one run answered that carried a retry key, by key: what a retry is answered from."""

    owner: object | None = None
    first: dict[tuple[str, str], tuple[str, asyncio.Task[Answer]]] = field(default_factory=dict)

    def within(self, owner: object) -> Retries[Answer]:
        """This memory for the run `owner` is (the gate's mode): emptied when the run changed, since a
        retry repeats a request of its own run (the dry run's retries are not the real run's)."""
        if owner is not self.owner:
            self.owner, self.first = owner, {}
        return self

    async def answer(self, key: tuple[str, str], sent: str, first: Callable[[], Awaitable[Answer]]) -> Answer:
        """The answer to the request `key` names: the first one's (awaited while it is still running)
        when it was seen before, else `first()`'s. `KeyReused` when the key came with another request
        (`sent`, its `fingerprint`)."""
        seen = self.first.get(key)
        if seen is None:
            task = asyncio.ensure_future(first())
            self.first[key] = (sent, task)
        else:
            earlier, task = seen
            if earlier != sent:
                raise KeyReused(
                    f"its {key[0]} came with another request earlier in this run; a retry must repeat "
                    "the request exactly"
                )
        # Shielded: a client that gives up on one request does not cancel the answer its retry awaits.
        return await asyncio.shield(task)
