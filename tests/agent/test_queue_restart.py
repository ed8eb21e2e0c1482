"""An agent waits through a queue that is stopped and started again on the same database: `Gate.run`
submits, the queue's process is stopped, the agent keeps asking with backoff (saying once that the
queue is away), the queue comes back, a reviewer approves, and the plan runs once."""

from __future__ import annotations

import asyncio
import itertools
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reviewer.agent import Gate
from reviewer.agent.waiting import Patience
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import ErrorBody
from reviewer.queue.refusals import QueueServerError, QueueUnreachable, UntrustedCertificate
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.helpers import received
from tests.queue_harness import Service, decide

BACKOFFS_BEFORE_RESTART = 3
"""Pauses the agent makes while the queue is away before the test starts it again: each follows a
poll the client gave up on after its own retries, so the queue is away for several seconds."""


@pytest.fixture(scope="module")
def restartable(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, dict[str, str]]]:
    """A queue of its own, which the test stops and starts again on the same file and port."""
    directory = tmp_path_factory.mktemp("restart")
    service = Service(db=directory / "queue.sqlite3", log_path=directory / "serve.log")
    service.start()
    tokens = service.tokens({"agent": "agent", "alice": "reviewer"})
    try:
        yield service, tokens
    finally:
        if service.process is not None:
            service.stop()


class Outage:
    """The agent's `Patience`, watched: the lines it says and the pauses it makes while the queue is away."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.pauses = 0
        self.away = threading.Event()
        self.long_enough = threading.Event()
        self.patience = Patience(say=self.said, sleep=self.pause, first_pause=0.2)

    def said(self, line: str) -> None:
        self.lines.append(line)
        self.away.set()

    async def pause(self, seconds: float) -> None:
        if self.patience.away_since is not None:
            self.pauses += 1
            if self.pauses >= BACKOFFS_BEFORE_RESTART:
                self.long_enough.set()
        await asyncio.sleep(seconds)


def approve_when_pending(service: Service, token: str, proposal_id: str) -> None:
    with service.client(token) as reviewer:
        for _ in range(2000):
            state = reviewer.get(f"/v1/proposals/{proposal_id}/decision")
            if state.status_code == 200 and state.json()["state"] == "pending":
                answer = decide(reviewer, proposal_id, state.json()["revision"], state.json()["plan_sha256"])
                assert answer.status_code == 201, answer.text
                return
            threading.Event().wait(0.05)
    raise AssertionError(f"{proposal_id} was never pending")


def wait_for_submission(service: Service, token: str, proposal_id: str) -> None:
    with service.client(token) as reviewer:
        for _ in range(2000):
            if reviewer.get(f"/v1/proposals/{proposal_id}/decision").status_code == 200:
                return
            threading.Event().wait(0.05)
    raise AssertionError(f"{proposal_id} was never submitted")


def test_a_gate_run_waits_while_the_queue_is_stopped_and_runs_its_plan_once_after_approval(
    restartable: tuple[Service, dict[str, str]], sample_api: RunningSampleApi
) -> None:
    service, tokens = restartable
    outage = Outage()
    proposal_id = f"restart-{uuid.uuid4().hex[:8]}"

    async def close_t1() -> None:
        await tools.update_ticket(id="t1", status="closed")

    async def scenario() -> None:
        async with Gate(
            api=sample_api.base_url,
            queue=service.url,
            token=tokens["agent"],
            poll_interval=0.05,
            decision_timeout=300,
            patience=outage.patience,
        ) as gate:
            running = asyncio.create_task(gate.run(close_t1, title="Close t1", proposal_id=proposal_id))
            await asyncio.to_thread(wait_for_submission, service, tokens["alice"], proposal_id)
            await asyncio.to_thread(service.stop)
            assert await asyncio.to_thread(outage.long_enough.wait, 120), "the agent gave up"
            assert not running.done(), "the agent is still waiting for its decision"
            await asyncio.to_thread(service.start)
            await asyncio.to_thread(approve_when_pending, service, tokens["alice"], proposal_id)
            result = await running
        result.raise_for_stop()

    asyncio.run(scenario())
    assert len(outage.lines) == 2, outage.lines
    assert f"is away (QueueUnreachable) while waiting for a decision on {proposal_id}" in outage.lines[0]
    assert f"the queue at {service.url} is back after " in outage.lines[1]
    assert [(entry["method"], entry["path"]) for entry in received(sample_api)] == [
        ("PATCH", "/v1/tickets/t1")
    ], "the approved plan ran once"
    assert sample_api.store.tickets["t1"]["status"] == "closed"


def test_patience_sends_again_only_while_the_queue_is_away_and_gives_up_at_the_deadline() -> None:
    """Under an injected clock: a refusal is raised at once; an outage is waited through with growing
    pauses and said once each way; one that outlasts the deadline raises its error, with a note."""
    now = itertools.count(0.0, 1.0)
    pauses: list[float] = []
    said: list[str] = []

    async def pause(seconds: float) -> None:
        pauses.append(seconds)

    patience = Patience(say=said.append, clock=lambda: next(now), sleep=pause, first_pause=1.0)
    away = QueueUnreachable("the queue at q did not answer")
    failed = QueueServerError(502, ErrorBody(error="http_error", message="bad gateway"))
    answers: Iterator[object] = iter([away, failed, away, "decided"])

    async def request() -> object:
        answer = next(answers)
        if isinstance(answer, Exception):
            raise answer
        return answer

    assert asyncio.run(patience.call(request, until=1000, what="waiting", where="q")) == "decided"
    assert pauses == [1.0, 2.0, 4.0]
    assert len(said) == 2 and "is away (QueueUnreachable) while waiting" in said[0]
    assert said[1].startswith("the queue at q is back after ")

    async def always_away() -> object:
        raise QueueUnreachable("the queue at q did not answer")

    with pytest.raises(QueueUnreachable) as gave_up:
        asyncio.run(patience.call(always_away, until=next(now) + 5, what="waiting", where="q"))
    assert "stayed away until the wait's deadline" in str(gave_up.value.__notes__)

    async def untrusted() -> object:
        raise UntrustedCertificate("self-signed")

    pauses.clear()
    with pytest.raises(UntrustedCertificate):
        asyncio.run(patience.call(untrusted, until=10**9, what="waiting", where="q"))
    assert pauses == [], "a certificate nobody trusts is not waited for"


def test_a_submission_whose_answer_was_lost_is_stored_once(tmp_path: Path) -> None:
    """The queue stores the revision and the answer is lost (a 502 from the proxy): sent again, the
    queue answers the stored record, and the proposal has one revision."""
    from reviewer.service.app import create_app
    from reviewer.service.auth import hash_token, mint_token

    app = create_app(tmp_path / "q.sqlite3")
    token = mint_token()
    app.state.store.create_token("agent", "agent", hash_token(token))
    inner = httpx.ASGITransport(app=app)
    posts = 0

    class LosesFirstAnswer(httpx.AsyncBaseTransport):
        async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
            nonlocal posts
            response = await inner.handle_async_request(request)
            if request.method == "POST":
                posts += 1
                if posts == 1:
                    await response.aread()
                    return httpx.Response(502, text="bad gateway")
            return response

    async def scenario() -> tuple[int, int]:
        async with Gate(
            queue=QueueClient("http://queue", token, transport=LosesFirstAnswer()),
            patience=Patience(say=lambda line: None, first_pause=0),
        ) as gate:
            recording = await gate.dry_run(_close_t1)
            answer = await gate.submit(gate.propose(recording, title="Close t1", proposal_id="lost-1"))
            record = await gate.queue.client.get_proposal("lost-1")
            return answer.revision, len(record.revisions)

    assert asyncio.run(scenario()) == (1, 1)
    assert posts == 2


async def _close_t1() -> None:
    await tools.update_ticket(id="t1", status="closed")


def test_a_queue_that_hangs_is_said_once_per_outage_while_the_wait_goes_on() -> None:
    """A loopback queue that reads requests and answers nothing (a paused database): the first try is
    still unanswered after the wait's silence (`reviewer run` waits 10 s; a fraction here), which is
    said once; the try times out and the next hangs too, said no more; once it answers, the queue is
    said to be back. A second outage is said again."""
    from reviewer.agent import QueueAgent
    from reviewer.agent.waiting import DEFAULT_SILENCE

    assert DEFAULT_SILENCE == 10.0 and Patience().silence == DEFAULT_SILENCE
    state = b'{"proposal_id": "p", "revision": 1, "plan_sha256": "' + b"a" * 64 + b'", "state": "pending"}'
    holds = [None, 0.4, 0.0, 0.4]  # forever (the client times out), then seconds before answering

    async def hung_queue(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while await reader.readuntil(b"\r\n\r\n"):
            hold = holds.pop(0)
            if hold is None:
                await asyncio.Event().wait()
            await asyncio.sleep(hold)
            head = (
                f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(state)}\r\n\r\n"
            )
            writer.write(head.encode() + state)
            await writer.drain()

    async def scenario() -> list[str]:
        said: list[str] = []
        server = await asyncio.start_server(hung_queue, "127.0.0.1", 0)
        url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        async with server, QueueClient(url, "token", retries=0, timeout=0.6) as client:
            agent = QueueAgent(client, patience=Patience(say=said.append, first_pause=0.01, silence=0.2))
            assert (await agent.state("p")).state == "pending"
            assert len(said) == 2, said
            assert (
                said[0]
                == f"the queue at {url} has not answered for 0.2 s while asking the state of p; still waiting"
            )
            assert said[1].startswith(f"the queue at {url} is back after ")
            await agent.state("p")  # answered at once: nothing said
            assert len(said) == 2, said
            await agent.state("p")  # another outage
            assert len(said) == 4 and "has not answered for 0.2 s" in said[2], said
        return said

    asyncio.run(scenario())
