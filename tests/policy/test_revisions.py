"""A policy judges a revision with its history, alone and in the real queue: `reviewer serve --policy` (the
policy evaluated in its worker processes) reads `plan.revision` and the reasons reviewers gave when
they asked for changes to earlier revisions; and a quorum counts the approvals of one revision only."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from reviewer.plan.proposal import parse_proposal, plan_sha256
from reviewer.policy.file import parse_policy
from reviewer.policy.verdict import ChangeRequest, Verdict, evaluate
from reviewer.queue.messages import DecisionRequest
from reviewer.service.store import Submission
from reviewer.service.store.opener import open_store
from tests.queue_harness import (
    Actors,
    Service,
    body,
    decide,
    make_actors,
    proposal,
    start_service,
    submit,
    unique_id,
)
from tests.service.store.test_store_contract import identity

POLICY = """\
[default]
approvals = 1

[[rules]]
name = "fourth try"
when = "plan.revision > 3"
approvals = 2

[[rules]]
name = "asked to leave t2 open"
when = '''plan.changes_requested.exists(r, r.reason.contains("t2") && r.by == "alice")
  && plan.calls.exists(c, c.args.id == "t2")'''
reject = "a reviewer asked to leave t2 open; this revision still closes it"
"""


def verdict(revision: int, calls: int, *asked: ChangeRequest) -> Verdict:
    """The policy's verdict on a plan closing t1 to t`calls`, evaluated here, without the queue."""
    plan = parse_proposal(body(proposal("history", revision, calls=calls)))
    return evaluate(parse_policy(POLICY), plan, changes_requested=asked)


def test_rules_read_the_revision_and_the_reasons_asked_of_earlier_revisions() -> None:
    leave_t2 = ChangeRequest(revision=1, by="alice", reason="leave t2 open")
    assert verdict(1, 2).outcome == "human"
    assert verdict(3, 2).requirement.approvals == 1
    assert verdict(4, 2).requirement.approvals == 2
    ignored = verdict(2, 2, leave_t2)
    assert (ignored.outcome, ignored.decided_by) == ("reject", "policy:asked to leave t2 open")
    assert verdict(2, 1, leave_t2).outcome == "human", "revision 2 left t2 alone"
    by_bob = ChangeRequest(revision=1, by="bob", reason="leave t2 open")
    assert verdict(2, 2, by_bob).outcome == "human", "the rule reads who asked"


@pytest.fixture(scope="module")
def queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Service, Actors]]:
    folder = tmp_path_factory.mktemp("revisions")
    (folder / "policy.toml").write_text(POLICY)
    service = start_service(folder, "--policy", str(folder / "policy.toml"))
    actors = make_actors(service)
    yield service, actors
    actors.close()
    service.stop()


def state(actors: Actors, proposal_id: str) -> dict[str, Any]:
    answer: dict[str, Any] = actors.alice.get(f"/v1/proposals/{proposal_id}/decision").json()
    return answer


def ask_changes(actors: Actors, proposal_id: str, revision: int, digest: str, reason: str) -> None:
    response = decide(actors.alice, proposal_id, revision, digest, "request_changes", reason=reason)
    assert response.json()["state"] == "changes_requested", response.text


def test_a_rule_reads_an_earlier_reason_and_rejects_the_revision_that_ignores_it(
    queue: tuple[Service, Actors],
) -> None:
    """Revision 1 closes t1 and t2; alice asks "leave t2 open". Revision 2 still closes t2: the rule
    reading her reason rejects it before any human. Revision 3 closes t1 alone: a human decides."""
    _service, actors = queue
    proposal_id = unique_id("leave-t2")
    first = submit(actors.agent, proposal_id, 1, calls=2)
    assert first["state"] == "pending", "revision 1 has no history: the rule does not match"
    ask_changes(actors, proposal_id, 1, first["plan_sha256"], "please leave t2 open")

    second = submit(actors.agent, proposal_id, 2, calls=2)
    assert second["state"] == "rejected"
    rejected = state(actors, proposal_id)
    assert rejected["decided_by"] == "policy:asked to leave t2 open"
    assert rejected["reason"] == "a reviewer asked to leave t2 open; this revision still closes it"

    third = submit(actors.agent, proposal_id, 3, calls=1)
    assert third["state"] == "pending"
    assert state(actors, proposal_id)["policy"]["needs"] == "needs 1 approval"


def test_a_fourth_revision_needs_two_approvals_and_the_quorum_counts_that_revision_only(
    queue: tuple[Service, Actors],
) -> None:
    """`plan.revision > 3` asks two approvals of revision 4 (revision 3 needed one). Alice's approval
    of revision 4 is not carried to revision 5: bob's approval of 5 is 1 of 2, alice's again meets it."""
    _service, actors = queue
    proposal_id = unique_id("fourth-try")
    for revision in (1, 2, 3):
        answer = submit(actors.agent, proposal_id, revision, calls=revision)
        assert state(actors, proposal_id)["approvals_required"] == 1, f"revision {revision}"
        ask_changes(actors, proposal_id, revision, answer["plan_sha256"], f"try {revision + 1}")

    fourth = submit(actors.agent, proposal_id, 4, calls=4)["plan_sha256"]
    asked = state(actors, proposal_id)
    assert (asked["approvals_required"], asked["policy"]["needs"]) == (
        2,
        "needs 2 approvals: rule `fourth try`",
    )
    assert decide(actors.alice, proposal_id, 4, fourth, "approve").json()["state"] == "pending"
    changes = decide(actors.bob, proposal_id, 4, fourth, "request_changes", reason="one more")
    assert changes.json()["state"] == "changes_requested"

    fifth = submit(actors.agent, proposal_id, 5, calls=5)["plan_sha256"]
    assert state(actors, proposal_id)["approvals"] == [], "revision 4's approval counts for revision 4"
    bob = decide(actors.bob, proposal_id, 5, fifth, "approve").json()
    assert (bob["state"], bob["approvals"]) == ("pending", ["bob"])
    alice = decide(actors.alice, proposal_id, 5, fifth, "approve").json()
    assert (alice["state"], alice["approvals"]) == ("approved", ["bob", "alice"])


def stored_submission(revision: int, calls: int) -> Submission:
    document = body(proposal("raced", revision, calls=calls))
    plan = parse_proposal(document)
    return Submission("raced", revision, plan_sha256(plan), "title", "agent", calls, document, plan)


def test_a_request_recorded_while_the_next_revision_is_evaluated_is_read_before_it_is_stored(
    tmp_path: Path,
) -> None:
    """The store evaluates a submission's policy before its write lock. Alice asks "leave t2 open"
    of revision 1 in that moment: revision 2, still closing t2, is evaluated again with her words
    inside the lock, and rejected, not left to a human under a verdict that never read them."""
    store = open_store(
        tmp_path / "queue.sqlite3",
        clock=lambda: 1_800_000_000.0,
        pending_ttl=600,
        approval_ttl=60,
        policy=parse_policy(POLICY),
        create=True,
    )
    try:
        agent, alice = identity(store, "agent", "agent"), identity(store, "alice", "reviewer")
        first = stored_submission(1, 2)
        store.submit(agent, first)
        evaluations: list[tuple[ChangeRequest, ...]] = []

        class AliceAsksMeanwhile:
            """Evaluates as `serve`'s worker processes do; alice decides during the first evaluation."""

            def verdict(self, body: bytes, plan: Any, asked: tuple[ChangeRequest, ...]) -> Verdict:
                evaluations.append(asked)
                if len(evaluations) == 1:  # before the write lock; the second runs inside it
                    request = DecisionRequest(
                        revision=1,
                        plan_sha256=first.plan_sha256,
                        decision="request_changes",
                        reason="leave t2 open",
                    )
                    store.decide(alice, "raced", request, "meanwhile")
                return evaluate(store.policy, plan or parse_proposal(body), changes_requested=asked)

        store.policy_evaluator = AliceAsksMeanwhile()  # type: ignore[assignment]
        _stored, answer = store.submit(agent, stored_submission(2, 2))
        assert evaluations == [(), (ChangeRequest(1, "alice", "leave t2 open"),)]
        assert answer.state == "rejected"
        assert store.decision_state(alice, "raced").decided_by == "policy:asked to leave t2 open"
    finally:
        store.close()
