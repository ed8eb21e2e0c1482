"""Tokens that expire and rotate, under an injected clock: an expired token is a 401 that says so
(also on the idle poll's short way); a rotated token's old secret works for its grace period only,
under the same identity; `token create --expires-in`, `token rotate` and `token list` as commands."""

from __future__ import annotations

from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from reviewer.service.errors import Unauthorized
from reviewer.service.store import QueueStore
from tests.policies import TWO_APPROVALS
from tests.service.commands.test_command_line import run
from tests.service.store.test_store_contract import submission

START = 1_800_000_000.0


def clocked(tmp_path: Path) -> tuple[list[float], QueueStore, TestClient]:
    now = [START]
    app = create_app(tmp_path / "queue.sqlite3", clock=lambda: now[0])
    return now, app.state.store, TestClient(app)


def as_bearer(token: str, **headers: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}", **headers}


def test_an_expired_token_is_a_401_that_says_when_it_expired(tmp_path: Path) -> None:
    now, store, client = clocked(tmp_path)
    token = mint_token()
    store.create_token("alice", "reviewer", hash_token(token), expires_at=START + 60)
    listing = client.get("/v1/proposals", headers=as_bearer(token))
    assert listing.status_code == 200
    now[0] = START + 60
    refused = client.get("/v1/whoami", headers=as_bearer(token))
    assert refused.status_code == 401
    assert refused.json()["message"] == (
        "this token expired at 2027-01-15 08:01:00 UTC; ask the queue's operator for one"
    )
    unchanged_poll = client.get(
        "/v1/proposals", headers=as_bearer(token, **{"If-None-Match": listing.headers["etag"]})
    )
    assert unchanged_poll.status_code == 401  # the idle poll's short way reads the expiry too
    unknown = client.get("/v1/whoami", headers=as_bearer(mint_token()))
    assert unknown.json()["message"] == "this token is unknown or revoked; ask the queue's operator for one"


def test_a_token_that_expires_while_its_request_arrives_cannot_write(tmp_path: Path) -> None:
    now, store, _ = clocked(tmp_path)
    token = mint_token()
    store.create_token("agent", "agent", hash_token(token), expires_at=START + 60)
    identity = store.resolve_token(hash_token(token))  # authenticated as the request arrived
    assert identity is not None
    store.submit(identity, submission("in-flight"))
    now[0] = START + 60  # ... and expired before its report was read
    with pytest.raises(Unauthorized, match="this token expired at 2027-01-15 08:01:00 UTC"):
        store.check_report_allowed(identity, "in-flight", None)


def test_a_rotated_token_keeps_its_identity_and_the_old_secret_lasts_its_grace(tmp_path: Path) -> None:
    now, store, client = clocked(tmp_path)
    old, new = mint_token(), mint_token()
    store.create_token("deployer", "agent", hash_token(old))
    assert store.rotate_token("deployer", hash_token(new), grace=300)
    assert not store.rotate_token("nobody", hash_token(mint_token()), grace=300)
    now[0] = START + 299
    for token in (old, new):
        assert client.get("/v1/whoami", headers=as_bearer(token)).json() == {
            "name": "deployer",
            "role": "agent",
            "identity": "token:deployer",
        }
    now[0] = START + 300
    assert client.get("/v1/whoami", headers=as_bearer(new)).status_code == 200
    refused = client.get("/v1/whoami", headers=as_bearer(old))
    assert refused.status_code == 401
    assert refused.json()["message"].startswith(
        "this token was replaced by a rotation, and its grace period ended at 2027-01-15 08:05:00 UTC"
    )
    [listed] = store.list_tokens()
    assert listed.revoked_at is None and listed.previous_valid_until is not None


def test_token_commands_create_with_an_expiry_rotate_and_list(tmp_path: Path) -> None:
    database = tmp_path / "queue.sqlite3"
    create_app(database).state.store.close()
    made = run(
        "token", "create", "--db", str(database), "--name", "ci", "--role", "agent", "--expires-in", "90d"
    )
    assert made.returncode == 0, made.stderr
    listed = run("token", "list", "--db", str(database))
    assert "\tagent\t" in listed.stdout and "\texpires " in listed.stdout
    rotated = run("token", "rotate", "ci", "--db", str(database), "--grace", "10m")
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.strip().startswith("rvw_") and rotated.stdout.strip() != made.stdout.strip()
    assert "the old token works 600 s more" in rotated.stderr
    listed = run("token", "list", "--db", str(database))
    assert "rotated: the old token works until" in listed.stdout and "expires" not in listed.stdout
    assert rotated.stdout.strip() not in listed.stdout + listed.stderr
    bad = run(
        "token", "create", "--db", str(database), "--name", "x", "--role", "agent", "--expires-in", "soon"
    )
    assert bad.returncode == 2 and "not a duration" in bad.stderr
    metrics = run("token", "create", "--db", str(database), "--name", "prometheus", "--role", "metrics")
    assert metrics.returncode == 0, metrics.stderr


def test_an_expiry_past_what_the_queue_stores_is_a_usage_line_and_list_shows_any_stored_row(
    tmp_path: Path,
) -> None:
    """`--expires-in 99999999999d` would end in the year 273792727: refused before anything is made.
    A row written before durations were bounded is listed anyway (and `serve --policy`, which lists
    the tokens, starts), showing the latest date there is."""
    import sqlite3

    database = tmp_path / "queue.sqlite3"
    create_app(database).state.store.close()
    refused = run(
        "token",
        "create",
        "--db",
        str(database),
        "--name",
        "ci",
        "--role",
        "agent",
        "--expires-in",
        "99999999999d",
    )
    assert refused.returncode == 2
    assert refused.stderr.startswith("usage: reviewer token create")
    assert "'99999999999d' ends after the year 9999" in refused.stderr and "Traceback" not in refused.stderr
    assert run("token", "list", "--db", str(database)).stdout == ""
    with sqlite3.connect(database) as db:
        db.execute(
            "INSERT INTO tokens (name, role, token_sha256, created_at, expires_at) "
            "VALUES ('old-ci', 'agent', 'x', 1800000000, 8.6e18)"
        )
    listed = run("token", "list", "--db", str(database))
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith("old-ci\tagent\tcreated 2027-01-15 08:00\texpires 9999-12-31 23:59")


def test_an_expired_tokens_pending_approval_is_withdrawn_from_the_quorum(tmp_path: Path) -> None:
    """Two approvals needed; bob's token expires before the second: his approval counts no more (the
    trail says why), as a revoked token's would, and alice's alone leaves the proposal pending. An
    approval that met its quorum before the expiry stays."""
    from reviewer.policy.file import parse_policy
    from reviewer.queue.messages import DecisionRequest

    now = [START]
    app = create_app(tmp_path / "queue.sqlite3", clock=lambda: now[0])
    store: QueueStore = app.state.store
    store.policy = parse_policy(TWO_APPROVALS, "policy.toml")
    tokens = {name: mint_token() for name in ("alice", "bob", "carol", "agent")}
    for name, token in tokens.items():
        role = "agent" if name == "agent" else "reviewer"
        store.create_token(name, role, hash_token(token), expires_at=START + 60 if name == "bob" else None)
    identity = {name: store.resolve_token(hash_token(token)) for name, token in tokens.items()}
    store.submit(identity["agent"], submission("expiring"))
    digest = store.decision_state(identity["agent"], "expiring").plan_sha256

    def approve(name: str) -> None:
        request = DecisionRequest(revision=1, plan_sha256=digest, decision="approve")
        store.decide(identity[name], "expiring", request, f"{name}-key")

    approve("bob")
    assert store.decision_state(identity["agent"], "expiring").approvals == ["bob"]
    now[0] = START + 60
    assert store.decision_state(identity["agent"], "expiring").approvals == []
    approve("alice")
    state = store.decision_state(identity["agent"], "expiring")
    assert state.state == "pending" and state.approvals == ["alice"]
    history = store.get_record(identity["agent"], "expiring").history
    withdrawn = [event for event in history if event.event == "withdrawn"]
    assert [event.actor for event in withdrawn] == ["bob"]
    assert "bob's token expired; the approval it cast no longer counts" in (withdrawn[0].reason or "")
    assert not store.rotate_token("bob", hash_token(mint_token()), grace=60)  # it stays withdrawn
    approve("carol")
    assert store.decision_state(identity["agent"], "expiring").state == "approved"
