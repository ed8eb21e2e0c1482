"""The app's decider signs first and sends nothing when it cannot; its words for a quorum."""

from __future__ import annotations

import asyncio
from pathlib import Path

import httpx

from reviewer.queue.client import QueueClient
from reviewer.queue.messages import DecisionState
from reviewer.signing.sshsig import AgentSigner
from reviewer.tui.model.queue_source import QueueDecider
from reviewer.tui.model.sources import QueueItem
from tests.signing.ssh import make_key
from tests.tui.live.fake_queue import FakeQueue


def test_no_agent_means_no_decision_is_sent(tmp_path: Path) -> None:
    fake = FakeQueue()
    fake.add("p-1")
    sent: list[str] = []

    def answer(request: httpx.Request) -> httpx.Response:
        sent.append(request.url.path)
        return fake.answer(request)

    alice = make_key(tmp_path, "alice")
    client = QueueClient("http://queue.test", "token", transport=httpx.MockTransport(answer))
    decider = QueueDecider(client, "reviewer login", AgentSigner(alice.public, {}))
    item = QueueItem("p-1", "pending")

    async def scenario() -> None:
        outcome = await decider.decide(item, 1, fake.proposals["p-1"].digest(1), "approve", "")
        assert not outcome.sent and outcome.message.startswith("not sent: no ssh-agent")
        await client.aclose()

    asyncio.run(scenario())
    assert not any(path.endswith("/decisions") for path in sent)
    assert fake.proposals["p-1"].state == "pending"


def test_state_words_show_the_quorum_while_pending() -> None:
    item = QueueItem("p-1", "pending")
    state = DecisionState(
        proposal_id="p-1",
        revision=1,
        plan_sha256="a" * 64,
        state="pending",
        approvals=["bob"],
        approvals_required=2,
    )
    item.take_state(state)
    assert item.state_words() == "pending · 1 of 2 approvals (bob)"
    item.take_state(state.model_copy(update={"approvals": [], "approvals_required": 1}))
    assert item.state_words() == "pending"
    item.take_state(state.model_copy(update={"state": "approved", "decided_by": "bob, carol"}))
    assert item.state_words() == "approved by bob, carol"
