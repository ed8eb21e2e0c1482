"""The queue under a policy: registered keys, signed decisions verified on decide, quorums of two.

A real `reviewer serve --policy` on a loopback port, tokens and keys made with the real commands,
signatures made by a real ssh-agent and checked again with `ssh-keygen -Y verify`.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.signed_approvals import SignedStatement, check_signed_approvals
from reviewer.signing.sshsig import DecisionStatement, Signer, sign_statement, signer_for
from tests.forked_commands import run_reviewer
from tests.policies import signed_in_production
from tests.queue_harness import Service, body, proposal, reviewer_command, start_service, unique_id
from tests.signing.ssh import Agent, SshKey, make_key, ssh_keygen_verify

POLICY = signed_in_production(2, "alice", "bob", "carol")


@dataclass
class Team:
    service: Service
    keys: dict[str, SshKey]
    signers: dict[str, Signer]
    clients: dict[str, httpx.Client]
    folder: Path

    def submit(
        self, environment: str = "production", revision: int = 1, proposal_id: str = ""
    ) -> dict[str, Any]:
        proposal_id = proposal_id or unique_id("signed")
        document = proposal(proposal_id, revision, calls=revision + 1)
        document["target"]["environment"] = environment
        response = self.clients["agent"].post("/v1/proposals", content=body(document))
        assert response.status_code == 201, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def decide(
        self,
        who: str,
        answer: dict[str, Any],
        decision: str = "approve",
        signer: str | None = None,
        sign: bool = True,
        statement_changes: dict[str, Any] | None = None,
    ) -> httpx.Response:
        request: dict[str, Any] = {
            "revision": answer["revision"],
            "plan_sha256": answer["plan_sha256"],
            "decision": decision,
            "reason": "looks right" if decision == "approve" else "not today",
        }
        if sign:
            fields: dict[str, Any] = {
                "proposal_id": answer["proposal_id"],
                "revision": answer["revision"],
                "plan_sha256": answer["plan_sha256"],
                "decision": decision,
                "reviewer": who,
                "signed_at": "2026-11-30T09:00:00Z",
                **(statement_changes or {}),
            }
            statement = DecisionStatement(**fields)
            request["statement"] = statement.to_bytes().decode()
            request["signature"] = sign_statement(statement, self.signers[signer or who])
        return self.clients[who].post(
            f"/v1/proposals/{answer['proposal_id']}/decisions",
            json=request,
            headers={"Idempotency-Key": unique_id("key")},
        )

    def state(self, proposal_id: str) -> dict[str, Any]:
        response = self.clients["alice"].get(f"/v1/proposals/{proposal_id}/decision")
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def allowed_signers(self) -> str:
        """What an operator exports with `reviewer keys list --allowed-signers`."""
        return run(self.service, "keys", "list", "--allowed-signers").stdout


def run(service: Service, *args: str) -> subprocess.CompletedProcess[str]:
    return run_reviewer(
        reviewer_command(*args, "--db", str(service.db)), capture_output=True, text=True, timeout=60
    )


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    folder = tmp_path_factory.mktemp("team")
    policy = folder / "policy.toml"
    policy.write_text(POLICY)
    service = start_service(folder, "--policy", str(policy))
    keys = {name: make_key(folder, name) for name in ("alice", "bob", "carol", "mallory", "stranger")}
    tokens = {}
    for name in ("alice", "bob", "carol", "mallory"):
        made = run(
            service,
            "token",
            "create",
            "--name",
            name,
            "--role",
            "reviewer",
            "--ssh-key",
            str(keys[name].public_file),
        )
        assert made.returncode == 0, made.stderr
        assert f"registered ssh-ed25519 {keys[name].public.fingerprint} for {name}" in made.stderr
        tokens[name] = made.stdout.strip()
    tokens["agent"] = service.token("agent", "agent")
    clients = {name: service.client(token) for name, token in tokens.items()}
    signers = {name: signer_for(key.private) for name, key in keys.items()}
    yield Team(service, keys, signers, clients, folder)
    for client in clients.values():
        client.close()
    service.stop()


def test_a_policy_of_two_waits_for_a_second_reviewer_and_the_signatures_verify_anywhere(team: Team) -> None:
    answer = team.submit()
    first = team.decide("alice", answer)
    assert first.status_code == 201, first.text
    assert first.json()["state"] == "pending"
    assert first.json()["approvals"] == ["alice"] and first.json()["approvals_required"] == 2

    again = team.decide("alice", answer)
    assert again.status_code == 409 and again.json()["error"] == "already_approved"
    assert "1 of 2 approvals (alice)" in again.json()["message"]

    second = team.decide("bob", answer)
    assert second.status_code == 201, second.text
    state = team.state(answer["proposal_id"])
    assert state["state"] == "approved" and state["decided_by"] == "alice, bob"
    assert state["approvals"] == ["alice", "bob"] and state["signatures_required"] is True
    assert [(item["reviewer"], item["decision"]) for item in state["signatures"]] == [
        ("alice", "approve"),
        ("bob", "approve"),
    ]

    allowed = team.allowed_signers()
    for item in state["signatures"]:
        check = ssh_keygen_verify(
            allowed, item["reviewer"], item["signature"], item["statement"].encode(), team.folder
        )
        assert check.returncode == 0, check.stderr
        assert item["key_fingerprint"] == team.keys[item["reviewer"]].public.fingerprint
    verdict = check_signed_approvals(
        AllowedSigners.parse(allowed),
        2,
        answer["proposal_id"],
        answer["revision"],
        answer["plan_sha256"],
        [SignedStatement(item["statement"], item["signature"]) for item in state["signatures"]],
    )
    assert verdict.authorized, verdict.explain()


def test_a_rejection_after_one_approval_rejects(team: Team) -> None:
    answer = team.submit()
    assert team.decide("alice", answer).status_code == 201
    rejected = team.decide("carol", answer, "reject")
    assert rejected.status_code == 201, rejected.text
    state = team.state(answer["proposal_id"])
    assert state["state"] == "rejected" and state["decided_by"] == "carol" and state["reason"] == "not today"
    assert team.decide("bob", answer).status_code == 409


@pytest.mark.parametrize(
    ("changes", "field"),
    [
        ({"plan_sha256": "f" * 64}, "statement.plan_sha256"),
        ({"revision": 7}, "statement.revision"),
        ({"proposal_id": "another"}, "statement.proposal_id"),
        ({"decision": "reject"}, "statement.decision"),
        ({"reviewer": "bob"}, "statement.reviewer"),
    ],
)
def test_a_signature_naming_another_decision_is_refused_and_changes_nothing(
    team: Team, changes: dict[str, Any], field: str
) -> None:
    answer = team.submit()
    refused = team.decide("alice", answer, statement_changes=changes)
    assert refused.status_code == 422, refused.text
    assert refused.json()["error"] == "signature_refused" and refused.json()["message"].startswith(field)
    state = team.state(answer["proposal_id"])
    assert state["state"] == "pending" and state["approvals"] == [] and state["signatures"] == []


def test_a_signature_by_a_key_not_registered_for_the_reviewer_is_refused(team: Team) -> None:
    answer = team.submit()
    for signer in ("stranger", "bob"):
        refused = team.decide("alice", answer, signer=signer)
        assert refused.status_code == 422
        assert "not registered for alice" in refused.json()["message"]
    assert team.state(answer["proposal_id"])["approvals"] == []


def test_malformed_signature_and_missing_signature_are_refused_naming_the_field(team: Team) -> None:
    answer = team.submit()
    url = f"/v1/proposals/{answer['proposal_id']}/decisions"
    base = {"revision": 1, "plan_sha256": answer["plan_sha256"], "decision": "approve"}
    statement = (
        DecisionStatement(
            answer["proposal_id"], 1, answer["plan_sha256"], "approve", "alice", "2026-11-30T09:00:00Z"
        )
        .to_bytes()
        .decode()
    )
    cases = [
        ({**base}, "signature: the policy requires signed decisions for environment 'production'"),
        ({**base, "statement": statement}, "signature: missing"),
        (
            {
                **base,
                "statement": statement,
                "signature": "-----BEGIN SSH SIGNATURE-----\nAAAA\n-----END SSH SIGNATURE-----",
            },
            "signature: ",
        ),
        (
            {**base, "statement": statement + " ", "signature": "x"},
            "statement: not in RFC 8785 canonical form",
        ),
        ({**base, "statement": "{}", "signature": "x"}, "statement.decision: missing"),
    ]
    for request, message in cases:
        response = team.clients["alice"].post(url, json=request, headers={"Idempotency-Key": unique_id("k")})
        assert response.status_code == 422, response.text
        assert response.json()["message"].startswith(message), response.json()["message"]
    too_long = {**base, "statement": statement, "signature": "x" * 20_000}
    response = team.clients["alice"].post(url, json=too_long, headers={"Idempotency-Key": unique_id("k")})
    assert response.status_code == 422 and "$.signature" in response.json()["message"]
    assert team.state(answer["proposal_id"])["approvals"] == []


def test_a_reviewer_the_policy_does_not_list_may_not_decide(team: Team) -> None:
    answer = team.submit()
    refused = team.decide("mallory", answer)
    assert refused.status_code == 403
    assert "mallory may not decide environment 'production'" in refused.json()["message"]


def test_another_environment_takes_the_default_one_unsigned_approval(team: Team) -> None:
    answer = team.submit("staging")
    approved = team.decide("mallory", answer, sign=False)
    assert approved.status_code == 201 and approved.json()["state"] == "approved"
    assert approved.json()["approvals_required"] == 1 and approved.json()["signatures"] == []


def test_an_environment_spelled_differently_gets_its_rule_all_the_same(team: Team) -> None:
    answer = team.submit(" PRODUCTION")
    assert team.decide("alice", answer).json()["state"] == "pending"


def test_an_approval_written_into_the_database_by_hand_makes_the_executor_run_nothing(team: Team) -> None:
    """Someone with the queue's database marks a proposal approved, with statements they made up."""
    answer = team.submit()
    proposal_id = answer["proposal_id"]
    forged_statement = (
        DecisionStatement(proposal_id, 1, answer["plan_sha256"], "approve", "bob", "2026-11-30T09:00:00Z")
        .to_bytes()
        .decode()
    )
    stranger_signature = sign_statement(DecisionStatement.parse(forged_statement), team.signers["stranger"])
    with sqlite3.connect(team.service.db) as db:
        for actor, signature in (("bob", stranger_signature), ("carol", None)):
            db.execute(
                "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256, reason, "
                "statement, signature, key_fingerprint) "
                "VALUES (strftime('%s','now'), ?, 'approved', ?, 1, ?, NULL, ?, ?, 'x')",
                (actor, proposal_id, answer["plan_sha256"], forged_statement, signature),
            )
        db.execute(
            "INSERT INTO decisions (proposal_id, revision, plan_sha256, decision, reason, decided_by, "
            "decided_at, expires_at) "
            "VALUES (?, 1, ?, 'approve', '', 'bob, carol', strftime('%s','now'), 4e9)",
            (proposal_id, answer["plan_sha256"]),
        )
        db.execute(
            "UPDATE proposals SET decision = 'approve', decided_by = 'bob, carol', "
            "approval_expires_at = 4e9, decision_id = last_insert_rowid() WHERE proposal_id = ?",
            (proposal_id,),
        )
    state = team.state(proposal_id)
    assert state["state"] == "approved"  # the queue believes its database
    verdict = check_signed_approvals(
        AllowedSigners.parse(team.allowed_signers()),
        2,
        proposal_id,
        1,
        answer["plan_sha256"],
        [SignedStatement(item["statement"], item["signature"]) for item in state["signatures"]],
    )
    assert not verdict.authorized and verdict.signers == ()
    assert "not allowed to sign for bob" in verdict.explain()


def test_a_decision_record_carries_the_statements_in_its_trail(team: Team) -> None:
    answer = team.submit()
    assert team.decide("carol", answer).status_code == 201
    record = team.clients["alice"].get(f"/v1/proposals/{answer['proposal_id']}").json()
    approved = [event for event in record["history"] if event["event"] == "approved"]
    assert len(approved) == 1 and approved[0]["actor"] == "carol"
    assert json.loads(approved[0]["statement"])["reviewer"] == "carol"
    assert approved[0]["signature"].startswith("-----BEGIN SSH SIGNATURE-----")
    assert record["latest"]["approvals"] == ["carol"]


def test_reviewer_approve_signs_through_a_forwarded_agent(team: Team, agent: Agent) -> None:
    """The key only in the agent, as with `ssh -A`: the command signs, the queue verifies."""
    agent.add(team.keys["bob"])
    public_only = team.folder / "bob-only.pub"
    public_only.write_text(team.keys["bob"].public_file.read_text())
    answer = team.submit()
    env = {k: v for k, v in os.environ.items() if k not in ("REVIEWER_SIGNING_KEY", "XDG_CONFIG_HOME")}
    tokens_file = team.folder / "unused-config"
    bob_token = team.clients["bob"].headers["Authorization"].removeprefix("Bearer ")
    env.update(
        REVIEWER_QUEUE=team.service.url,
        REVIEWER_TOKEN=bob_token,
        REVIEWER_SIGNING_KEY=str(public_only),
        SSH_AUTH_SOCK=agent.socket,
        XDG_CONFIG_HOME=str(tokens_file),
    )
    result = run_reviewer(
        reviewer_command(
            "approve", answer["proposal_id"], "--revision", "1", "--digest", answer["plan_sha256"]
        ),
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith("pending, 1 of 2 approvals (bob) (signed)")
    assert bob_token not in result.stdout + result.stderr
    assert [item["reviewer"] for item in team.state(answer["proposal_id"])["signatures"]] == ["bob"]


# --- the key commands ----------------------------------------------------------------------------


def test_keys_add_list_remove(team: Team, tmp_path: Path) -> None:
    spare = make_key(tmp_path, "carol-laptop")
    added = run(team.service, "keys", "add", "carol", str(spare.public_file))
    assert added.returncode == 0, added.stderr
    listed = run(team.service, "keys", "list", "carol").stdout.splitlines()
    assert [line.split("\t")[1] for line in listed] == [
        team.keys["carol"].public.fingerprint,
        spare.public.fingerprint,
    ]
    assert "carol-laptop@test" in listed[1]

    assert run(team.service, "keys", "add", "bob", str(spare.public_file)).stderr.strip() == (
        f"reviewer keys add: the key {spare.public.fingerprint} is already registered for 'carol'"
    )
    assert (
        "not a reviewer's token name"
        in run(team.service, "keys", "add", "agent", str(spare.public_file)).stderr
    )
    assert run(team.service, "keys", "remove", "carol", spare.public.fingerprint).returncode == 0
    assert run(team.service, "keys", "remove", "carol", spare.public.fingerprint).returncode == 1
    assert len(run(team.service, "keys", "list", "carol").stdout.splitlines()) == 1


def test_token_create_refuses_a_file_that_is_no_public_key(team: Team, tmp_path: Path) -> None:
    junk = tmp_path / "junk.pub"
    junk.write_text("hello\n")
    made = run(
        team.service, "token", "create", "--name", "dave", "--role", "reviewer", "--ssh-key", str(junk)
    )
    assert made.returncode == 2 and made.stdout == ""
    assert "not an SSH public key" in made.stderr and "no token was made" in made.stderr
    agent_key = run(
        team.service,
        "token",
        "create",
        "--name",
        "bot",
        "--role",
        "agent",
        "--ssh-key",
        str(team.keys["alice"].public_file),
    )
    assert agent_key.returncode == 2 and "--ssh-key is for reviewers" in agent_key.stderr


def test_serve_refuses_a_broken_policy_and_names_the_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[environments.production]\napprovals = 2\nsignatures = "yes"\n')
    started = run_reviewer(
        reviewer_command(
            "serve", "--db", str(tmp_path / "q.sqlite3"), "--port", "1", "--policy", str(policy)
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2
    assert started.stderr.strip() == (
        f'reviewer serve: {policy} line 3: signatures must be true, false or "passkey"; not started'
    )


def test_a_runner_that_requires_signatures_refuses_a_forged_approval_and_runs_a_signed_one(
    team: Team, tmp_path: Path
) -> None:
    """The agent library itself holds the allowed-signers file: the queue's "approved" made up in its
    database is refused before any claim or write; two real signed approvals run, once. Then the
    queue's database is edited (its append-only triggers dropped, the claim and report deleted) so it
    offers the executed approval again: the executor's own ledger refuses it, and only an executor
    without that ledger would send the write a second time."""
    import asyncio

    from reviewer.agent import AlreadyRun, NotApproved, QueueAgent, local_approval
    from reviewer.queue.client import QueueClient
    from reviewer.sample_api.server import sample_api_in_thread

    allowed = AllowedSigners.parse(team.allowed_signers())
    token = team.clients["agent"].headers["authorization"].removeprefix("Bearer ")

    def forge(proposal_id: str, digest: str) -> None:
        with sqlite3.connect(team.service.db) as db:
            db.execute(
                "INSERT INTO decisions (proposal_id, revision, plan_sha256, decision, reason, decided_by, "
                "decided_at, expires_at) VALUES (?, 1, ?, 'approve', '', 'bob', strftime('%s','now'), 4e9)",
                (proposal_id, digest),
            )
            db.execute(
                "UPDATE proposals SET decision = 'approve', decided_by = 'bob', approval_expires_at = 4e9, "
                "decision_id = last_insert_rowid() WHERE proposal_id = ?",
                (proposal_id,),
            )

    with sample_api_in_thread() as api_server:

        async def run(proposal_id: str, ledger: Path = tmp_path / "ledger.jsonl") -> object:
            async with (
                QueueClient(team.service.url, token) as queue,
                httpx.AsyncClient(base_url=api_server.base_url) as api,
            ):
                agent = QueueAgent(queue, allowed_signers=allowed, signatures_required=2, ledger=ledger)
                stored = await queue.get_revision(proposal_id, 1)
                approval = local_approval(stored)  # a digest-checked plan in hand, and no more
                try:
                    return await agent.execute(approval, client=api)
                except NotApproved as refused:
                    return refused

        def submitted(proposal_id: str) -> dict[str, Any]:
            document = proposal(proposal_id, 1, calls=1)
            document["target"] = {
                "api": "sample",
                "base_url": api_server.base_url,
                "environment": "production",
            }
            document["calls"][0]["request"] = {
                "method": "PATCH",
                "path": "/v1/tickets/t1",
                "body": {"status": "closed"},
            }
            document["calls"][0]["args"] = {"id": "t1", "status": "closed"}
            response = team.clients["agent"].post("/v1/proposals", content=body(document))
            assert response.status_code == 201, response.text
            answer: dict[str, Any] = response.json()
            return answer

        forged = submitted(unique_id("forged"))
        forge(forged["proposal_id"], forged["plan_sha256"])
        refused = asyncio.run(run(forged["proposal_id"]))
        assert isinstance(refused, NotApproved), refused
        assert "requires signed approvals: 0 of 2" in str(refused)
        state = team.state(forged["proposal_id"])
        assert state["state"] == "approved", "no claim was made"
        assert api_server.store.request_log == []
        [reported] = state["refusals"]  # the reviewers see why the approval sits unrun
        assert (reported["kind"], reported["refused_by"]) == ("signatures", "agent")
        assert reported["message"].startswith("UnsignedApproval: ") and "0 of 2" in reported["message"]

        signed = submitted(unique_id("signed-run"))
        for who in ("alice", "bob"):
            assert team.decide(who, signed).status_code == 201
        execution = asyncio.run(run(signed["proposal_id"]))
        assert not isinstance(execution, NotApproved), execution
        assert [(entry["method"], entry["path"]) for entry in api_server.store.request_log] == [
            ("PATCH", "/v1/tickets/t1")
        ]
        assert team.state(signed["proposal_id"])["state"] == "executed"

        def offer_again(proposal_id: str) -> None:
            """What whoever holds the database can do: make an executed approval claimable again."""
            with sqlite3.connect(team.service.db) as db:
                for table in ("claims", "executions"):
                    db.execute(f"DROP TRIGGER IF EXISTS {table}_no_delete")
                    db.execute(f"DELETE FROM {table} WHERE proposal_id = ?", (proposal_id,))
                db.execute(
                    "UPDATE proposals SET claim_id = NULL, claimed_by = NULL, claimed_at = NULL, "
                    "lease_expires_at = NULL, executed_at = NULL WHERE proposal_id = ?",
                    (proposal_id,),
                )

        offer_again(signed["proposal_id"])
        assert team.state(signed["proposal_id"])["state"] == "approved"
        again = asyncio.run(run(signed["proposal_id"]))
        assert isinstance(again, AlreadyRun), again
        assert "ledger" in str(again) and "claimed exactly this signed approval" in str(again)
        assert len(api_server.store.request_log) == 1, "the executor sent nothing the second time"
        [reported] = team.state(signed["proposal_id"])["refusals"]
        assert (reported["kind"], reported["refused_by"]) == ("ledger", "agent")
        assert (
            reported["message"].startswith("AlreadyRun: ")
            and str(tmp_path / "ledger.jsonl") in (reported["message"])
        )

        offer_again(signed["proposal_id"])
        forgetful = asyncio.run(run(signed["proposal_id"], tmp_path / "another-executor.jsonl"))
        assert not isinstance(forgetful, NotApproved), forgetful
        assert len(api_server.store.request_log) == 2, "the queue alone could not stop a second run"


def test_a_request_for_changes_is_signed_like_a_rejection_and_approves_nothing(team: Team) -> None:
    """Under a policy that requires signatures, `request_changes` needs one too (and one naming that
    decision); an executor's allowed-signers check counts a signed request for changes as a refusal,
    never as a signer, even beside a quorum of signed approvals."""
    answer = team.submit()
    unsigned = team.decide("carol", answer, "request_changes", sign=False)
    assert unsigned.status_code == 422 and "requires signed decisions" in unsigned.text
    mislabelled = team.decide("carol", answer, "request_changes", statement_changes={"decision": "approve"})
    assert mislabelled.status_code == 422 and "statement.decision" in mislabelled.text
    assert team.decide("alice", answer).status_code == 201
    assert team.decide("bob", answer).status_code == 201
    approvals = team.state(answer["proposal_id"])["signatures"]

    changes_answer = team.submit()
    asked = team.decide("carol", changes_answer, "request_changes")
    assert asked.status_code == 201, asked.text
    assert team.state(changes_answer["proposal_id"])["state"] == "changes_requested"
    statement = DecisionStatement(
        proposal_id=answer["proposal_id"],
        revision=answer["revision"],
        plan_sha256=answer["plan_sha256"],
        decision="request_changes",
        reviewer="carol",
        signed_at="2026-11-30T09:00:00Z",
    )
    changes = SignedStatement(statement.to_bytes().decode(), sign_statement(statement, team.signers["carol"]))
    verdict = check_signed_approvals(
        AllowedSigners.parse(team.allowed_signers()),
        2,
        answer["proposal_id"],
        answer["revision"],
        answer["plan_sha256"],
        [*(SignedStatement(item["statement"], item["signature"]) for item in approvals), changes],
    )
    assert not verdict.authorized, verdict.explain()
