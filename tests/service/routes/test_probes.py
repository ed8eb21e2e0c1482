"""`/healthz` and `/readyz` on a real service, on SQLite and on PostgreSQL: without a token, without
queue data; a stopped PostgreSQL makes the replica unready (503, with the reason) but not unhealthy."""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from reviewer import release
from reviewer.service.app import create_app
from reviewer.service.store import SCHEMA_VERSION
from tests.queue_harness import Service, start_service
from tests.service.ports import free_port
from tests.service.postgres import start_cluster


def probe(service: Service, path: str) -> httpx.Response:
    with service.client() as anonymous:
        return anonymous.get(path)


def test_sqlite_probes_answer_without_a_token_and_say_nothing_of_the_queue(tmp_path: Path) -> None:
    service = start_service(tmp_path)
    try:
        healthy, ready = probe(service, "/healthz"), probe(service, "/readyz")
        docs = probe(service, "/docs")
    finally:
        service.stop()
    assert healthy.status_code == 200
    assert healthy.json() == {"status": "serving", "release": release(), "schema_version": SCHEMA_VERSION}
    assert release() == "0.1.0"  # the version pyproject.toml gives: the installed project's
    first = service.log().splitlines()[0]
    assert first.endswith(
        f"reviewer.service: reviewer-gate {release()}, writing queue schema {SCHEMA_VERSION}"
    )
    assert (ready.status_code, ready.json()) == (200, {"status": "ready", "schema_version": SCHEMA_VERSION})
    assert docs.status_code == 404  # the Swagger UI only with --api-docs


@pytest.mark.parametrize("offset", [1, -1], ids=["newer", "older"])
def test_readyz_is_503_naming_the_version_when_the_schema_is_not_this_release(
    tmp_path: Path, offset: int
) -> None:
    """Ready only on this release's schema (docs/design.md, "Operating the queue"): a newer one is what
    a newer release's migration leaves, an older one what restoring a backup under a running replica
    leaves; either way this replica must not serve it."""
    database = tmp_path / "queue.sqlite3"
    client = TestClient(create_app(database))
    assert client.get("/readyz").status_code == 200
    with sqlite3.connect(database) as raw:
        raw.execute(f"PRAGMA user_version = {SCHEMA_VERSION + offset}")
    raw.close()
    answer = client.get("/readyz")
    assert answer.status_code == 503
    theirs, ours = SCHEMA_VERSION + offset, SCHEMA_VERSION
    assert answer.json()["reason"] == (
        f"the database holds queue schema version {theirs}, and this release writes {ours}"
    )
    assert client.get("/healthz").status_code == 200


def test_api_docs_only_when_asked(tmp_path: Path) -> None:
    assert TestClient(create_app(tmp_path / "a.sqlite3", api_docs=True)).get("/docs").status_code == 200
    assert TestClient(create_app(tmp_path / "b.sqlite3")).get("/redoc").status_code == 404


def test_postgresql_stopped_makes_the_replica_unready_but_healthy(tmp_path: Path) -> None:
    """And its notifications' loop, which meets the outage every pass, says so in one line naming the
    database when it starts and one when it ends, with no traceback."""
    cluster = start_cluster()  # its own: stopping the suite's cluster would fail other tests
    secret = tmp_path / "notify.secret"
    secret.write_text("notify-signing-secret-0123456789")
    secret.chmod(0o600)
    notify = ("--notify", f"http://127.0.0.1:{free_port()}/hook", "--notify-secret-file", str(secret))
    try:
        database = cluster.fresh_database()
        service = Service(db=database, log_path=tmp_path / "service.log", serve_args=notify)
        service.start()
        try:
            assert probe(service, "/readyz").status_code == 200
            cluster.stop_server()
            unready = probe(service, "/readyz")
            healthy = probe(service, "/healthz")
            wait_for_line(service, "does not answer")
            cluster.start_server()
            wait_for_line(service, "answers again")
        finally:
            service.stop()
    finally:
        cluster.stop()
    assert unready.status_code == 503
    assert unready.json()["status"] == "not ready"
    reason = unready.json()["reason"]
    # refused, or (the stop racing a pooled connection's next statement) broken: an outage either way
    assert reason.startswith("the queue's database is unavailable: "), reason
    assert "PostgreSQL at 127.0.0.1:" in reason, reason
    assert healthy.status_code == 200
    said = [line for line in service.log().splitlines() if "reviewer.service.notifications" in line]
    assert len(said) == 2, service.log()
    named = database.replace("postgres@", "")  # the log names it without the user
    assert f"the database {named} does not answer (" in said[0]
    assert f"the database {named} answers again after" in said[1]
    assert "Traceback" not in service.log()


def wait_for_line(service: Service, text: str) -> None:
    """Until the service's log holds `text` (a bound, not a wait)."""
    for _ in range(1200):
        if text in service.log():
            return
        time.sleep(0.05)
    raise AssertionError(f"the log never said {text!r}:\n{service.log()}")
