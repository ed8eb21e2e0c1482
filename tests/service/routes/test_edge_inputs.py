"""The HTTP edge against hostile input: bodies that are not JSON, numbers reading would change, and a
token revoked while its request is still arriving."""

from __future__ import annotations

import json
import socket
from typing import Any

import httpx
import pytest

from reviewer.plan.bodies import body_kind
from tests.forked_commands import run_reviewer
from tests.queue_harness import (
    Actors,
    Service,
    claimed_report,
    decide,
    proposal,
    reviewer_command,
    submit,
    unique_id,
)


def post_routes(actors: Actors) -> list[tuple[httpx.Client, str, bytes]]:
    proposal_id = unique_id("media")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    decision = {"revision": 1, "plan_sha256": digest, "decision": "approve"}
    return [
        (actors.agent, "/v1/proposals", json.dumps(proposal(unique_id())).encode()),
        (actors.alice, f"/v1/proposals/{proposal_id}/decisions", json.dumps(decision).encode()),
        (
            actors.agent,
            f"/v1/proposals/{proposal_id}/claims",
            json.dumps({"revision": 1, "plan_sha256": digest}).encode(),
        ),
    ]


@pytest.mark.parametrize(
    "content_type",
    ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=x", "application/xml"],
)
def test_a_body_that_says_it_is_not_json_is_415_and_changes_nothing(
    actors: Actors, content_type: str
) -> None:
    for client, path, raw in post_routes(actors):
        response = client.post(
            path, content=raw, headers={"Content-Type": content_type, "Idempotency-Key": unique_id()}
        )
        assert body_kind(content_type) != "json"
        assert response.status_code == 415, (path, response.text)
        assert response.json()["error"] == "unsupported_media_type"
        assert "application/json" in response.json()["message"]


@pytest.mark.parametrize(
    "content_type",
    [
        "application/json",
        "application/json; charset=utf-8",
        "application/merge-patch+json",
        "text/vnd.example+json",
        "APPLICATION/JSON",
    ],
)
def test_json_media_types_are_read(actors: Actors, content_type: str) -> None:
    """The queue reads as JSON what a plan holds as JSON: one rule (`reviewer.plan.bodies.is_json`)."""
    assert body_kind(content_type) == "json"
    response = actors.agent.post(
        "/v1/proposals",
        content=json.dumps(proposal(unique_id())).encode(),
        headers={"Content-Type": content_type},
    )
    assert response.status_code == 201, response.text


@pytest.mark.parametrize(
    ("literal", "words"),
    [
        ("1e400", "beyond +-2^53"),
        ("9007199254740993.0", "beyond +-2^53"),
        ("-1.5e300", "beyond +-2^53"),
        ("1e-400", "would be read as 0"),
    ],
)
def test_numbers_reading_would_change_are_refused_not_rounded(
    actors: Actors, literal: str, words: str
) -> None:
    value = proposal(unique_id())
    raw = json.dumps(value).replace('"status": "closed"', f'"status": "closed", "amount": {literal}', 1)
    response = actors.agent.post("/v1/proposals", content=raw.encode())
    assert response.status_code == 422, response.text
    assert literal in response.json()["message"] and words in response.json()["message"]
    assert actors.agent.get(f"/v1/proposals/{value['proposal_id']}").status_code == 404


def test_numbers_that_survive_reading_are_kept(actors: Actors) -> None:
    """2^53 and the smallest subnormal are accepted and read back as they were written: the revision
    is stored byte for byte, and its numbers read as the same values."""
    value = proposal(unique_id())
    raw = json.dumps(value).replace(
        '"status": "closed"', '"status": "closed", "amount": 9007199254740992.0, "tiny": 5e-324', 1
    )
    assert actors.agent.post("/v1/proposals", content=raw.encode()).status_code == 201
    stored = actors.alice.get(f"/v1/proposals/{value['proposal_id']}/revisions/1")
    assert stored.status_code == 200 and stored.content == raw.encode()
    args = stored.json()["calls"][0]["args"]
    assert (args["amount"], args["tiny"]) == (9007199254740992.0, 5e-324)


def test_a_report_with_an_altered_number_is_refused_and_the_claim_still_waits(actors: Actors) -> None:
    proposal_id = unique_id("numbers")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    assert decide(actors.alice, proposal_id, 1, digest).status_code == 201
    report: dict[str, Any] = claimed_report(
        actors.agent, proposal_id, 1, digest, calls=[{"seq": 1, "amount": 0}]
    )
    raw = json.dumps(report).replace('"amount": 0', '"amount": 1e999')
    response = actors.agent.post(f"/v1/proposals/{proposal_id}/executions", content=raw.encode())
    assert response.status_code == 422, response.text
    assert actors.agent.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "claimed"


def test_a_reviewer_revoked_while_the_decision_body_arrives_decides_nothing(
    service: Service, actors: Actors
) -> None:
    """Headers (with the token) first; the operator revokes the token; then the body: 401, still pending."""
    name = unique_id("leaving")
    token = service.token(name, "reviewer")
    proposal_id = unique_id("revoked")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    decision = json.dumps({"revision": 1, "plan_sha256": digest, "decision": "approve"}).encode()
    with socket.create_connection(("127.0.0.1", service.port)) as connection:
        connection.sendall(
            (
                f"POST /v1/proposals/{proposal_id}/decisions HTTP/1.1\r\nHost: q\r\n"
                f"Authorization: Bearer {token}\r\nContent-Type: application/json\r\n"
                f"Idempotency-Key: k1\r\nContent-Length: {len(decision)}\r\n\r\n"
            ).encode()
        )
        connection.sendall(decision[:10])
        revoke = run_reviewer(
            reviewer_command("token", "revoke", name, "--db", str(service.db)),
            capture_output=True,
            check=False,
        )
        assert revoke.returncode == 0
        connection.sendall(decision[10:])
        connection.settimeout(30)
        answer = connection.recv(65536)
    assert answer.startswith(b"HTTP/1.1 401"), answer[:200]
    state = actors.alice.get(f"/v1/proposals/{proposal_id}/decision").json()
    assert (state["state"], state.get("decided_by")) == ("pending", None)
