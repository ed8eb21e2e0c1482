"""Bad input gets a 4xx JSON error naming the problem: never a 500, never a partial write."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.plan.proposal import MAX_BODY_BYTES
from tests.forked_commands import run_reviewer
from tests.queue_harness import (
    Actors,
    Service,
    body,
    claimed_report,
    decide,
    proposal,
    reviewer_command,
    submit,
    unique_id,
)


@pytest.fixture
def unchanged(actors: Actors) -> Iterator[None]:
    """The list's ETag changes with every write: the same ETag afterwards means nothing was written."""
    before = actors.alice.get("/v1/proposals").headers["etag"]
    yield
    after = actors.alice.get("/v1/proposals", headers={"If-None-Match": before})
    assert after.status_code == 304, "a refused request wrote something"


def nested(depth: int) -> Any:
    value: Any = "bottom"
    for _ in range(depth):
        value = {"down": value}
    return value


def with_changes(**changes: Any) -> bytes:
    value = proposal(unique_id())
    for dotted, new in changes.items():
        target: Any = value
        *path, last = dotted.split("__")
        for part in path:
            target = target[int(part)] if part.isdigit() else target[part]
        target[last] = new
    return body(value)


def assert_refused(response: httpx.Response, status: int, *words: str) -> None:
    assert response.status_code == status, response.text
    assert response.headers["content-type"] == "application/json"
    message = response.json()["message"]
    for word in words:
        assert word in message, message


@pytest.mark.usefixtures("unchanged")
class TestProposalBodies:
    @pytest.mark.parametrize(
        ("raw", "words"),
        [
            (b'{"format": "reviewer.proposal/v1", "calls": [', ("not valid JSON",)),
            (b"\xff\xfe{}", ("not valid JSON",)),
            (b"", ("not valid JSON",)),
            (b"[" * 100_000 + b"]" * 100_000, ()),
        ],
    )
    def test_malformed_json_is_400(self, actors: Actors, raw: bytes, words: tuple[str, ...]) -> None:
        response = actors.agent.post("/v1/proposals", content=raw)
        assert response.status_code in (400, 422), response.text
        assert_refused(response, response.status_code, *words)

    @pytest.mark.parametrize(
        ("changes", "words"),
        [
            ({"revision": "1"}, ("$.revision",)),
            ({"calls__0__tool": 7}, ("$.calls[0].tool",)),
            ({"calls__0__effect": "explode"}, ("$.calls[0].effect",)),
            ({"format": "reviewer.proposal/v2"}, ("$.format",)),
            ({"proposal_id": "../etc"}, ("$.proposal_id",)),
            ({"proposal_id": ".."}, ("$.proposal_id",)),
            ({"created_at": "yesterday"}, ("$.created_at",)),
            ({"calls__1__seq": 1}, ("$.calls[1].seq",)),
            ({"unexpected": True}, ("unexpected",)),
        ],
    )
    def test_wrong_fields_are_422_naming_the_field(
        self, actors: Actors, changes: dict[str, Any], words: tuple[str, ...]
    ) -> None:
        assert_refused(actors.agent.post("/v1/proposals", content=with_changes(**changes)), 422, *words)

    def test_a_plan_nested_too_deep_is_422(self, actors: Actors) -> None:
        response = actors.agent.post("/v1/proposals", content=with_changes(calls__0__args=nested(80)))
        assert_refused(response, 422, "deeper than 64")

    @pytest.mark.parametrize("huge", [2**53, -(2**53), 10**30])
    def test_integers_beyond_2_to_53_are_refused_not_rounded(self, actors: Actors, huge: int) -> None:
        response = actors.agent.post("/v1/proposals", content=with_changes(calls__0__args={"amount": huge}))
        assert_refused(response, 422, "$.calls[0].args.amount", "2^53")
        assert_refused(
            actors.agent.post("/v1/proposals", content=with_changes(revision=huge)), 422, "revision"
        )

    def test_a_body_over_64_mb_is_413(self, actors: Actors) -> None:
        response = actors.agent.post("/v1/proposals", content=b" " * (MAX_BODY_BYTES + 1))
        assert_refused(response, 413, "64")

    def test_a_streamed_body_over_64_mb_is_413_before_it_is_all_read(self, actors: Actors) -> None:
        def chunks() -> Iterator[bytes]:
            for _ in range(MAX_BODY_BYTES // (1024 * 1024) + 2):
                yield b" " * (1024 * 1024)

        try:
            response = actors.agent.post("/v1/proposals", content=chunks())
        except httpx.TransportError:
            return  # the service may close the connection while the rest is still being sent
        assert_refused(response, 413)


@pytest.mark.usefixtures("unchanged")
class TestDecisionAndExecutionBodies:
    @pytest.fixture(scope="class")
    def stored(self, actors: Actors) -> dict[str, Any]:
        return submit(actors.agent, unique_id("bad-bodies"))

    def decide_raw(self, actors: Actors, stored: dict[str, Any], raw: bytes) -> httpx.Response:
        return actors.alice.post(
            f"/v1/proposals/{stored['proposal_id']}/decisions",
            content=raw,
            headers={"Idempotency-Key": unique_id("key")},
        )

    @pytest.mark.parametrize(
        ("changes", "status", "words"),
        [
            ({"revision": "1"}, 422, ("$.revision",)),
            ({"revision": 2**60}, 422, ("2^53",)),
            ({"decision": "maybe"}, 422, ("$.decision",)),
            ({"plan_sha256": "abc"}, 422, ("$.plan_sha256",)),
            ({"decided_by": "mallory"}, 422, ("$.decided_by",)),
        ],
    )
    def test_bad_decisions(
        self,
        actors: Actors,
        stored: dict[str, Any],
        changes: dict[str, Any],
        status: int,
        words: tuple[str, ...],
    ) -> None:
        decision = {"revision": 1, "plan_sha256": stored["plan_sha256"], "decision": "approve", **changes}
        assert_refused(self.decide_raw(actors, stored, json.dumps(decision).encode()), status, *words)

    def test_a_decision_that_is_not_json_is_400(self, actors: Actors, stored: dict[str, Any]) -> None:
        assert_refused(self.decide_raw(actors, stored, b"approve!"), 400, "not valid JSON")

    @pytest.mark.parametrize("key", ["x" * 300, ""])
    def test_an_idempotency_key_that_is_blank_or_too_long_is_400(
        self, actors: Actors, stored: dict[str, Any], key: str
    ) -> None:
        decision = {"revision": 1, "plan_sha256": stored["plan_sha256"], "decision": "approve"}
        response = actors.alice.post(
            f"/v1/proposals/{stored['proposal_id']}/decisions",
            json=decision,
            headers={"Idempotency-Key": key},
        )
        assert_refused(response, 400, "Idempotency-Key")
        report = {"revision": 1, "plan_sha256": stored["plan_sha256"], "calls": []}
        response = actors.agent.post(
            f"/v1/proposals/{stored['proposal_id']}/executions", json=report, headers={"Idempotency-Key": key}
        )
        assert_refused(response, 400, "Idempotency-Key")
        response = actors.agent.post(
            f"/v1/proposals/{stored['proposal_id']}/claims",
            json={"revision": 1, "plan_sha256": stored["plan_sha256"]},
            headers={"Idempotency-Key": key},
        )
        assert_refused(response, 400, "Idempotency-Key")

    def test_a_report_without_an_open_claim_is_409_before_its_body_is_read(
        self, actors: Actors, stored: dict[str, Any]
    ) -> None:
        report = {"revision": 1, "plan_sha256": stored["plan_sha256"], "calls": [nested(70)]}
        response = actors.agent.post(f"/v1/proposals/{stored['proposal_id']}/executions", json=report)
        assert_refused(response, 409, "no claim", "before the first real write")


def test_an_execution_report_nested_too_deep_is_422_and_the_claim_still_waits(actors: Actors) -> None:
    proposal_id = unique_id("deep-report")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    assert decide(actors.alice, proposal_id, 1, digest).status_code == 201
    report = claimed_report(actors.agent, proposal_id, 1, digest, calls=[nested(70)])
    response = actors.agent.post(f"/v1/proposals/{proposal_id}/executions", json=report)
    assert_refused(response, 422, "deeper than 64")
    assert actors.agent.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "claimed"


def test_a_signed_statement_nested_too_deep_is_422_naming_it_and_the_proposal_stays_pending(
    actors: Actors, service: Service, tmp_path: Path
) -> None:
    """4,000 brackets fit the statement's 4,096 bytes; read, they would recurse past Python's limit.
    The statement is read once the reviewer has a key, so this one has one."""
    name = unique_id("signer")
    token = service.token(name, "reviewer")
    key = tmp_path / "key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key)], check=True)
    added = run_reviewer(
        reviewer_command("keys", "add", name, f"{key}.pub", "--db", str(service.db)),
        capture_output=True,
        text=True,
        check=False,
    )
    assert added.returncode == 0, added.stderr
    proposal_id = unique_id("deep-statement")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    with service.client(token) as signer:
        response = signer.post(
            f"/v1/proposals/{proposal_id}/decisions",
            json={
                "revision": 1,
                "plan_sha256": digest,
                "decision": "approve",
                "statement": "[" * 4000,
                "signature": "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----\n",
            },
            headers={"Idempotency-Key": unique_id("key")},
        )
    assert_refused(response, 422, "statement: not JSON (JSON nested too deep to read)")
    assert actors.agent.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "pending"


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("GET", "/v1/proposals/no-such-proposal", 404),
        ("GET", "/v1/proposals/no-such-proposal/decision", 404),
        ("GET", "/v1/proposals/no-such-proposal/revisions/1", 404),
        ("GET", "/v1/proposals/bad%20id", 422),
        ("GET", "/v1/proposals/x/revisions/abc", 422),
        ("GET", "/v1/proposals/x/revisions/0", 422),
        ("GET", "/v1/proposals/x/revisions/99999999999999999999999999", 422),
        ("GET", "/v1/proposals?state=lost", 422),
        ("GET", "/v1/proposals?limit=0", 422),
        ("GET", "/v1/proposals?cursor=abc", 422),
        ("GET", "/v1/proposals?cursor=", 422),
        ("GET", "/v1/proposals?cursor=99999999999999999999999", 422),
        ("PUT", "/v1/proposals/x/decisions", 405),
        ("DELETE", "/v1/proposals", 405),
        ("GET", "/v2/nothing", 404),
    ],
)
def test_bad_paths_and_queries(actors: Actors, method: str, path: str, status: int) -> None:
    response = actors.alice.request(method, path)
    assert_refused(response, status)
    if status == 405:
        assert (
            set(response.headers["allow"].split(", ")) >= {"GET", "POST"}
            or "POST" in response.headers["allow"]
        )


def test_a_405_names_every_method_served_at_the_path(actors: Actors) -> None:
    response = actors.alice.request("DELETE", "/v1/proposals")
    assert response.headers["allow"] == "GET, POST"


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("path", ["/v1/proposals/x/decisions", "/v1/proposals/x/claims"])
def test_a_missing_idempotency_key_is_the_documented_400(actors: Actors, path: str) -> None:
    client = actors.alice if path.endswith("decisions") else actors.agent
    response = client.post(path, json={"revision": 1, "plan_sha256": "0" * 64, "decision": "approve"})
    assert_refused(response, 400, "needs an Idempotency-Key header")
    document = actors.alice.get("/openapi.json").json()
    [header] = [
        p
        for p in document["paths"]["/v1/proposals/{proposal_id}" + path[15:]]["post"]["parameters"]
        if p["name"] == "idempotency-key"
    ]
    assert header["required"] is True


@pytest.mark.usefixtures("unchanged")
def test_a_decision_on_an_unknown_proposal_is_404(actors: Actors) -> None:
    decision = {"revision": 1, "plan_sha256": "0" * 64, "decision": "approve"}
    response = actors.alice.post(
        "/v1/proposals/never-submitted/decisions", json=decision, headers={"Idempotency-Key": "k"}
    )
    assert_refused(response, 404, "never-submitted")


@pytest.mark.usefixtures("unchanged")
@pytest.mark.parametrize("where", [b'"t1"', b'"closed"'])
def test_invalid_utf8_inside_a_call_is_400_and_the_next_submission_is_accepted(
    actors: Actors, where: bytes
) -> None:
    """The proposal parser leaves calls undecoded until it checks them; a byte that is not UTF-8
    there was a 500. It is a 400 like any body that is not JSON, and the service keeps serving."""
    raw = body(proposal(unique_id())).replace(where, where[:-1] + b"\xff" + where[-1:], 1)
    response = actors.agent.post("/v1/proposals", content=raw)
    assert_refused(response, 400, "not valid JSON", "not UTF-8")


def test_after_a_body_that_is_not_utf8_the_service_still_accepts_proposals(actors: Actors) -> None:
    raw = body(proposal(unique_id())).replace(b'"t1"', b'"t\xc3"', 1)
    assert actors.agent.post("/v1/proposals", content=raw).status_code == 400
    submit(actors.agent, unique_id())


@pytest.mark.usefixtures("unchanged")
def test_a_websocket_upgrade_is_answered_as_plain_http(actors: Actors) -> None:
    """No route speaks WebSocket, so the service loads no WebSocket protocol: an upgrade request is an
    ordinary request, answered and authorized as one, and the connection is not switched."""
    upgrade = {
        "Connection": "Upgrade",
        "Upgrade": "websocket",
        "Sec-WebSocket-Version": "13",
        "Sec-WebSocket-Key": "dGhlIHNhbXBsZSBub25jZQ==",
    }
    assert actors.alice.get("/v1/proposals", headers=upgrade).status_code == 200
    anonymous = httpx.get(actors.alice.base_url.join("/v1/proposals"), headers=upgrade)
    assert anonymous.status_code == 401


@pytest.mark.parametrize(
    ("audit", "said"),
    [
        ({"source": "x", "complete": True, "calls": [], "unplanned_count": 0}, "$.audit.unplanned"),
        (
            {
                "source": "x",
                "complete": True,
                "calls": [],
                "unplanned": [{"method": "POST", "path": "/x" * 300}],
                "unplanned_count": 1,
            },
            "$.audit.unplanned[0].path",
        ),
        (
            {
                "source": "x",
                "complete": True,
                "calls": [{"seq": 1, "verdict": "trust me"}],
                "unplanned": [],
                "unplanned_count": 0,
            },
            "$.audit.calls[0].verdict",
        ),
    ],
)
def test_an_audit_verification_outside_its_shape_is_422_and_the_claim_still_waits(
    actors: Actors, audit: dict[str, Any], said: str
) -> None:
    """The report's `audit` is the runner's word the app shows: a missing list, a string past its
    limit or a verdict no reader gives is refused, and the run can report again."""
    proposal_id = unique_id("bad-audit")
    digest = submit(actors.agent, proposal_id)["plan_sha256"]
    assert decide(actors.alice, proposal_id, 1, digest).status_code == 201
    report = claimed_report(actors.agent, proposal_id, 1, digest, audit=audit)
    response = actors.agent.post(f"/v1/proposals/{proposal_id}/executions", json=report)
    assert_refused(response, 422, said)
    assert actors.agent.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "claimed"
