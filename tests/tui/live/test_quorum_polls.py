"""A poll of a queue where many plans gather approvals: the list row names each plan's approvals so
far, so the app fetches the plans whose quorum moved and no other, against a real queue that asks
two approvals of every plan."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

import httpx

from reviewer.queue.config import Secret
from reviewer.service.store.opener import open_store
from reviewer.tui.model.queue_source import Fetched, QueueSource
from tests.queue_harness import decide, start_service, submit, unique_id

GATHERING = 50


class Counted(httpx.AsyncBaseTransport):
    """The real transport, each request's path kept: what a poll cost."""

    def __init__(self) -> None:
        self.real = httpx.AsyncHTTPTransport()
        self.paths: list[str] = []

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        self.paths.append(request.url.path)
        return await self.real.handle_async_request(request)

    async def aclose(self) -> None:
        await self.real.aclose()


async def polled(source: QueueSource, transport: Counted) -> tuple[list[str], list[Fetched]]:
    """One poll: the paths it requested and the proposals it fetched."""
    transport.paths.clear()
    fetched = [taken async for taken in source.poll() if isinstance(taken, Fetched)]
    return list(transport.paths), fetched


def test_a_list_change_costs_one_request_whatever_the_number_gathering_and_a_moved_quorum_is_fetched(
    tmp_path: Path,
) -> None:
    """Fifty plans fetched by alice's app, each approved by bob (one of two). A change of the list
    that moves no quorum (carol's token revoked: she approved nothing) is one request; bob's token
    revoked withdraws his fifty approvals, and the next poll fetches those fifty, each without it."""
    (tmp_path / "policy.toml").write_text("[default]\napprovals = 2\n")
    service = start_service(tmp_path, "--policy", str(tmp_path / "policy.toml"))
    try:
        roles = {"alice": "reviewer", "bob": "reviewer", "carol": "reviewer", "agent": "agent"}
        tokens = service.tokens(roles)
        with service.client(tokens["agent"]) as agent, service.client(tokens["bob"]) as bob:
            ids = []
            for _ in range(GATHERING):
                answer = submit(agent, unique_id("gathering"))
                ids.append(answer["proposal_id"])
                assert decide(bob, answer["proposal_id"], 1, answer["plan_sha256"]).status_code == 201

        async def scenario() -> None:
            transport = Counted()
            source = QueueSource(service.url, Secret(tokens["alice"]), transport=transport, list_wait=0.0)
            try:
                for proposal_id in ids:  # as opening each would
                    record = (await source.fetch(proposal_id)).record.latest
                    assert (record.state, record.approvals) == ("pending", ["bob"])
                await polled(source, transport)
                assert await polled(source, transport) == (["/v1/proposals"], [])
                assert source.polls_not_modified == 1, "nothing changed: a 304"
                revoke(service.db, "carol")
                paths, fetched = await polled(source, transport)
                assert source.polls_not_modified == 1, "the revocation changed the list"
                assert paths == ["/v1/proposals"], f"{len(paths)} requests for a list that moved no quorum"
                revoke(service.db, "bob")
                paths, fetched = await polled(source, transport)
                assert sorted(taken.record.proposal_id for taken in fetched) == sorted(ids)
                assert all(taken.record.latest.approvals == [] for taken in fetched)
                assert len(paths) == 1 + GATHERING, "the list, then each record (its revision held)"
            finally:
                await source.aclose()

        asyncio.run(scenario())
    finally:
        service.stop()


def revoke(db: Path, name: str) -> None:
    store = open_store(db, clock=time.time, pending_ttl=86400, approval_ttl=86400, create=False)
    try:
        assert store.revoke_token(name)
    finally:
        store.close()
