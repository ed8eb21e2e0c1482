"""Request changes against the real service: the decision closes its revision as `changes_requested`, with
the reviewer's reason and name; nothing can claim it; the agent's next revision is reviewed and runs; a
webhook receiver gets `proposal.changes_requested` once."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.queue_harness import Service, body, claim, decide, proposal, submit
from tests.service.notifications.receiver import Receiver


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


def test_changes_requested_closes_revision_1_and_revision_2_is_approved_and_claimed(
    tmp_path: Path, receiver: Receiver
) -> None:
    secret = tmp_path / "notify-secret"
    secret.write_text("a-secret-only-the-receiver-knows\n")
    secret.chmod(0o600)
    service = Service(
        db=tmp_path / "queue.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--notify", receiver.url, "--notify-secret-file", str(secret)),
    )
    service.start()
    try:
        agent = service.client(service.token("agent", "agent"))
        alice = service.client(service.token("alice", "reviewer"))
        first = submit(agent, "merge", 1)["plan_sha256"]

        unexplained = decide(alice, "merge", 1, first, "request_changes", reason="  ")
        assert unexplained.status_code == 422, unexplained.text
        assert "reason" in unexplained.json()["message"]
        assert agent.get("/v1/proposals/merge/decision").json()["state"] == "pending"

        key = "ask-once"
        asked = decide(alice, "merge", 1, first, "request_changes", key=key, reason="keep t3 open")
        assert asked.status_code == 201, asked.text
        again = decide(alice, "merge", 1, first, "request_changes", key=key, reason="keep t3 open")
        assert again.json() == asked.json(), "a retry answers the first answer and decides nothing new"
        state = agent.get("/v1/proposals/merge/decision").json()
        assert (state["state"], state["decided_by"], state["reason"]) == (
            "changes_requested",
            "alice",
            "keep t3 open",
        )
        assert state.get("expires_at") is None

        refused = claim(agent, "merge", 1, first)
        assert refused.status_code == 409
        assert refused.json()["state"] == "changes_requested"
        assert "alice asked for changes (keep t3 open)" in refused.json()["message"]
        late = decide(alice, "merge", 1, first, "approve")
        assert late.status_code == 409 and late.json()["state"] == "changes_requested"

        second = submit(agent, "merge", 2, calls=1)["plan_sha256"]
        assert agent.get("/v1/proposals/merge/decision").json()["state"] == "pending"
        assert decide(alice, "merge", 2, second, "approve").json()["state"] == "approved"
        assert claim(agent, "merge", 2, second).status_code == 201

        record = alice.get("/v1/proposals/merge").json()
        assert [(event["event"], event["revision"], event.get("reason")) for event in record["history"]] == [
            ("submitted", 1, None),
            ("changes_requested", 1, "keep t3 open"),
            ("submitted", 2, None),
            ("approved", 2, None),
            ("claimed", 2, None),
        ]
        listed = alice.get("/v1/proposals", params={"state": "changes_requested"}).json()["proposals"]
        assert listed == [], "the proposal moved on to revision 2"

        arrived = receiver.wait_for(4)
        assert [arrival.event for arrival in arrived] == [
            "proposal.waiting",
            "proposal.changes_requested",
            "proposal.waiting",
            "proposal.decided",
        ]
        changes = arrived[1].document
        assert (changes["revision"], changes["decided_by"], changes["reason"], changes["decision"]) == (
            1,
            "alice",
            "keep t3 open",
            "request_changes",
        )
        agent.close()
        alice.close()
    finally:
        service.stop()
    assert [arrival.event for arrival in receiver.accepted()].count("proposal.changes_requested") == 1


def test_the_queue_lists_a_revision_whose_changes_were_requested_until_the_next_one_arrives(
    tmp_path: Path,
) -> None:
    service = Service(db=tmp_path / "queue.sqlite3", log_path=tmp_path / "service.log")
    service.start()
    try:
        agent = service.client(service.token("agent", "agent"))
        alice = service.client(service.token("alice", "reviewer"))
        digest = submit(agent, "waiting-for-rev-2", 1)["plan_sha256"]
        decide(alice, "waiting-for-rev-2", 1, digest, "request_changes", reason="smaller, please")
        listed = alice.get("/v1/proposals", params={"state": "changes_requested"}).json()["proposals"]
        assert [(item["proposal_id"], item["state"], item["decided_by"]) for item in listed] == [
            ("waiting-for-rev-2", "changes_requested", "alice")
        ]
        again = agent.post("/v1/proposals", content=body(proposal("waiting-for-rev-2", 1)))
        assert (again.status_code, again.json()["state"]) == (200, "changes_requested")
        agent.close()
        alice.close()
    finally:
        service.stop()
