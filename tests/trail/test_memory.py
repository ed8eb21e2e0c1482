"""What an executor remembers of a queue's trail, against a queue played by `httpx.MockTransport`:
the refusals the real queue cannot easily be made to give (another key, a memory file that is not
one), and a memory that never goes back to an older checkpoint."""

from __future__ import annotations

import asyncio
import base64
import json
from pathlib import Path

import httpx
import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reviewer.queue.client import QueueClient
from reviewer.trail import checkpoint, merkle
from reviewer.trail.memory import TrailRefused, check_trail, memory_file

URL = "http://queue.test"


class Log:
    """A queue's log of `size` leaves, answering the checkpoint route as the service does."""

    def __init__(self, key: Ed25519PrivateKey, size: int) -> None:
        self.key, self.size = key, size

    def root(self, size: int) -> bytes:
        tree = merkle.CompactTree()
        for index in range(size):
            tree.append(b"leaf %d" % index)
        return tree.root()

    def handle(self, request: httpx.Request) -> httpx.Response:
        since = request.url.params.get("since")
        answer = {
            "checkpoint": checkpoint.sign(self.key, self.size, self.root(self.size)).text,
            "public_key": checkpoint.openssh_public(self.key.public_key()),
            "size": self.size,
        }
        if since is not None and 0 < int(since) <= self.size:
            leaves = [merkle.leaf_hash(b"leaf %d" % index) for index in range(self.size)]
            stored = {}
            for level in range(self.size.bit_length()):
                for position in range(self.size >> level):
                    part = merkle.CompactTree()
                    for hashed in leaves[position << level : (position + 1) << level]:
                        part.append_hash(hashed)
                    stored[(level, position)] = part.root()
            ranges = merkle.consistency_ranges(int(since), self.size)
            answer["consistency"] = [
                base64.b64encode(h).decode() for h in merkle.proof_hashes(ranges, lambda wanted: stored)
            ]
        return httpx.Response(200, json=answer)


def seen(log: Log, memory: Path) -> int:
    async def check() -> int:
        async with QueueClient(URL, "token", transport=httpx.MockTransport(log.handle), retries=0) as client:
            found = await check_trail(client, memory)
        assert found is not None
        return found.size

    return asyncio.run(check())


def test_the_memory_grows_with_the_log_and_is_kept_private(tmp_path: Path) -> None:
    key = Ed25519PrivateKey.generate()
    assert [seen(Log(key, size), tmp_path) for size in (3, 3, 7, 12)] == [3, 3, 7, 12]
    kept = memory_file(URL, tmp_path)
    assert kept.stat().st_mode & 0o777 == 0o600
    assert json.loads(kept.read_text())["checkpoint"].split("\n")[1] == "12"


def test_a_queue_that_signs_with_another_key_is_refused(tmp_path: Path) -> None:
    seen(Log(Ed25519PrivateKey.generate(), 5), tmp_path)
    with pytest.raises(TrailRefused, match="another key than before"):
        seen(Log(Ed25519PrivateKey.generate(), 6), tmp_path)


def test_a_memory_file_that_is_not_one_is_refused_saying_what_to_do(tmp_path: Path) -> None:
    memory_file(URL, tmp_path).write_text("{not json")
    with pytest.raises(TrailRefused, match="restore or remove it"):
        seen(Log(Ed25519PrivateKey.generate(), 5), tmp_path)
