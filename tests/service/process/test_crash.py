"""SIGKILL the service while submissions and approvals run: every acknowledged write survives once,
and so does its notification event (the service notifies a webhook receiver on loopback)."""

from __future__ import annotations

import random
import sqlite3
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import pytest

from reviewer.service.store import events
from reviewer.service.store.opener import open_store
from reviewer.trail import merkle
from tests.queue_harness import Service, body, decide, make_actors, proposal, start_service
from tests.service.notifications.receiver import Receiver

KILLS = 6


@pytest.mark.slow
@pytest.mark.timeout(120)
def test_acknowledged_writes_survive_sigkill(tmp_path: Path) -> None:
    receiver = Receiver().start()
    secret = tmp_path / "notify-secret"
    secret.write_text("a-secret-only-the-receiver-knows\n")
    secret.chmod(0o600)
    service = start_service(tmp_path, "--notify", receiver.url, "--notify-secret-file", str(secret))
    actors = make_actors(service)
    acknowledged_submissions: list[tuple[str, int, str]] = []
    acknowledged_decisions: list[tuple[str, int, str]] = []
    record = threading.Lock()
    randomness = random.Random(20261015)

    def write(writer: int, stop: threading.Event) -> None:
        """Submit, re-plan and approve until stopped; note each write only once it is acknowledged."""
        number = 0
        while not stop.is_set():
            number += 1
            proposal_id = f"crash-{writer}-{service.port}-{number}-{time.monotonic_ns()}"
            try:
                for revision in (1, 2):
                    sent = actors.agent.post("/v1/proposals", content=body(proposal(proposal_id, revision)))
                    if sent.status_code != 201:
                        return
                    digest = sent.json()["plan_sha256"]
                    with record:
                        acknowledged_submissions.append((proposal_id, revision, digest))
                reviewer = actors.alice if writer % 2 else actors.bob
                decided = decide(reviewer, proposal_id, 2, digest)
                if decided.status_code == 201:
                    with record:
                        acknowledged_decisions.append((proposal_id, 2, decided.json()["decided_by"]))
            except httpx.TransportError:
                return

    try:
        for _ in range(KILLS):
            stop = threading.Event()
            writers = [threading.Thread(target=write, args=(index, stop)) for index in range(3)]
            for thread in writers:
                thread.start()
            # Killed after a random number of acknowledged writes, the writers still writing: the
            # moment is a count of writes, not a time, so a fast and a loaded machine test alike.
            target = len(acknowledged_submissions) + randomness.randint(5, 40)
            deadline = time.monotonic() + 60
            while len(acknowledged_submissions) < target and time.monotonic() < deadline:
                time.sleep(0.005)
            service.kill()
            stop.set()
            for thread in writers:
                thread.join(30)
            service.start()
        assert len(acknowledged_submissions) > 20, "the test did too little to prove anything"
        check_survivors(service, actors.alice, acknowledged_submissions, acknowledged_decisions)
    finally:
        actors.close()
        if service.process is not None:
            service.stop()
        receiver.stop()
    with sqlite3.connect(service.db) as db:
        assert db.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    check_events(service.db, acknowledged_submissions, acknowledged_decisions)


def check_survivors(
    service: Service,
    reviewer: httpx.Client,
    submissions: list[tuple[str, int, str]],
    decisions: list[tuple[str, int, str]],
) -> None:
    for proposal_id, revision, digest in submissions:
        record = reviewer.get(f"/v1/proposals/{proposal_id}").json()
        stored = {item["revision"]: item["plan_sha256"] for item in record["revisions"]}
        assert stored.get(revision) == digest, (proposal_id, revision)
        events = Counter((event["event"], event["revision"]) for event in record["history"])
        assert events[("submitted", revision)] == 1
    for proposal_id, revision, decided_by in decisions:
        record = reviewer.get(f"/v1/proposals/{proposal_id}").json()
        approvals = [event for event in record["history"] if event["event"] == "approved"]
        assert [(event["revision"], event["actor"]) for event in approvals] == [(revision, decided_by)]
        assert record["latest"]["state"] == "approved"
    with sqlite3.connect(service.db) as db:
        duplicated = db.execute(
            "SELECT count(*) FROM (SELECT proposal_id, revision, event FROM trail "
            "GROUP BY proposal_id, revision, event HAVING count(*) > 1)"
        ).fetchone()[0]
        assert duplicated == 0
        trail = [row[0] for row in db.execute("SELECT seq FROM trail ORDER BY seq")]
        logged = [row[0] for row in db.execute("SELECT seq FROM trail_log ORDER BY leaf_index")]
        assert logged == trail, "every trail event is one leaf of the log, in order, through every kill"
    check_log(service.db)


def check_log(db: Path | str) -> None:
    """The log's stored subtree hashes make the root its leaves make: no kill left a half-written tree."""
    store = open_store(db, clock=time.time, pending_ttl=60, approval_ttl=60, create=False)
    try:
        head = store.trail_head()
        tree = merkle.CompactTree()
        for _, leaf_hash, content in store.trail_entries(0, head.size):
            assert tree.append(content) == leaf_hash
    finally:
        store.close()
    assert tree.root() == head.root


def check_events(
    db: Path | str, submissions: list[tuple[str, int, str]], decisions: list[tuple[str, int, str]]
) -> None:
    """An event in the outbox for every acknowledged submission and decision: written in the write's
    own transaction, it survives the kill whenever the write does."""
    with sqlite3.connect(db) as raw:
        written = {row[0] for row in raw.execute("SELECT event_key FROM outbox")}
    expected = [events.event_key("proposal.waiting", pid, revision) for pid, revision, _ in submissions]
    expected += [events.event_key("proposal.decided", pid, revision) for pid, revision, _ in decisions]
    missing = [key for key in expected if key not in written]
    assert not missing, f"{len(missing)} acknowledged writes have no event, e.g. {missing[:3]}"
