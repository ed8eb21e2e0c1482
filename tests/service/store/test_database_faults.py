"""The queue through its database's bad day, with real parts: PostgreSQL paused, stopped and
restarted under a serving queue, one replica's connection cut off mid-write by a proxy, SQLite on a
small disk that fills up, the clock stepped forward and back with libfaketime.

Each asserts what clients get (503 with Retry-After, never a hang nor a 500), that `/healthz` answers
throughout, that nothing acknowledged is lost or duplicated, and that the queue recovers by itself.
A request's bound is the client's timeout: a queue that hung would fail the test by it.
"""

from __future__ import annotations

import errno
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.queue_harness import (
    Service,
    body,
    decide,
    proposal,
    reviewer_command,
    start_together,
    submit,
)
from tests.service.cut_proxy import CutProxy
from tests.service.postgres import Cluster, start_cluster

BOUND = 15.0
"""Seconds a client waits for any answer: the queue promises one within 10 s."""
LIBFAKETIME = Path("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1")


@pytest.fixture
def own_cluster() -> Iterator[Cluster]:
    """A cluster of the test's own: pausing or stopping the suite's would fail other tests."""
    cluster = start_cluster()
    yield cluster
    cluster.resume()
    cluster.stop()


def ids_listed(client: httpx.Client) -> list[str]:
    response = client.get("/v1/proposals", timeout=BOUND)
    assert response.status_code == 200, response.text
    return [item["proposal_id"] for item in response.json()["proposals"]]


def assert_outage(response: httpx.Response, *causes: str) -> None:
    """A 503 naming one of `causes`, with a Retry-After."""
    assert response.status_code == 503, response.text
    assert response.json()["error"] == "database_unavailable"
    message = response.json()["message"]
    assert any(cause in message for cause in causes), message
    assert int(response.headers["retry-after"]) >= 1


def until_answered(request: Callable[[], httpx.Response], attempts: int = 20) -> httpx.Response:
    """The request again, honouring each 503's Retry-After, until it is answered otherwise."""
    for _ in range(attempts):
        response = request()
        if response.status_code != 503:
            return response
        time.sleep(float(response.headers.get("retry-after", "1")))
    raise AssertionError(f"still 503 after {attempts} tries: {response.text}")


def started(service: Service) -> Service:
    service.start()
    return service


def test_a_paused_postgresql_is_answered_as_an_outage_and_healthz_answers_throughout(
    own_cluster: Cluster, tmp_path: Path
) -> None:
    """SIGSTOP on every server process: connections stay open and nothing answers, so no timeout
    of PostgreSQL's can fire; the watchdog cuts each waiting transaction."""
    service = started(Service(db=own_cluster.fresh_database(), log_path=tmp_path / "service.log"))
    try:
        tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
        with service.client(tokens["alice"]) as alice, service.client(tokens["agent"]) as agent:
            submit(agent, "before-the-pause")
            own_cluster.pause()
            with ThreadPoolExecutor(2) as pool:
                listing = pool.submit(alice.get, "/v1/proposals", timeout=BOUND)
                submission = pool.submit(
                    agent.post, "/v1/proposals", content=body(proposal("during-the-pause")), timeout=BOUND
                )
                with httpx.Client(base_url=service.url, timeout=2) as probe:
                    health = probe.get("/healthz")  # while both requests wait on the database
                listed, submitted = listing.result(), submission.result()
                with httpx.Client(base_url=service.url, timeout=BOUND) as probe:
                    ready = probe.get("/readyz")
            own_cluster.resume()
            after = until_answered(
                lambda: agent.post("/v1/proposals", content=body(proposal("during-the-pause")))
            )
            assert after.status_code == 201, after.text
            assert sorted(ids_listed(alice)) == ["before-the-pause", "during-the-pause"]
    finally:
        service.stop()
    assert health.status_code == 200
    # a thread with a connection waits for its answer until the watchdog cuts it; one without waits
    # for a new connection until libpq's connect timeout
    assert_outage(listed, "did not answer within 8 s", "connection timeout expired")
    assert_outage(submitted, "did not answer within 8 s", "connection timeout expired")
    assert ready.status_code == 503
    assert "unavailable" in ready.json()["reason"]
    log = service.log()
    assert "Traceback" not in log
    assert 1 <= log.count("the queue's database is unavailable") <= 3, log


def test_a_stopped_postgresql_is_503_on_the_same_connection_and_a_restart_fails_nothing(
    own_cluster: Cluster, tmp_path: Path
) -> None:
    """Every thread's pooled connection is stale after the restart: each is noticed and replaced
    before it is used, so none of the next 40 requests fails."""
    service = started(Service(db=own_cluster.fresh_database(), log_path=tmp_path / "service.log"))
    try:
        tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
        with service.client(tokens["alice"]) as alice, service.client(tokens["agent"]) as agent:
            submit(agent, "acknowledged")
            with ThreadPoolExecutor(8) as pool:  # connections in many of the server's threads
                assert {r.status_code for r in pool.map(lambda _: alice.get("/v1/proposals"), range(24))} == {
                    200
                }
            own_cluster.stop_server()
            refused = [alice.get("/v1/proposals", timeout=BOUND) for _ in range(3)]
            refused.append(agent.post("/v1/proposals", content=body(proposal("while-down")), timeout=BOUND))
            own_cluster.start_server()
            with httpx.Client(base_url=service.url, timeout=BOUND) as probe:
                assert until_answered(lambda: probe.get("/readyz")).status_code == 200
            with ThreadPoolExecutor(8) as pool:
                after = list(pool.map(lambda _: alice.get("/v1/proposals", timeout=BOUND), range(40)))
            assert ids_listed(alice) == ["acknowledged"]
    finally:
        service.stop()
    for response in refused:
        assert response.status_code == 503, response.text
        assert response.json()["error"] in {"database_unavailable"}
        assert "retry-after" in response.headers
    assert [response.status_code for response in after] == [200] * 40
    log = service.log()
    assert "Traceback" not in log and " 500 " not in log


def test_a_replica_cut_off_while_it_holds_the_write_lock_stops_no_other(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    """The first replica reaches PostgreSQL through a proxy that carries its lock request and then
    nothing (a partition: no FIN, no RST). The server ends that transaction once it sat idle 4 s,
    so the second replica's write waits for it, and is answered within the client's bound."""
    url = postgres_cluster.fresh_database()
    proxy = CutProxy(postgres_cluster.port)
    proxy.start()
    proxied = url.replace(f":{postgres_cluster.port}/", f":{proxy.port}/")
    cut_off = Service(db=proxied, log_path=tmp_path / "cut.log")
    healthy = Service(db=url, log_path=tmp_path / "healthy.log")
    start_together(cut_off, healthy)
    try:
        tokens = healthy.tokens({"alice": "reviewer", "agent": "agent"})
        with cut_off.client(tokens["agent"]) as through_cut, healthy.client(tokens["agent"]) as beside:
            proxy.cut_after(b"pg_advisory_xact_lock")
            with ThreadPoolExecutor(1) as pool:
                held = pool.submit(
                    through_cut.post,
                    "/v1/proposals",
                    content=body(proposal("through-the-cut")),
                    timeout=BOUND,
                )
                for _ in range(200):
                    if proxy.cuts:
                        break
                    time.sleep(0.05)
                assert proxy.cuts == 1
                written = beside.post(
                    "/v1/proposals", content=body(proposal("beside-the-cut")), timeout=BOUND
                )
                lost = held.result()
            recovered = until_answered(
                lambda: through_cut.post("/v1/proposals", content=body(proposal("after-the-cut")))
            )
            with healthy.client(tokens["alice"]) as alice:
                listed = sorted(ids_listed(alice))
    finally:
        for replica in (cut_off, healthy):
            replica.stop()
        proxy.stop()
    assert written.status_code == 201, written.text
    assert_outage(lost, "did not answer within 8 s")
    assert recovered.status_code == 201, recovered.text
    assert listed == ["after-the-cut", "beside-the-cut"]  # the cut transaction wrote nothing


def test_sqlite_on_a_full_disk_refuses_writes_as_an_outage_and_takes_them_again(tmp_path: Path) -> None:
    """The queue's file on an 8 MB tmpfs of its own (a mount namespace of the service's); the test
    reaches it through /proc/PID/root and fills it up."""
    disk = tmp_path / "disk"
    disk.mkdir()
    mount = f'mount -t tmpfs -o size=8m tmpfs "{disk}" && exec "$0" "$@"'
    service = Service(
        db=disk / "queue.sqlite3",
        log_path=tmp_path / "service.log",
        prefix=("unshare", "--user", "--map-root-user", "--mount", "sh", "-c", mount),
    )
    service.start()
    assert service.process is not None
    inside = Path(f"/proc/{service.process.pid}/root") / disk.relative_to("/")
    try:
        tokens = {
            name: mint_inside(service.process.pid, disk / "queue.sqlite3", name, role)
            for name, role in (("alice", "reviewer"), ("agent", "agent"))
        }
        with service.client(tokens["alice"]) as alice, service.client(tokens["agent"]) as agent:
            submit(agent, "before-full")
            fill(inside / "fill")
            large = large_proposal("while-full")
            refused = agent.post("/v1/proposals", content=body(large), timeout=BOUND)
            with httpx.Client(base_url=service.url, timeout=BOUND) as probe:
                unready = probe.get("/readyz")
                listed_while_full = ids_listed(alice)
                (inside / "fill").unlink()
                ready = probe.get("/readyz")
            accepted = agent.post("/v1/proposals", content=body(large), timeout=BOUND)
            listed = sorted(ids_listed(alice))
    finally:
        service.stop()
    assert_outage(refused, "the disk holding the database file is full")
    assert unready.status_code == 503
    assert unready.json()["reason"] == (
        "the queue's database takes no writes: the disk holding the database file is full"
    )
    assert listed_while_full == ["before-full"]  # reads go on
    assert ready.status_code == 200, ready.text
    assert accepted.status_code == 201, accepted.text
    assert listed == ["before-full", "while-full"]
    assert "Traceback" not in service.log()


def mint_inside(pid: int, db: Path, name: str, role: str) -> str:
    """`reviewer token create` in the service's namespaces, where its file is (SQLite resolves the
    /proc/PID/root link to the test's own root, so the file is not reachable from outside)."""
    enter = ("nsenter", "--target", str(pid), "--user", "--mount", "--")
    command = reviewer_command("token", "create", "--db", str(db), "--name", name, "--role", role)
    minted = subprocess.run([*enter, *command], capture_output=True, text=True, check=False)
    assert minted.returncode == 0, minted.stderr
    return minted.stdout.strip()


def fill(path: Path) -> None:
    with path.open("wb") as filler:
        try:
            while True:
                filler.write(b"\0" * 65536)
                filler.flush()
        except OSError as full:
            assert full.errno == errno.ENOSPC


def large_proposal(proposal_id: str) -> dict[str, Any]:
    """A plan whose write needs more room than the write-ahead log already holds."""
    document = proposal(proposal_id)
    document["calls"][0]["args"]["note"] = "x" * 900_000
    return document


def faked_clock(clock_file: Path, offset: str) -> dict[str, str]:
    """A process whose wall clock is `offset` from the real one, read from `clock_file` at every call
    (the test moves it by writing the file); its monotonic clock is left alone, as a step of the
    system clock leaves it."""
    clock_file.write_text(offset)
    return {
        "LD_PRELOAD": str(LIBFAKETIME),
        "FAKETIME_TIMESTAMP_FILE": str(clock_file),
        "FAKETIME_NO_CACHE": "1",
        "DONT_FAKE_MONOTONIC": "1",
    }


needs_faketime = pytest.mark.skipif(
    not LIBFAKETIME.exists() and shutil.which("faketime") is None,
    reason="libfaketime is not installed (apt-get install faketime)",
)


@needs_faketime
def test_a_clock_stepped_back_moves_no_expiry_back(tmp_path: Path) -> None:
    clock = tmp_path / "clock"
    service = Service(
        db=tmp_path / "queue.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--pending-ttl", "3600"),
        env=faked_clock(clock, "+0"),
    )
    service.start()
    try:
        tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
        with service.client(tokens["alice"]) as alice, service.client(tokens["agent"]) as agent:
            digest = submit(agent, "stale")["plan_sha256"]
            clock.write_text("+2h")
            expired = alice.get("/v1/proposals/stale/decision").json()["state"]
            clock.write_text("-1h")  # three hours back: before the proposal was submitted
            after_step = alice.get("/v1/proposals/stale/decision").json()["state"]
            approving = decide(alice, "stale", 1, digest)
        service.stop()  # and started again on the clock set back: it kept the time it used
        service.start()
        with service.client(tokens["alice"]) as alice:
            after_restart = alice.get("/v1/proposals/stale/decision").json()["state"]
            approving_after_restart = decide(alice, "stale", 1, digest)
    finally:
        service.stop()
    assert (expired, after_step, after_restart) == ("expired", "expired", "expired")
    assert approving.status_code == 409, approving.text
    assert approving_after_restart.status_code == 409, approving_after_restart.text
    assert service.log().count("behind a time the queue already used") == 2


@needs_faketime
def test_replicas_with_skewed_clocks_answer_alike(postgres_cluster: Cluster, tmp_path: Path) -> None:
    """The second replica's clock runs two hours ahead; both read PostgreSQL's, so to both the plan
    submitted now is pending (an hour's TTL), and approving it on one lets it be claimed on the other."""
    url = postgres_cluster.fresh_database()
    ttl = ("--pending-ttl", "3600", "--approval-ttl", "3600")
    right = Service(db=url, log_path=tmp_path / "right.log", serve_args=ttl)
    ahead = Service(
        db=url, log_path=tmp_path / "ahead.log", serve_args=ttl, env=faked_clock(tmp_path / "clock", "+2h")
    )
    start_together(right, ahead)
    try:
        tokens = right.tokens({"alice": "reviewer", "agent": "agent"})
        with right.client(tokens["agent"]) as agent, ahead.client(tokens["alice"]) as alice:
            digest = submit(agent, "skewed")["plan_sha256"]
            state_ahead = alice.get("/v1/proposals/skewed/decision").json()["state"]
            approved = decide(alice, "skewed", 1, digest)
            claimed = agent.post(
                "/v1/proposals/skewed/claims",
                json={"revision": 1, "plan_sha256": digest},
                headers={"Idempotency-Key": "claim-skewed"},
            )
    finally:
        for replica in (right, ahead):
            replica.stop()
    assert state_ahead == "pending"
    assert approved.status_code == 201, approved.text
    assert claimed.status_code == 201, claimed.text
