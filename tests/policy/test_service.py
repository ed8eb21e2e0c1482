"""The policy in the real queue: `reviewer serve --policy` on a loopback port, driven over HTTP.

Rules that reject before any human, environments decided by the base URL, rules that fail closed,
approvals by policy signed with the queue's own key (checked with `ssh-keygen -Y verify` and by an
executor's allowed-signers check), the load messages, and a changed policy at restart.
"""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.signed_approvals import SignedStatement, check_signed_approvals
from reviewer.signing.sshsig import NAMESPACE, DecisionStatement
from tests.forked_commands import run_reviewer
from tests.policies import DELETES_IN_PRODUCTION, ONE_APPROVAL, kept_writes, staging_approved_by_policy
from tests.queue_harness import Service, body, decide, proposal, reviewer_command, start_service, unique_id
from tests.signing.ssh import SshKey, make_key, ssh_keygen_verify

POLICY = f"""\
[default]
approvals = 1

[environments.production]
base_urls = ["http://127.0.0.1:9/*"]
approvals = 1
reviewers = ["alice", "bob", "bbo"]

{staging_approved_by_policy("http://127.0.0.1:8080")}signatures = true

{DELETES_IN_PRODUCTION}
{kept_writes()}
[[rules]]
name = "small staging plans"
when = 'environment == "staging" && size(plan.calls) <= 2 && plan.calls.all(c, c.effect != "delete")'
approve = true

[[rules]]
name = "needs a ticket id"
when = 'plan.calls.exists(c, c.args.id == "t-none")'
approvals = 2
"""


@dataclass
class Queue:
    service: Service
    agent: httpx.Client
    alice: httpx.Client
    bob: httpx.Client
    key: SshKey
    folder: Path

    def submit(self, document: dict[str, Any]) -> dict[str, Any]:
        response = self.agent.post("/v1/proposals", content=body(document))
        assert response.status_code == 201, response.text
        answer: dict[str, Any] = response.json()
        return answer

    def state(self, proposal_id: str) -> dict[str, Any]:
        response = self.alice.get(f"/v1/proposals/{proposal_id}/decision")
        assert response.status_code == 200, response.text
        answer: dict[str, Any] = response.json()
        return answer


def plan(
    base_url: str, environment: str | None, *, effect: str = "update", calls: int = 3, **dry_run: Any
) -> dict[str, Any]:
    document = proposal(unique_id("policy"), calls=calls)
    document["target"] = {
        "api": "deskline",
        "base_url": base_url,
        **({"environment": environment} if environment else {}),
    }
    for call in document["calls"]:
        call["effect"] = effect
    document["dry_run"].update(dry_run)
    return document


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    folder = tmp_path_factory.mktemp("policy")
    (folder / "policy.toml").write_text(POLICY)
    key = make_key(folder, "queue")
    service = Service(
        db=folder / "queue.sqlite3",
        log_path=folder / "service.log",
        serve_args=("--policy", str(folder / "policy.toml"), "--policy-key", str(key.private)),
    )
    service.start()
    tokens = {
        name: service.token(name, role)
        for name, role in (("alice", "reviewer"), ("bob", "reviewer"), ("agent", "agent"))
    }
    service.stop()  # started again with its tokens, so its load messages can judge the reviewers listed
    service.log_path.write_text("")
    service.start()
    clients = {name: service.client(token) for name, token in tokens.items()}
    yield Queue(service, clients["agent"], clients["alice"], clients["bob"], key, folder)
    for client in clients.values():
        client.close()
    service.stop()


def test_serve_prints_the_rules_it_loaded_and_warns_of_reviewers_without_a_token(queue: Queue) -> None:
    log = queue.service.log()
    assert "policy: [environments.production] 1 approval by alice, bob, bbo; owns http://127.0.0.1:9/*" in log
    line = POLICY.splitlines().index('name = "kept writes"')  # the [[rules]] line before it, from 1
    assert f"policy: rule 'kept writes' (line {line}): when plan.dry_run.writes_kept > 0 → rejects:" in log
    assert "'alice', but" not in log and "'bob', but" not in log
    assert (
        "policy: [environments.production] lists reviewer 'bbo', but no reviewer token has that name" in log
    )


def test_kept_writes_are_rejected_by_the_policy_before_any_human(queue: Queue) -> None:
    document = plan("http://127.0.0.1:8080", "staging", writes_kept=3)
    answer = queue.submit(document)
    assert answer["state"] == "rejected"
    state = queue.agent.get(f"/v1/proposals/{document['proposal_id']}/decision").json()
    assert state["state"] == "rejected" and state["decided_by"] == "policy:kept writes"
    assert state["reason"] == "the API ignored the dry-run flag; fix the tool before asking a human"
    late = decide(queue.alice, document["proposal_id"], 1, answer["plan_sha256"])
    assert late.status_code == 409


def test_a_production_base_url_gets_production_s_rule_whatever_the_plan_says(queue: Queue) -> None:
    document = plan("http://127.0.0.1:9/v1", "staging", effect="delete")
    answer = queue.submit(document)
    assert answer["state"] == "pending"
    state = queue.state(document["proposal_id"])
    assert state["approvals_required"] == 2
    policy = state["policy"]
    assert policy["environment"] == "production"
    assert policy["needs"] == "needs 2 approvals, by alice, bob, bbo: rule `deletes in production`"
    assert policy["rules"] == [{"rule": "deletes in production", "asks": "needs 2 approvals"}]
    assert "says environment 'staging', but its base URL is 'production''s" in policy["alarms"][0]
    assert decide(queue.alice, document["proposal_id"], 1, answer["plan_sha256"]).json()["state"] == "pending"
    assert decide(queue.bob, document["proposal_id"], 1, answer["plan_sha256"]).json()["state"] == "approved"


def test_a_rule_that_raises_is_fail_closed_and_the_state_says_which(queue: Queue) -> None:
    document = plan("http://127.0.0.1:8080", "staging", calls=1)
    del document["calls"][0]["args"]["id"]
    answer = queue.submit(document)
    assert answer["state"] == "pending"
    rules = queue.state(document["proposal_id"])["policy"]["rules"]
    failed = [rule for rule in rules if rule.get("error")]
    assert [rule["rule"] for rule in failed] == ["needs a ticket id"]
    assert "id" in failed[0]["error"]


def test_an_approval_by_policy_is_signed_by_the_queue_s_key_and_trusted_only_where_listed(
    queue: Queue,
) -> None:
    document = plan("http://127.0.0.1:8080/v1", "staging", calls=2)
    answer = queue.submit(document)
    assert answer["state"] == "approved"
    state = queue.agent.get(f"/v1/proposals/{document['proposal_id']}/decision").json()
    assert state["decided_by"] == "policy:small staging plans"
    [signed] = state["signatures"]
    assert signed["reviewer"] == "policy:small staging plans"
    assert DecisionStatement.parse(signed["statement"]).reviewer == "queue-policy"
    trusting = f'queue-policy namespaces="{NAMESPACE}" {queue.key.public.openssh()}\n'
    humans_only = f"alice {make_key(queue.folder, unique_id('alice')).public.openssh()}\n"
    message = signed["statement"].encode()
    verified = ssh_keygen_verify(trusting, "queue-policy", signed["signature"], message, queue.folder)
    assert verified.returncode == 0, verified.stderr
    refused = ssh_keygen_verify(humans_only, "queue-policy", signed["signature"], message, queue.folder)
    assert refused.returncode != 0
    statements = [SignedStatement(signed["statement"], signed["signature"])]
    proposal_id, digest = document["proposal_id"], answer["plan_sha256"]
    trusted = check_signed_approvals(AllowedSigners.parse(trusting), 1, proposal_id, 1, digest, statements)
    assert trusted.authorized
    executor = check_signed_approvals(
        AllowedSigners.parse(humans_only), 1, proposal_id, 1, digest, statements
    )
    assert not executor.authorized
    assert "not allowed to sign for queue-policy" in executor.explain()


def test_look_alike_and_missing_environments_with_a_production_base_url_get_production(queue: Queue) -> None:
    for written in ("prоduction", "produ\u200bction", None):
        document = plan("http://127.0.0.1:9", written, effect="delete")
        queue.submit(document)
        state = queue.state(document["proposal_id"])
        assert state["policy"]["environment"] == "production" and state["approvals_required"] == 2


def test_a_changed_policy_decides_pending_proposals_at_restart_and_the_trail_says_so(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(ONE_APPROVAL)
    service = start_service(tmp_path, "--policy", str(policy))
    try:
        with service.client(service.token("agent", "agent")) as agent:
            document = plan("http://127.0.0.1:8080", "staging", writes_kept=1)
            assert agent.post("/v1/proposals", content=body(document)).json()["state"] == "pending"
            service.stop()
            policy.write_text(ONE_APPROVAL + "\n" + kept_writes("fix the tool"))
            service.start()
            assert "policy: 1 pending proposals evaluated again under this policy" in service.log()
            record = agent.get(f"/v1/proposals/{document['proposal_id']}").json()
            assert record["latest"]["state"] == "rejected"
            last = record["history"][-1]
            assert last["actor"] == "policy:kept writes" and last["event"] == "rejected"
            assert last["reason"].startswith("fix the tool (evaluated again under policy ")
    finally:
        if service.process is not None:
            service.stop()


def test_a_rule_that_does_not_compile_stops_serve_with_its_line(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(
        ONE_APPROVAL + "\n[environment.production]\napprovals = 2\n\n"
        '[[rules]]\nname = "nested"\nwhen = "plan.calls.all(c, plan.calls.all(d, true))"\napprovals = 2\n'
    )
    started = run_reviewer(
        reviewer_command(
            "serve", "--db", str(tmp_path / "q.sqlite3"), "--port", "1", "--policy", str(policy)
        ),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2
    lines = started.stderr.strip().splitlines()
    assert lines[0].startswith(f"reviewer serve: {policy} line 4: unknown table [environment.NAME]")
    assert lines[1].startswith(f"reviewer serve: {policy} line 9: rule 'nested': when: a walk over the plan")
    assert lines[1].endswith("; not started")


def test_policy_check_reports_errors_by_line_and_what_it_loaded(tmp_path: Path) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text('[[rules]]\nname = "typo"\nwhen = \'enviroment == "production"\'\napprovals = 2\n')
    checked = run_reviewer(reviewer_command("policy", "check", str(policy)), capture_output=True, text=True)
    assert checked.returncode == 2
    assert checked.stderr.strip() == (
        f"reviewer policy check: {policy} line 3: rule 'typo': when: unknown name 'enviroment'; "
        "a rule reads alarms, environment, plan, target"
    )
    policy.write_text(POLICY)
    checked = subprocess.run(  # the rules' times: tests/policy/test_cost.py
        reviewer_command("policy", "check", str(policy), "--calls", "0"), capture_output=True, text=True
    )
    assert checked.returncode == 0 and len(checked.stdout.splitlines()) == 3 + 4
