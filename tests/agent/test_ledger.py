"""The executor's ledger: an approval recorded once, on disk, and never again, even by racing processes."""

from __future__ import annotations

import asyncio
import json
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from reviewer.agent import AlreadyRun, Ledger, LedgerError, LedgerRequired, QueueAgent
from reviewer.queue.client import QueueClient
from reviewer.signing.allowed_signers import AllowedSigners

DIGEST = "5be1" + "0" * 60


def test_an_approval_is_recorded_once_and_refused_after(tmp_path: Path) -> None:
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.require_unclaimed("p-1", 1, DIGEST)
    ledger.claim("p-1", 1, DIGEST)
    with pytest.raises(AlreadyRun, match="p-1 revision 1 may not run"):
        ledger.claim("p-1", 1, DIGEST)
    with pytest.raises(AlreadyRun):
        Ledger(tmp_path / "ledger.jsonl").require_unclaimed("p-1", 1, DIGEST)
    ledger.claim("p-1", 2, DIGEST)  # another revision is another approval
    assert [entry.approval for entry in ledger.entries()] == [("p-1", 1, DIGEST), ("p-1", 2, DIGEST)]
    assert stat.S_IMODE((tmp_path / "ledger.jsonl").stat().st_mode) == 0o600


def test_a_last_line_torn_by_a_crash_is_dropped_and_the_ledger_goes_on(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    Ledger(path).claim("p-1", 1, DIGEST)
    with path.open("ab") as file:
        file.write(b'{"claimed_at": "2026-')
    ledger = Ledger(path)
    assert [entry.proposal_id for entry in ledger.entries()] == ["p-1"]
    ledger.claim("p-2", 1, DIGEST)
    assert [json.loads(line)["proposal_id"] for line in path.read_text().splitlines()] == ["p-1", "p-2"]


def test_a_ledger_that_does_not_read_stops_everything(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    path.write_text('{"proposal_id": "p-1"}\n')
    with pytest.raises(LedgerError, match="line 1 does not read"):
        Ledger(path).claim("p-2", 1, DIGEST)


def test_racing_processes_record_an_approval_once(tmp_path: Path) -> None:
    path = tmp_path / "ledger.jsonl"
    script = (
        "import sys\n"
        "from reviewer.agent import AlreadyRun, Ledger\n"
        "sys.stdin.read()\n"  # every process waits here until all are started
        "try:\n"
        f"    Ledger({str(path)!r}).claim('p-1', 1, {DIGEST!r})\n"
        "except AlreadyRun:\n"
        "    print('refused')\n"
        "else:\n"
        "    print('claimed')\n"
    )
    racers = [
        subprocess.Popen(
            [sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
        )
        for _ in range(4)
    ]
    for racer in racers:
        assert racer.stdin is not None
        racer.stdin.close()
    outcomes = []
    for racer in racers:
        assert racer.stdout is not None
        outcomes.append(racer.stdout.read().strip())
        racer.wait()
    outcomes.sort()
    assert outcomes == ["claimed", "refused", "refused", "refused"]
    assert len(Ledger(path).entries()) == 1


def test_an_executor_that_checks_signatures_must_name_its_ledger() -> None:
    with pytest.raises(LedgerRequired, match="ledger=PATH"):
        QueueAgent(QueueClient("http://127.0.0.1:9", "token"), allowed_signers=AllowedSigners())


def test_a_refusal_the_queue_cannot_hear_is_raised_all_the_same_with_a_note(tmp_path: Path) -> None:
    """The ledger refuses an approval it ran, and the queue is down: the executor tries to tell it for
    as long as its patience allows, then raises the ledger's refusal itself, noting that the queue
    does not know; nothing is claimed, and the queue's absence never hides why nothing ran."""
    from reviewer.agent import Patience, local_approval
    from reviewer.plan.proposal import parse_proposal, plan_sha256
    from tests.queue_harness import body
    from tests.queue_harness import proposal as proposal_document
    from tests.service.ports import free_port

    proposal = parse_proposal(body(proposal_document("ran-before")), "a test's plan")
    ledger = Ledger(tmp_path / "ledger.jsonl")
    ledger.claim(proposal.proposal_id, proposal.revision, plan_sha256(proposal))
    said: list[str] = []
    down = f"http://127.0.0.1:{free_port()}"

    async def refused() -> AlreadyRun:
        async with QueueClient(down, "token", retries=0) as queue:
            patience = Patience(say=said.append, first_pause=0.05)
            agent = QueueAgent(queue, ledger=ledger, patience=patience, outage_timeout=0.5)
            with pytest.raises(AlreadyRun) as raised:
                await agent.execute(local_approval(proposal), client=None)
        return raised.value

    error = asyncio.run(refused())
    assert "claimed exactly this signed approval" in str(error)
    assert error.__notes__[-1].startswith(f"the queue at {down} was not told of this refusal: ")
    assert f"is away (QueueUnreachable) while reporting the refusal of {proposal.proposal_id}" in said[0]
