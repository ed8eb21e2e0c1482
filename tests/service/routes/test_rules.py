"""The queue's decision rules, each against the real service over HTTP."""

from __future__ import annotations

import sqlite3
import subprocess
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from reviewer.service.app import create_app
from reviewer.service.auth import hash_token, mint_token
from reviewer.service.store import StoreSettings
from reviewer.service.store.sqlite import SQLiteStore
from tests.queue_harness import (
    Actors,
    Service,
    body,
    claim,
    claimed_report,
    decide,
    make_actors,
    proposal,
    reviewer_command,
    start_service,
    submit,
    unique_id,
)


def test_whoami_names_the_token_holder_and_role(actors: Actors) -> None:
    assert actors.alice.get("/v1/whoami").json() == {
        "name": "alice",
        "role": "reviewer",
        "identity": "token:alice",
    }
    assert actors.agent.get("/v1/whoami").json() == {
        "name": "agent",
        "role": "agent",
        "identity": "token:agent",
    }


@pytest.mark.parametrize("authorization", [None, "Bearer rvw_not-a-real-token", "Basic abc", "Bearer"])
def test_a_request_without_a_valid_token_is_401(service: Service, authorization: str | None) -> None:
    headers = {"Authorization": authorization} if authorization else {}
    with service.client() as anonymous:
        response = anonymous.get("/v1/whoami", headers=headers)
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json()["error"] == "unauthorized"


def test_a_revoked_token_is_refused(service: Service) -> None:
    token = service.token("short-lived", "reviewer")
    with service.client(token) as client:
        assert client.get("/v1/whoami").status_code == 200
        revoke = reviewer_command("token", "revoke", "short-lived", "--db", str(service.db))
        subprocess.run(revoke, check=True, capture_output=True)
        assert client.get("/v1/whoami").status_code == 401


def test_only_an_agent_submits_and_only_a_reviewer_lists(actors: Actors) -> None:
    response = actors.alice.post("/v1/proposals", content=body(proposal(unique_id())))
    assert response.status_code == 403
    assert "agent" in response.json()["message"]
    assert actors.agent.get("/v1/proposals").status_code == 403


def test_an_agent_token_cannot_decide_even_its_own_proposal(actors: Actors) -> None:
    proposal_id = unique_id()
    answer = submit(actors.agent, proposal_id)
    for agent in (actors.agent, actors.other_agent):
        response = decide(agent, proposal_id, 1, answer["plan_sha256"])
        assert response.status_code == 403, response.text
    assert actors.alice.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "pending"


def test_another_agent_sees_no_such_proposal(actors: Actors) -> None:
    proposal_id = unique_id()
    submit(actors.agent, proposal_id)
    for path in ("", "/decision", "/revisions/1", "/executions"):
        assert actors.agent.get(f"/v1/proposals/{proposal_id}{path}").status_code == 200
        response = actors.other_agent.get(f"/v1/proposals/{proposal_id}{path}")
        assert response.status_code == 404, path
        missing_id = unique_id()
        missing = actors.other_agent.get(f"/v1/proposals/{missing_id}{path}")
        assert missing.json()["message"].replace(missing_id, proposal_id) == response.json()["message"]
    refused = actors.other_agent.post(f"/v1/proposals/{proposal_id}/executions", json={})
    assert refused.status_code in (404, 422)
    taken = actors.other_agent.post("/v1/proposals", content=body(proposal(proposal_id, 2)))
    assert taken.status_code == 409


def _token_run(service: Service, *args: str) -> subprocess.CompletedProcess[str]:
    command = reviewer_command("token", *args, "--db", str(service.db))
    return subprocess.run(command, capture_output=True, text=True)


def _reviewer_token_made_before_names_kept_their_role(service: Service, name: str) -> str:
    """A reviewer token under an agent's name, as a database minted before that was refused holds one."""
    token = mint_token()
    with sqlite3.connect(service.db) as db:
        db.execute(
            "INSERT INTO tokens (name, role, token_sha256, created_at) VALUES (?, 'reviewer', ?, ?)",
            (name, hash_token(token), time.time()),
        )
    return token


def test_the_proposer_cannot_decide_its_own_proposal_even_as_a_reviewer(
    service: Service, actors: Actors
) -> None:
    """Revoke agent "mallory", hold a reviewer token named "mallory": its decisions on what agent
    "mallory" proposed are 403 (after the 412 check), and another reviewer still decides."""
    name = unique_id("mallory")
    proposal_id = unique_id()
    with service.client(service.token(name, "agent")) as proposer:
        answer = submit(proposer, proposal_id)
    assert _token_run(service, "revoke", name).returncode == 0
    with service.client(_reviewer_token_made_before_names_kept_their_role(service, name)) as same_name:
        assert same_name.get("/v1/whoami").json() == {
            "name": name,
            "role": "reviewer",
            "identity": f"token:{name}",
        }
        assert decide(same_name, proposal_id, 1, "0" * 64).status_code == 412
        for decision in ("approve", "reject"):
            refused = decide(same_name, proposal_id, 1, answer["plan_sha256"], decision)
            assert refused.status_code == 403, refused.text
            assert refused.json()["error"] == "forbidden"
            assert "you proposed this; another reviewer must decide" in refused.json()["message"]
        record = actors.alice.get(f"/v1/proposals/{proposal_id}").json()
        assert record["latest"]["state"] == "pending"
        assert [event["event"] for event in record["history"]] == ["submitted"]
        assert decide(actors.bob, proposal_id, 1, answer["plan_sha256"]).status_code == 201
        assert decide(same_name, proposal_id, 1, answer["plan_sha256"]).status_code == 403


def test_a_token_name_keeps_its_role_for_life(service: Service) -> None:
    name = unique_id("rotating")
    assert _token_run(service, "create", "--name", name, "--role", "agent").returncode == 0
    assert _token_run(service, "revoke", name).returncode == 0
    refused = _token_run(service, "create", "--name", name, "--role", "reviewer")
    assert refused.returncode == 1
    assert refused.stdout == ""
    assert f"{name!r} was used for an agent token" in refused.stderr
    assert "keeps its role for life" in refused.stderr
    rotated = _token_run(service, "create", "--name", name, "--role", "agent")
    assert rotated.returncode == 0, rotated.stderr
    assert rotated.stdout.startswith("rvw_")


def test_a_decision_on_a_stale_revision_or_digest_is_412_and_changes_nothing(actors: Actors) -> None:
    proposal_id = unique_id()
    first = submit(actors.agent, proposal_id)
    second = submit(actors.agent, proposal_id, 2)
    before = actors.alice.get(f"/v1/proposals/{proposal_id}").json()
    stale_revision = decide(actors.alice, proposal_id, 1, first["plan_sha256"])
    wrong_digest = decide(actors.alice, proposal_id, 2, first["plan_sha256"])
    for response in (stale_revision, wrong_digest):
        assert response.status_code == 412, response.text
        assert response.json()["latest_revision"] == 2
        assert response.json()["latest_plan_sha256"] == second["plan_sha256"]
    assert actors.alice.get(f"/v1/proposals/{proposal_id}").json() == before


def test_412_comes_before_409_when_the_old_revision_was_decided(actors: Actors) -> None:
    proposal_id = unique_id()
    first = submit(actors.agent, proposal_id)
    assert decide(actors.alice, proposal_id, 1, first["plan_sha256"], "reject").status_code == 201
    submit(actors.agent, proposal_id, 2)
    assert decide(actors.bob, proposal_id, 1, first["plan_sha256"]).status_code == 412


def test_a_decided_proposal_answers_409_with_state_and_who(actors: Actors) -> None:
    proposal_id = unique_id()
    answer = submit(actors.agent, proposal_id)
    assert (
        decide(actors.alice, proposal_id, 1, answer["plan_sha256"], "reject", reason="no").status_code == 201
    )
    response = decide(actors.bob, proposal_id, 1, answer["plan_sha256"])
    assert response.status_code == 409
    assert response.json()["state"] == "rejected"
    assert response.json()["decided_by"] == "alice"
    assert "alice" in response.json()["message"]


def test_the_decision_endpoint_reports_each_state(actors: Actors) -> None:
    proposal_id = unique_id()
    answer = submit(actors.agent, proposal_id)
    path = f"/v1/proposals/{proposal_id}/decision"
    assert actors.agent.get(path).json()["state"] == "pending"
    decide(actors.alice, proposal_id, 1, answer["plan_sha256"], "approve", reason="looks right")
    approved = actors.agent.get(path).json()
    assert approved["state"] == "approved"
    assert approved["decided_by"] == "alice"
    assert approved["plan_sha256"] == answer["plan_sha256"]
    assert approved["expires_at"] > approved["decided_at"]
    report = claimed_report(actors.agent, proposal_id, 1, answer["plan_sha256"], calls=[{"seq": 1}])
    claimed = actors.alice.get(path).json()
    assert (claimed["state"], claimed["claimed_by"], claimed["outcome_unknown"]) == (
        "claimed",
        "agent",
        False,
    )
    assert "expires_at" not in claimed, "a claim fixes the approval: it no longer expires"
    assert claimed["lease_expires_at"] > claimed["claimed_at"]
    assert actors.agent.post(f"/v1/proposals/{proposal_id}/executions", json=report).status_code == 201
    assert actors.agent.get(path).json()["state"] == "executed"

    rejected_id = unique_id()
    rejected = submit(actors.agent, rejected_id)
    decide(actors.bob, rejected_id, 1, rejected["plan_sha256"], "reject", reason="deletes t3")
    state = actors.agent.get(f"/v1/proposals/{rejected_id}/decision").json()
    assert (state["state"], state["decided_by"], state["reason"]) == ("rejected", "bob", "deletes t3")


class TestIdempotency:
    def test_a_decision_without_a_key_is_400(self, actors: Actors) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        response = actors.alice.post(
            f"/v1/proposals/{proposal_id}/decisions",
            json={"revision": 1, "plan_sha256": answer["plan_sha256"], "decision": "approve"},
        )
        assert response.status_code == 400
        assert "Idempotency-Key" in response.json()["message"]
        assert actors.alice.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "pending"

    def test_same_key_and_body_gets_the_first_answer_and_creates_nothing(self, actors: Actors) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        first = decide(actors.alice, proposal_id, 1, answer["plan_sha256"], key="retry-me")
        again = decide(actors.alice, proposal_id, 1, answer["plan_sha256"], key="retry-me")
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        history = actors.alice.get(f"/v1/proposals/{proposal_id}").json()["history"]
        assert [event["event"] for event in history] == ["submitted", "approved"]

    def test_same_key_other_body_is_422(self, actors: Actors) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        assert decide(actors.alice, proposal_id, 1, answer["plan_sha256"], key="k").status_code == 201
        other = decide(actors.alice, proposal_id, 1, answer["plan_sha256"], "reject", key="k")
        assert other.status_code == 422
        assert other.json()["error"] == "idempotency_key_reused"

    def test_a_key_reused_on_another_proposal_with_the_same_plan_is_422_for_decisions_and_claims(
        self, actors: Actors
    ) -> None:
        """Two proposals with the same plan share its digest, so the request bodies are equal: the
        key is bound to its proposal too, or B would be answered A's decision (or claim) and stay
        undecided (or unclaimed)."""
        first, second = unique_id(), unique_id()
        digest = submit(actors.agent, first)["plan_sha256"]
        assert submit(actors.agent, second)["plan_sha256"] == digest
        key = unique_id("decide")
        assert decide(actors.alice, first, 1, digest, key=key).status_code == 201
        reused = decide(actors.alice, second, 1, digest, key=key)
        assert (reused.status_code, reused.json().get("error")) == (422, "idempotency_key_reused")
        assert actors.alice.get(f"/v1/proposals/{second}/decision").json()["state"] == "pending"

        assert decide(actors.alice, second, 1, digest).status_code == 201
        key = unique_id("claim")
        assert claim(actors.agent, first, 1, digest, key=key).status_code == 201
        reused = claim(actors.agent, second, 1, digest, key=key)
        assert (reused.status_code, reused.json().get("error")) == (422, "idempotency_key_reused")
        assert actors.alice.get(f"/v1/proposals/{second}/decision").json()["state"] == "approved"

    def test_an_execution_report_again_under_its_key_gets_the_first_answer_and_stores_nothing(
        self, actors: Actors
    ) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        decide(actors.alice, proposal_id, 1, answer["plan_sha256"])
        path = f"/v1/proposals/{proposal_id}/executions"
        report = claimed_report(
            actors.agent, proposal_id, 1, answer["plan_sha256"], calls=[{"seq": 1, "b": 2, "a": 1}]
        )
        first = actors.agent.post(path, json=report, headers={"Idempotency-Key": "run-1"})
        reordered = {**report, "calls": [{"a": 1, "b": 2, "seq": 1}], "audit_log": None}
        again = actors.agent.post(path, json=reordered, headers={"Idempotency-Key": "run-1"})
        assert (first.status_code, again.status_code) == (201, 201)
        assert again.json() == first.json()
        assert again.headers["idempotent-replayed"] == "true"
        assert "idempotent-replayed" not in first.headers
        other = actors.agent.post(
            path, json={**report, "note": "another run"}, headers={"Idempotency-Key": "run-1"}
        )
        assert (other.status_code, other.json()["error"]) == (422, "idempotency_key_reused")
        without_key = actors.agent.post(path, json=report)
        assert (without_key.status_code, without_key.json()["state"]) == (409, "executed")
        assert len(actors.alice.get(path).json()["executions"]) == 1
        history = actors.alice.get(f"/v1/proposals/{proposal_id}").json()["history"]
        assert [event["event"] for event in history] == ["submitted", "approved", "claimed", "executed"]

    def test_a_refused_execution_report_is_not_remembered_under_its_key(self, actors: Actors) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        path = f"/v1/proposals/{proposal_id}/executions"
        report = {"revision": 1, "plan_sha256": answer["plan_sha256"], "calls": []}
        early = actors.agent.post(path, json=report, headers={"Idempotency-Key": "too-early"})
        assert (early.status_code, early.json()["error"]) == (409, "execution_refused")
        decide(actors.alice, proposal_id, 1, answer["plan_sha256"])
        report = claimed_report(actors.agent, proposal_id, 1, answer["plan_sha256"])
        later = actors.agent.post(path, json=report, headers={"Idempotency-Key": "too-early"})
        assert (later.status_code, later.json()["state"]) == (201, "executed")

    def test_keys_are_scoped_to_the_token(self, actors: Actors) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        assert decide(actors.alice, proposal_id, 1, answer["plan_sha256"], key="shared").status_code == 201
        bobs = decide(actors.bob, proposal_id, 1, answer["plan_sha256"], key="shared")
        assert bobs.status_code == 409, "bob's key is his own: not a replay of alice's answer"


class TestRevisions:
    def test_a_new_revision_supersedes_an_approval(self, actors: Actors) -> None:
        proposal_id = unique_id()
        first = submit(actors.agent, proposal_id)
        assert decide(actors.alice, proposal_id, 1, first["plan_sha256"]).status_code == 201
        second = submit(actors.agent, proposal_id, 2)
        state = actors.agent.get(f"/v1/proposals/{proposal_id}/decision").json()
        assert (state["state"], state["revision"], state["plan_sha256"]) == (
            "pending",
            2,
            second["plan_sha256"],
        )
        old_claim = claim(actors.agent, proposal_id, 1, first["plan_sha256"])
        assert (old_claim.status_code, old_claim.json()["latest_revision"]) == (412, 2)
        record = actors.alice.get(f"/v1/proposals/{proposal_id}").json()
        assert [revision["state"] for revision in record["revisions"]] == ["superseded", "pending"]

    def test_resubmitting_a_stored_revision_with_the_same_plan_answers_200(self, actors: Actors) -> None:
        proposal_id = unique_id()
        first = submit(actors.agent, proposal_id)
        again = actors.agent.post("/v1/proposals", content=body(proposal(proposal_id)))
        assert again.status_code == 200
        assert again.json() == first
        submit(actors.agent, proposal_id, 2)
        old = actors.agent.post("/v1/proposals", content=body(proposal(proposal_id)))
        assert (old.status_code, old.json()["state"]) == (200, "superseded")
        history = actors.alice.get(f"/v1/proposals/{proposal_id}").json()["history"]
        assert [event["event"] for event in history] == ["submitted", "submitted"]

    def test_another_plan_under_a_number_not_above_the_latest_is_409(self, actors: Actors) -> None:
        proposal_id = unique_id()
        submit(actors.agent, proposal_id)
        submit(actors.agent, proposal_id, 2)
        for revision in (1, 2):
            other_plan = body(proposal(proposal_id, revision, calls=5))
            response = actors.agent.post("/v1/proposals", content=other_plan)
            assert response.status_code == 409, response.text
            assert "revision 3" in response.json()["message"]

    def test_revision_numbers_start_at_one_and_do_not_skip(self, actors: Actors) -> None:
        proposal_id = unique_id()
        assert actors.agent.post("/v1/proposals", content=body(proposal(proposal_id, 2))).status_code == 409
        submit(actors.agent, proposal_id)
        assert actors.agent.post("/v1/proposals", content=body(proposal(proposal_id, 3))).status_code == 409

    def test_each_revision_is_served_whole_as_submitted(self, actors: Actors) -> None:
        proposal_id = unique_id()
        sent = body(proposal(proposal_id, calls=7))
        assert actors.agent.post("/v1/proposals", content=sent).status_code == 201
        response = actors.alice.get(f"/v1/proposals/{proposal_id}/revisions/1")
        assert response.content == sent
        assert actors.alice.get(f"/v1/proposals/{proposal_id}/revisions/2").status_code == 404


class TestExecutions:
    def test_an_approval_authorizes_one_execution(self, actors: Actors) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        digest = answer["plan_sha256"]
        early = claim(actors.agent, proposal_id, 1, digest)
        assert (early.status_code, early.json()["state"]) == (409, "pending"), "not approved yet"
        decide(actors.alice, proposal_id, 1, digest)
        assert claim(actors.alice, proposal_id, 1, digest).status_code == 403, "a reviewer claims nothing"
        assert claim(actors.other_agent, proposal_id, 1, digest).status_code == 404
        report = claimed_report(actors.agent, proposal_id, 1, digest, calls=[{"seq": 1}], audit_log=[])
        path = f"/v1/proposals/{proposal_id}/executions"
        assert actors.alice.post(path, json=report).status_code == 403, "a reviewer reports no execution"
        assert actors.other_agent.post(path, json=report).status_code == 404
        assert actors.agent.post(path, json=report).status_code == 201
        second = actors.agent.post(path, json=report)
        assert (second.status_code, second.json()["state"]) == (409, "executed")
        again = claim(actors.agent, proposal_id, 1, digest)
        assert (again.status_code, again.json()["state"]) == (409, "executed")

    def test_a_claim_is_single_use_and_a_second_runner_is_refused_naming_the_holder(
        self, actors: Actors
    ) -> None:
        proposal_id = unique_id()
        digest = submit(actors.agent, proposal_id)["plan_sha256"]
        decide(actors.alice, proposal_id, 1, digest)
        first = claim(actors.agent, proposal_id, 1, digest, key="runner-1")
        retried = claim(actors.agent, proposal_id, 1, digest, key="runner-1")
        assert (first.status_code, retried.status_code) == (201, 201)
        assert retried.json() == first.json(), "a retried claim is the same claim"
        second = claim(actors.agent, proposal_id, 1, digest, key="runner-2")
        assert second.status_code == 409
        assert (second.json()["state"], second.json()["claimed_by"]) == ("claimed", "agent")
        assert "already holds" in second.json()["message"]
        history = actors.alice.get(f"/v1/proposals/{proposal_id}").json()["history"]
        assert [event["event"] for event in history] == ["submitted", "approved", "claimed"]

    def test_a_report_without_its_claim_is_409_and_stores_nothing(self, actors: Actors) -> None:
        proposal_id = unique_id()
        digest = submit(actors.agent, proposal_id)["plan_sha256"]
        decide(actors.alice, proposal_id, 1, digest)
        path = f"/v1/proposals/{proposal_id}/executions"
        unclaimed = {"revision": 1, "plan_sha256": digest, "calls": []}
        assert actors.agent.post(path, json=unclaimed).status_code == 409
        made_up = {**unclaimed, "claim_id": "0" * 32}
        assert actors.agent.post(path, json=made_up).status_code == 409
        assert actors.alice.get(path).json()["executions"] == []
        assert actors.alice.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "approved"

    def test_a_claimed_run_cannot_be_superseded_and_its_report_names_how_it_ended(
        self, actors: Actors
    ) -> None:
        proposal_id = unique_id()
        digest = submit(actors.agent, proposal_id)["plan_sha256"]
        decide(actors.alice, proposal_id, 1, digest)
        report = claimed_report(actors.agent, proposal_id, 1, digest, ended="failed", calls=[{"seq": 1}])
        replan = actors.agent.post("/v1/proposals", content=body(proposal(proposal_id, 2)))
        assert (replan.status_code, replan.json()["claimed_by"]) == (409, "agent")
        path = f"/v1/proposals/{proposal_id}/executions"
        assert actors.agent.post(path, json={**report, "revision": 2}).status_code == 412
        assert actors.agent.post(path, json=report).status_code == 201
        [stored] = actors.alice.get(path).json()["executions"]
        assert (stored["claim_id"], stored["ended"]) == (report["claim_id"], "failed")
        assert submit(actors.agent, proposal_id, 2)["state"] == "pending", "after the report, a re-plan"

    def test_a_reviewer_reads_each_execution_back_exactly_oldest_first(self, actors: Actors) -> None:
        proposal_id = unique_id()
        path = f"/v1/proposals/{proposal_id}/executions"
        reports = []
        for revision in (1, 2):
            answer = submit(actors.agent, proposal_id, revision)
            listed = actors.alice.get(path).json()
            assert listed["proposal_id"] == proposal_id
            assert len(listed["executions"]) == revision - 1, "the revision not yet run has no report"
            decide(actors.alice, proposal_id, revision, answer["plan_sha256"])
            report = {
                "revision": revision,
                "plan_sha256": answer["plan_sha256"],
                "claim_id": claim(actors.agent, proposal_id, revision, answer["plan_sha256"]).json()[
                    "claim_id"
                ],
                "calls": [
                    {"seq": 1, "tool": "update_ticket", "args": {"id": "t1", "tags": [None, {"x": 0.1}]}},
                    {"seq": 2, "tool": "note", "args": {"text": "éè \u2028 ✓", "big": 2**53 - 1}},
                ],
                "audit_log": [{"at": "2026-10-15T09:01:00Z", "line": revision}] if revision == 2 else None,
                "note": "ran all calls" if revision == 2 else None,
            }
            assert actors.agent.post(path, json=report).status_code == 201
            reports.append(report)

        response = actors.alice.get(path)
        assert response.status_code == 200, response.text
        executions = response.json()["executions"]
        assert actors.agent.get(path).json()["executions"] == executions, "its agent reads the same"
        assert actors.other_agent.get(path).status_code == 404
        history = actors.alice.get(f"/v1/proposals/{proposal_id}").json()["history"]
        executed_at = [event["at"] for event in history if event["event"] == "executed"]
        assert len(executions) == 2
        for execution, report, at in zip(executions, reports, executed_at, strict=True):
            assert execution.pop("executed_by") == "agent"
            assert execution.pop("at") == at
            assert execution == {key: value for key, value in report.items() if value is not None}

    def test_a_rejected_plan_cannot_execute(self, actors: Actors) -> None:
        proposal_id = unique_id()
        answer = submit(actors.agent, proposal_id)
        decide(actors.alice, proposal_id, 1, answer["plan_sha256"], "reject")
        response = claim(actors.agent, proposal_id, 1, answer["plan_sha256"])
        assert (response.status_code, response.json()["state"]) == (409, "rejected")


def test_the_trail_is_append_only_and_shown_in_the_history(actors: Actors, service: Service) -> None:
    proposal_id = unique_id()
    first = submit(actors.agent, proposal_id)
    decide(actors.alice, proposal_id, 1, first["plan_sha256"], "reject", reason="too broad")
    second = submit(actors.agent, proposal_id, 2)
    decide(actors.bob, proposal_id, 2, second["plan_sha256"], "approve")
    actors.agent.post(
        f"/v1/proposals/{proposal_id}/executions",
        json=claimed_report(actors.agent, proposal_id, 2, second["plan_sha256"]),
    )
    history = actors.agent.get(f"/v1/proposals/{proposal_id}").json()["history"]
    assert [(event["event"], event["actor"], event["revision"]) for event in history] == [
        ("submitted", "agent", 1),
        ("rejected", "alice", 1),
        ("submitted", "agent", 2),
        ("approved", "bob", 2),
        ("claimed", "agent", 2),
        ("executed", "agent", 2),
    ]
    assert history[1]["reason"] == "too broad"
    with sqlite3.connect(service.db) as db:
        for statement in ("UPDATE trail SET actor = 'mallory'", "DELETE FROM trail", "DELETE FROM decisions"):
            with pytest.raises(sqlite3.IntegrityError, match="append-only"):
                db.execute(statement)


def test_the_database_is_in_wal_mode_with_full_sync(service: Service) -> None:
    with sqlite3.connect(service.db) as db:
        assert db.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    store = SQLiteStore(service.db, StoreSettings(clock=time.time, pending_ttl=60, approval_ttl=60))
    try:
        assert store._connection().execute("PRAGMA synchronous").fetchone()[0] == 2  # FULL
    finally:
        store.close()


class TestList:
    def test_newest_first_with_a_cursor_and_a_state_filter(self, actors: Actors) -> None:
        ids = [unique_id("list") for _ in range(5)]
        answers = [submit(actors.agent, proposal_id) for proposal_id in ids]
        decide(actors.alice, ids[0], 1, answers[0]["plan_sha256"], "reject")
        first = actors.alice.get("/v1/proposals", params={"limit": 3}).json()
        assert [summary["proposal_id"] for summary in first["proposals"]] == ids[::-1][:3]
        rest = actors.alice.get("/v1/proposals", params={"limit": 3, "cursor": first["next_cursor"]}).json()
        assert [summary["proposal_id"] for summary in rest["proposals"]][:2] == ids[::-1][3:]
        rejected = actors.alice.get("/v1/proposals", params={"state": "rejected"}).json()["proposals"]
        assert ids[0] in {summary["proposal_id"] for summary in rejected}
        assert all(summary["state"] == "rejected" for summary in rejected)

    def test_a_poll_that_finds_nothing_new_is_a_bodiless_304(self, actors: Actors) -> None:
        first = actors.alice.get("/v1/proposals")
        etag = first.headers["etag"]
        unchanged = actors.bob.get("/v1/proposals", headers={"If-None-Match": etag})
        assert unchanged.status_code == 304
        assert unchanged.content == b""
        assert unchanged.headers["etag"] == etag
        submit(actors.agent, unique_id())
        changed = actors.alice.get("/v1/proposals", headers={"If-None-Match": etag})
        assert changed.status_code == 200
        assert changed.headers["etag"] != etag

    def test_an_unchanged_poll_still_checks_its_token_and_is_counted_not_logged(
        self, service: Service, actors: Actors
    ) -> None:
        """The 304 of an unchanged list is answered before the routes: it must refuse what they refuse.
        Polls answered 304 are counted in /metrics, not logged one by one (`--access-log all` would)."""
        unchanged = {"If-None-Match": actors.alice.get("/v1/proposals").headers["etag"]}
        assert actors.agent.get("/v1/proposals", headers=unchanged).status_code == 403
        with service.client() as anonymous:
            unknown = {**unchanged, "Authorization": "Bearer rvw_not-a-real-token"}
            assert anonymous.get("/v1/proposals", headers=unknown).status_code == 401
        name = unique_id("poller")
        refused = "GET /v1/proposals 401 "
        with service.client(service.token(name, "reviewer")) as client:
            assert client.get("/v1/proposals", headers=unchanged).status_code == 304
            assert client.get("/v1/proposals", params={"limit": 50}, headers=unchanged).status_code == 304
            revoke = reviewer_command("token", "revoke", name, "--db", str(service.db))
            subprocess.run(revoke, check=True, capture_output=True)
            before = service.log().count(refused)
            assert client.get("/v1/proposals", headers=unchanged).status_code == 401
        for _ in range(500):  # the line is written just after the answer is sent
            if service.log().count(refused) > before:
                break
            time.sleep(0.01)
        assert service.log().count(refused) > before, "the refusal after the 304s is logged"
        assert f"GET /v1/proposals 304 {name} " not in service.log()


TTL = 1.0


class Clocked:
    """The service's app in this process on an injected clock, with TTLs of one second: time moves
    when a test moves it, never by waiting. The clients are the same httpx clients the served tests use."""

    def __init__(self, db: Path) -> None:
        self.now = 1_800_000_000.0
        app = create_app(db, clock=lambda: self.now, pending_ttl=TTL, approval_ttl=TTL)
        tokens = {name: mint_token() for name in ("alice", "agent")}
        app.state.store.create_token("alice", "reviewer", hash_token(tokens["alice"]))
        app.state.store.create_token("agent", "agent", hash_token(tokens["agent"]))
        self.alice, self.agent = (
            TestClient(app, base_url="http://queue", headers={"Authorization": f"Bearer {tokens[name]}"})
            for name in ("alice", "agent")
        )

    def close(self) -> None:
        self.alice.close()
        self.agent.close()


@pytest.fixture
def clocked(tmp_path: Path) -> Iterator[Clocked]:
    made = Clocked(tmp_path / "queue.sqlite3")
    yield made
    made.close()


class TestExpiry:
    def test_serve_takes_its_ttls_from_the_command_line(self, tmp_path: Path) -> None:
        service = start_service(tmp_path, "--pending-ttl", "600", "--approval-ttl", "30")
        actors = make_actors(service)
        try:
            proposal_id = unique_id()
            answer = submit(actors.agent, proposal_id)
            pending = actors.agent.get(f"/v1/proposals/{proposal_id}/decision").json()
            submitted = actors.alice.get(f"/v1/proposals/{proposal_id}").json()["history"][0]["at"]
            assert seconds(pending["expires_at"]) - seconds(submitted) == pytest.approx(600)
            approved = decide(actors.alice, proposal_id, 1, answer["plan_sha256"]).json()
            assert seconds(approved["expires_at"]) - seconds(approved["decided_at"]) == pytest.approx(30)
        finally:
            actors.close()
            service.stop()

    def test_a_pending_proposal_expires_and_cannot_be_decided(self, clocked: Clocked) -> None:
        proposal_id = unique_id()
        answer = submit(clocked.agent, proposal_id)
        etag = clocked.alice.get("/v1/proposals").headers["etag"]
        clocked.now += TTL - 0.01
        assert clocked.agent.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "pending"
        clocked.now += 0.01
        assert clocked.agent.get(f"/v1/proposals/{proposal_id}/decision").json()["state"] == "expired"
        late = decide(clocked.alice, proposal_id, 1, answer["plan_sha256"])
        assert (late.status_code, late.json()["state"]) == (409, "expired")
        poll = clocked.alice.get("/v1/proposals", headers={"If-None-Match": etag})
        assert poll.status_code == 200, "an expiry changes the list, so the ETag changes too"

    def test_an_expired_approval_authorizes_nothing(self, clocked: Clocked) -> None:
        proposal_id = unique_id()
        answer = submit(clocked.agent, proposal_id)
        assert decide(clocked.alice, proposal_id, 1, answer["plan_sha256"]).status_code == 201
        clocked.now += TTL
        state = clocked.agent.get(f"/v1/proposals/{proposal_id}/decision").json()
        assert (state["state"], state["decided_by"]) == ("expired", "alice")
        response = claim(clocked.agent, proposal_id, 1, answer["plan_sha256"])
        assert (response.status_code, response.json()["state"]) == (409, "expired")
        assert submit(clocked.agent, proposal_id, 2)["state"] == "pending", "a re-plan asks again"


def seconds(timestamp: str) -> float:
    return datetime.fromisoformat(timestamp).timestamp()
