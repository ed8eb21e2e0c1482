"""Long polls against real `reviewer serve` processes: a request with `?wait=` is answered by the
write that changes what it asks about, on its replica or another; a wait that runs out answers the
unchanged answer; a shutdown answers every waiter at once; and polls answered 304 are counted in
/metrics rather than logged one line each."""

from __future__ import annotations

import re
import signal
import time
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest

from tests.forked_commands import run_reviewer
from tests.queue_harness import (
    Actors,
    Service,
    decide,
    make_actors,
    reviewer_command,
    start_service,
    start_together,
    submit,
    unique_id,
)
from tests.service.postgres import Cluster

LONG = 30.0
"""A wait no test sees to its end: each is answered by a change long before."""


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors, httpx.Client]]:
    service = start_service(tmp_path_factory.mktemp("long-poll"))
    actors = make_actors(service)
    metrics = service.client(service.token("prometheus", "metrics"))
    yield service, actors, metrics
    metrics.close()
    actors.close()
    service.stop()


def figure(metrics: httpx.Client, line_start: str) -> float:
    """The value of the first /metrics line that starts with `line_start` (0 when there is none)."""
    text = metrics.get("/metrics").text
    found = re.search(rf"^{re.escape(line_start)} (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def until_waiting(metrics: httpx.Client, count: int) -> None:
    """Return once the replica holds `count` long polls: the request is parked, so a write after this
    wakes it rather than being seen by its first read."""
    for _ in range(2000):
        if figure(metrics, "reviewer_waiting_requests") >= count:
            return
    raise AssertionError(f"the replica never held {count} waiting requests")


def decision_of(client: httpx.Client, proposal_id: str, **headers: str) -> httpx.Response:
    return client.get(f"/v1/proposals/{proposal_id}/decision", params={"wait": LONG}, headers=headers)


def test_a_long_poll_is_answered_by_the_approval_it_waits_for(
    served: tuple[Service, Actors, httpx.Client],
) -> None:
    _, actors, metrics = served
    proposal_id = unique_id("long")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    pending = actors.agent.get(f"/v1/proposals/{proposal_id}/decision")
    assert pending.json()["state"] == "pending"
    with ThreadPoolExecutor(1) as pool:
        waiting: Future[httpx.Response] = pool.submit(
            decision_of, actors.agent, proposal_id, **{"If-None-Match": pending.headers["etag"]}
        )
        until_waiting(metrics, 1)
        assert not waiting.done()
        assert decide(actors.alice, proposal_id, 1, digest).status_code == 201
        answered = waiting.result(timeout=LONG)
    assert answered.status_code == 200
    assert (answered.json()["state"], answered.json()["decided_by"]) == ("approved", "alice")
    assert answered.headers["etag"] != pending.headers["etag"]
    assert figure(metrics, "reviewer_waiting_requests") == 0


def test_a_token_revoked_while_its_long_poll_is_held_is_refused_at_the_next_reading(
    served: tuple[Service, Actors, httpx.Client],
) -> None:
    service, actors, metrics = served
    token = service.token("short-lived-agent", "agent")
    with service.client(token) as agent:
        proposal_id = unique_id("revoked")
        digest = submit(agent, proposal_id)["plan_sha256"]
        etag = agent.get(f"/v1/proposals/{proposal_id}/decision").headers["etag"]
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(decision_of, agent, proposal_id, **{"If-None-Match": etag})
            until_waiting(metrics, 1)
            revoked = run_reviewer(
                reviewer_command("token", "revoke", "--db", str(service.db), "short-lived-agent"),
                capture_output=True,
                text=True,
                check=False,
            )
            assert revoked.returncode == 0, revoked.stderr
            assert decide(actors.alice, proposal_id, 1, digest).status_code == 201  # wakes the waiter
            answered = waiting.result(timeout=LONG)
    assert (answered.status_code, answered.json()["error"]) == (401, "unauthorized")


def test_a_wait_that_runs_out_answers_the_unchanged_state(
    served: tuple[Service, Actors, httpx.Client],
) -> None:
    _, actors, _ = served
    proposal_id = unique_id("unchanged")
    submit(actors.agent, proposal_id)
    path = f"/v1/proposals/{proposal_id}/decision"
    etag = actors.agent.get(path).headers["etag"]
    started = time.monotonic()
    held = actors.agent.get(path, params={"wait": 0.3}, headers={"If-None-Match": etag})
    assert time.monotonic() - started >= 0.3
    assert (held.status_code, held.headers["etag"], held.content) == (304, etag, b"")
    plain = actors.agent.get(path, params={"wait": 0.3})  # without If-None-Match: while pending
    assert (plain.status_code, plain.json()["state"], plain.headers["etag"]) == (200, "pending", etag)
    # An ETag that no longer matches is answered at once (well within a client's 5 s), whole.
    stale = actors.agent.get(path, params={"wait": LONG}, headers={"If-None-Match": '"old"'}, timeout=5)
    assert (stale.status_code, stale.json()["state"]) == (200, "pending")


def test_a_wait_that_is_no_number_of_seconds_is_refused_in_one_line(
    served: tuple[Service, Actors, httpx.Client],
) -> None:
    _, actors, _ = served
    proposal_id = unique_id("bad-wait")
    submit(actors.agent, proposal_id)
    for wait, words in (("-1", "greater than or equal to 0"), ("nan", "finite"), ("soon", "number")):
        refused = actors.agent.get(f"/v1/proposals/{proposal_id}/decision", params={"wait": wait})
        assert refused.status_code == 422
        assert refused.json()["error"] == "invalid"
        assert "wait" in refused.json()["message"] and words in refused.json()["message"]
        assert "\n" not in refused.json()["message"]
        listed = actors.alice.get("/v1/proposals", params={"wait": wait})
        assert (listed.status_code, listed.json()["error"]) == (422, "invalid")
        assert listed.json()["message"].startswith("$.query.wait: a number of seconds, 0 or more")


def test_the_apps_list_poll_waits_for_any_new_proposal(
    served: tuple[Service, Actors, httpx.Client],
) -> None:
    _, actors, metrics = served
    etag = actors.alice.get("/v1/proposals").headers["etag"]
    with ThreadPoolExecutor(1) as pool:
        waiting = pool.submit(
            actors.alice.get, "/v1/proposals", params={"wait": LONG}, headers={"If-None-Match": etag}
        )
        until_waiting(metrics, 1)
        proposal_id = unique_id("listed")
        submit(actors.agent, proposal_id)
        answered = waiting.result(timeout=LONG)
    assert answered.status_code == 200
    assert answered.json()["proposals"][0]["proposal_id"] == proposal_id
    ran_out = actors.alice.get(
        "/v1/proposals", params={"wait": 0.2}, headers={"If-None-Match": answered.headers["etag"]}
    )
    assert (ran_out.status_code, ran_out.headers["etag"]) == (304, answered.headers["etag"])


def test_polls_answered_304_are_counted_and_not_logged_unless_every_line_is_asked(
    served: tuple[Service, Actors, httpx.Client], tmp_path: Path
) -> None:
    service, actors, metrics = served
    counted = 'reviewer_http_requests_total{method="GET",route="/v1/proposals",status="304"}'
    before = figure(metrics, counted)
    etag = actors.alice.get("/v1/proposals").headers["etag"]
    for _ in range(3):
        assert actors.alice.get("/v1/proposals", headers={"If-None-Match": etag}).status_code == 304
    assert figure(metrics, counted) == before + 3
    assert not re.search(r"GET /v1/proposals 304 ", service.log())
    assert re.search(r"GET /v1/proposals 200 alice ", service.log())

    every = start_service(tmp_path, "--access-log", "all")
    try:
        with every.client(every.token("carol", "reviewer")) as carol:
            etag = carol.get("/v1/proposals").headers["etag"]
            assert carol.get("/v1/proposals", headers={"If-None-Match": etag}).status_code == 304
    finally:
        every.stop()
    assert re.search(r"GET /v1/proposals 304 carol ", every.log())


def test_a_shutdown_answers_every_waiting_request_at_once(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    tokens = service.tokens({"agent": "agent", "prometheus": "metrics"})
    with service.client(tokens["agent"]) as agent, service.client(tokens["prometheus"]) as metrics:
        proposal_id = unique_id("shutdown")
        submit(agent, proposal_id)
        etag = agent.get(f"/v1/proposals/{proposal_id}/decision").headers["etag"]
        with ThreadPoolExecutor(1) as pool:
            waiting = pool.submit(decision_of, agent, proposal_id, **{"If-None-Match": etag})
            until_waiting(metrics, 1)
            started = time.monotonic()
            assert service.stop(signal.SIGTERM) in (0, -signal.SIGTERM)
            answered = waiting.result(timeout=LONG)
    assert time.monotonic() - started < LONG  # the wait did not run its course
    assert (answered.status_code, answered.headers["etag"]) == (304, etag)


def test_a_long_poll_ends_when_the_proposal_expires_though_no_write_says_so(tmp_path: Path) -> None:
    """Expiry is time alone: the waiter reads again at the state's own deadline."""
    service = start_service(tmp_path, "--pending-ttl", "1")
    try:
        with service.client(service.token("agent", "agent")) as agent:
            proposal_id = unique_id("expiring")
            submit(agent, proposal_id)
            answered = decision_of(agent, proposal_id)  # no If-None-Match: held while pending
    finally:
        service.stop()
    assert (answered.status_code, answered.json()["state"]) == (200, "expired")


@pytest.mark.slow
def test_a_decision_on_one_replica_answers_the_long_poll_held_by_another(
    postgres_cluster: Cluster, tmp_path: Path
) -> None:
    url = postgres_cluster.fresh_database()
    first = Service(db=url, log_path=tmp_path / "first.log")
    second = Service(db=url, log_path=tmp_path / "second.log")
    start_together(first, second)
    tokens = first.tokens({"alice": "reviewer", "agent": "agent", "prometheus": "metrics"})
    try:
        with (
            first.client(tokens["alice"]) as alice,
            second.client(tokens["agent"]) as agent,
            second.client(tokens["alice"]) as alice_on_second,
            second.client(tokens["prometheus"]) as second_metrics,
            ThreadPoolExecutor(2) as pool,
        ):
            proposal_id = unique_id("replicas")
            digest = submit(agent, proposal_id)["plan_sha256"]
            listed = alice_on_second.get("/v1/proposals").headers["etag"]
            waiting = pool.submit(decision_of, agent, proposal_id)
            listing = pool.submit(
                alice_on_second.get,
                "/v1/proposals",
                params={"wait": LONG},
                headers={"If-None-Match": listed},
            )
            until_waiting(second_metrics, 2)
            assert decide(alice, proposal_id, 1, digest).status_code == 201  # through the first
            answered = waiting.result(timeout=LONG)
            relisted = listing.result(timeout=LONG)
        assert (answered.status_code, answered.json()["state"]) == (200, "approved")
        assert relisted.status_code == 200
        assert relisted.json()["proposals"][0]["state"] == "approved"
    finally:
        for replica in (first, second):
            if replica.process is not None:
                replica.stop()
