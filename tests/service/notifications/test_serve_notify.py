"""`reviewer serve --notify`: the real service, its delivery threads and a real receiver on loopback.

A SIGKILL between an event's commit and its delivery only delays it; two replicas on one PostgreSQL
deliver each event once; a hanging receiver never holds up the queue's requests; a wrong URL or a
missing secret stops `serve` with one line.
"""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from reviewer.service.notifications.signature import verify
from tests.forked_commands import run_reviewer
from tests.queue_harness import Service, claimed_report, decide, reviewer_command, submit, unique_id
from tests.service.notifications.receiver import Receiver
from tests.service.ports import free_port
from tests.service.postgres import Cluster

SECRET = "a-secret-only-the-receiver-knows"


@pytest.fixture
def secret_file(tmp_path: Path) -> Path:
    path = tmp_path / "notify-secret"
    path.write_text(SECRET + "\n")
    path.chmod(0o600)
    return path


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


def notifying(db: Path | str, log: Path, receiver: Receiver, secret_file: Path, *extra: str) -> Service:
    return Service(
        db=db,
        log_path=log,
        serve_args=("--notify", receiver.url, "--notify-secret-file", str(secret_file), *extra),
    )


def wait_until(condition: object, what: str, timeout: float = 20) -> None:
    deadline = time.monotonic() + timeout
    while not condition():  # type: ignore[operator]
        if time.monotonic() > deadline:
            raise AssertionError(f"{what} did not happen within {timeout} s")
        time.sleep(0.05)


def outbox(db: Path) -> list[tuple[str, str, int]]:
    with sqlite3.connect(db) as raw:
        return raw.execute("SELECT event_id, state, attempts FROM outbox ORDER BY id").fetchall()


def test_a_service_killed_between_the_commit_and_the_delivery_delivers_after_restart(
    tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    receiver.stop()  # the receiver is down: the event is committed, and not delivered
    db = tmp_path / "queue.sqlite3"
    service = notifying(db, tmp_path / "service.log", receiver, secret_file)
    service.start()
    agent = service.client(service.token("agent", "agent"))
    submit(agent, "killed-0001")
    wait_until(lambda: outbox(db) and outbox(db)[0][2] >= 1, "a first, refused attempt")
    service.kill()
    ((event_id, state, _attempts),) = outbox(db)
    assert state == "pending"
    receiver.start()
    service.start()
    (arrival,) = receiver.wait_for(1)
    assert arrival.delivery == event_id and arrival.event == "proposal.waiting"
    assert arrival.document["open"] == "reviewer review killed-0001"
    assert verify(arrival.headers["reviewer-signature"], arrival.body, SECRET.encode(), time.time())
    wait_until(lambda: outbox(db)[0][1] == "delivered", "the delivery recorded")
    listing = run_reviewer(
        reviewer_command("notify", "list", "--db", str(db)), capture_output=True, text=True, check=True
    ).stdout
    assert event_id in listing and "delivered" in listing and "killed-0001" in listing
    agent.close()
    service.stop()


def test_a_hanging_receiver_never_holds_up_the_queue_and_an_unknown_outcome_is_notified(
    tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    hung = Receiver(mode="hang").start()
    db = tmp_path / "queue.sqlite3"
    service = notifying(
        db, tmp_path / "service.log", receiver, secret_file, "--notify", hung.url, "--claim-lease", "1"
    )
    service.start()
    try:
        agent = service.client(service.token("agent", "agent"))
        alice = service.client(service.token("alice", "reviewer"))
        digest = submit(agent, "lost-run")["plan_sha256"]
        assert hung.hanging.wait(20)
        assert decide(alice, "lost-run", 1, digest).status_code == 201  # while a delivery hangs
        claimed_report(agent, "lost-run", 1, digest)  # claimed, and never reported
        arrived = receiver.wait_for(3)
        assert [arrival.event for arrival in arrived] == [
            "proposal.waiting",
            "proposal.decided",
            "run.unknown",
        ]
        assert arrived[-1].document["claimed_by"] == "agent"
        agent.close()
        alice.close()
    finally:
        hung.stop()
        service.stop()


def test_a_run_reported_with_notifications_on_is_stored_and_its_end_is_sent(
    tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    db = tmp_path / "queue.sqlite3"
    service = notifying(db, tmp_path / "service.log", receiver, secret_file)
    service.start()
    try:
        agent = service.client(service.token("agent", "agent"))
        alice = service.client(service.token("alice", "reviewer"))
        digest = submit(agent, "reported")["plan_sha256"]
        assert decide(alice, "reported", 1, digest).status_code == 201
        calls = [{"seq": 1, "outcome": {"status": "ok"}}, {"seq": 2, "outcome": {"status": "ok"}}]
        report = claimed_report(agent, "reported", 1, digest, ended="completed", calls=calls)
        stored = agent.post("/v1/proposals/reported/executions", json=report)
        assert stored.status_code == 201, stored.text
        assert agent.get("/v1/proposals/reported/decision").json()["state"] == "executed"
        (run,) = agent.get("/v1/proposals/reported/executions").json()["executions"]
        assert run["claim_id"] == report["claim_id"] and len(run["calls"]) == 2
        ended = receiver.wait_for(3)[-1]
        assert ended.event == "run.ended"
        assert (ended.document["ended"], ended.document["calls_sent"], ended.document["calls_kept"]) == (
            "completed",
            2,
            2,
        )
        agent.close()
        alice.close()
    finally:
        service.stop()


def test_a_target_given_events_gets_only_those_and_the_start_up_line_names_them(
    tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    pager = Receiver().start()
    db = tmp_path / "queue.sqlite3"
    service = notifying(
        db,
        tmp_path / "service.log",
        receiver,
        secret_file,
        *("--notify", f"run.unknown={pager.url}", "--claim-lease", "1"),
    )
    service.start()
    try:
        agent = service.client(service.token("agent", "agent"))
        alice = service.client(service.token("alice", "reviewer"))
        digest = submit(agent, "paged")["plan_sha256"]
        assert decide(alice, "paged", 1, digest).status_code == 201
        claimed_report(agent, "paged", 1, digest)  # claimed, and never reported
        # The pager's one delivery comes after whatever was written for it before (one row at a time,
        # oldest first), so nothing else can still be on its way to it.
        (paged,) = pager.wait_for(1)
        assert paged.event == "run.unknown"
        assert [arrival.event for arrival in receiver.wait_for(3)] == [
            "proposal.waiting",
            "proposal.decided",
            "run.unknown",
        ]
        with sqlite3.connect(db) as raw:
            rows = raw.execute("SELECT target, event FROM outbox").fetchall()
        pager_target = f"http://127.0.0.1:{pager.port} #"
        assert [event for target, event in rows if target.startswith(pager_target)] == ["run.unknown"]
        lines = service.log().splitlines()
        (pager_line,) = [line for line in lines if f"notifying http://127.0.0.1:{pager.port} #" in line]
        assert pager_line.endswith("only run.unknown"), pager_line
        (every_line,) = [line for line in lines if f"notifying http://127.0.0.1:{receiver.port} #" in line]
        assert every_line.endswith("every event"), every_line
        agent.close()
        alice.close()
    finally:
        pager.stop()
        service.stop()


def test_no_log_line_shows_a_notify_urls_secret_parts(
    tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    pytest.importorskip("apprise", reason="the notify extra: pip install 'reviewer-gate[notify]'")
    webhook = f"{receiver.url}/path-token-0123?key=query-token-4567"
    chat = f"json://127.0.0.1:{receiver.port}/chat-token-89ab"
    service = Service(
        db=tmp_path / "queue.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--notify", webhook, "--notify", chat, "--notify-secret-file", str(secret_file)),
    )
    service.start()
    try:
        agent = service.client(service.token("agent", "agent"))
        submit(agent, "hidden-url")
        assert sorted(arrival.path for arrival in receiver.wait_for(2)) == [
            "/chat-token-89ab",
            "/hook/path-token-0123?key=query-token-4567",
        ]
        agent.close()
    finally:
        service.stop()
    log = service.log()
    webhook_name = f"http://127.0.0.1:{receiver.port} #"
    assert f"notifying {webhook_name}" in log and "notifying json:// #" in log
    assert f"HTTP Request: POST {webhook_name}" in log, "httpx's own line is there, with the name only"
    for secret in ("path-token-0123", "query-token-4567", "chat-token-89ab", SECRET):
        assert secret not in log


def test_two_replicas_on_postgresql_deliver_each_event_once(
    postgres_cluster: Cluster, tmp_path: Path, receiver: Receiver, secret_file: Path
) -> None:
    url = postgres_cluster.fresh_database()
    first = notifying(url, tmp_path / "first.log", receiver, secret_file)
    second = notifying(url, tmp_path / "second.log", receiver, secret_file)
    first.start()
    second.start()
    try:
        token = first.token("agent", "agent")
        clients = [first.client(token), second.client(token)]
        ids = [unique_id("both") for _ in range(20)]
        for number, proposal_id in enumerate(ids):
            submit(clients[number % 2], proposal_id)
        receiver.wait_for(20)
        import psycopg

        def all_delivered() -> bool:
            with psycopg.connect(url) as raw:
                states = raw.execute("SELECT state FROM outbox").fetchall()
            return len(states) == 20 and {state for (state,) in states} == {"delivered"}

        wait_until(all_delivered, "every row marked delivered")
        accepted = receiver.accepted()
        assert len(accepted) == 20, "each event delivered by one replica"
        assert sorted(arrival.document["proposal_id"] for arrival in accepted) == sorted(ids)
        assert len({arrival.delivery for arrival in accepted}) == 20
        for client in clients:
            client.close()
    finally:
        first.stop()
        second.stop()


@pytest.mark.parametrize(
    ("notify", "says"),
    [
        ("http://192.0.2.1/hook", "plain http to another host"),
        ("not a url", "is not a URL"),
        ("nosuchservice://x", "not a URL Apprise reads"),
        ("https://user:pw@hooks.example/x", "a user or password"),
    ],
)
def test_a_wrong_notify_url_stops_serve_with_one_line_naming_it(
    tmp_path: Path, secret_file: Path, notify: str, says: str
) -> None:
    result = run_reviewer(
        reviewer_command(
            "serve",
            *("--db", str(tmp_path / "q.sqlite3"), "--port", str(free_port())),
            *("--notify", notify, "--notify-secret-file", str(secret_file)),
        ),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0 and says in result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("reviewer serve: --notify")
    assert "pw" not in result.stderr
    assert not (tmp_path / "q.sqlite3").exists(), "nothing was opened"


def test_a_missing_or_readable_secret_file_stops_serve_with_one_line(
    tmp_path: Path, secret_file: Path
) -> None:
    def serve(*extra: str) -> subprocess.CompletedProcess[str]:
        return run_reviewer(
            reviewer_command(
                "serve",
                "--db",
                str(tmp_path / "q.sqlite3"),
                "--port",
                str(free_port()),
                "--notify",
                "https://h.example/x",
                *extra,
            ),
            capture_output=True,
            text=True,
            timeout=30,
        )

    missing = serve()
    assert missing.returncode != 0 and "needs --notify-secret-file" in missing.stderr
    assert missing.stderr.count("\n") == 1
    absent = serve("--notify-secret-file", str(tmp_path / "nope"))
    assert "--notify-secret-file" in absent.stderr and "No such file" in absent.stderr
    secret_file.chmod(0o644)
    readable = serve("--notify-secret-file", str(secret_file))
    assert "can be read by other users" in readable.stderr and SECRET not in readable.stderr
