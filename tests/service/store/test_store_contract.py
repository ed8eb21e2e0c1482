"""The store contract, run against SQLite and PostgreSQL alike: the same calls, the same answers.

No HTTP here: each test drives a `QueueStore` directly with an injected clock, so expiry is a
number moved, not a wait. The PostgreSQL store gets a fresh database of the session's cluster.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import psycopg
import pytest

from reviewer.queue.messages import ClaimRequest, DecisionRequest, ExecutionReport, RefusalReport
from reviewer.service.auth import Identity, hash_token, mint_token
from reviewer.service.errors import (
    BadRequest,
    ClaimRefused,
    Conflict,
    DatabaseUnusable,
    ExecutionRefused,
    Forbidden,
    IdempotencyMismatch,
    NotFound,
    NotPending,
    StaleRevision,
    Unauthorized,
)
from reviewer.service.store import SCHEMA_VERSION, QueueStore, Submission
from reviewer.service.store.opener import open_store
from tests.service.postgres import Cluster

START = 1_800_000_000.0


class Clock:
    def __init__(self) -> None:
        self.now = START

    def __call__(self) -> float:
        return self.now


@pytest.fixture(params=["sqlite", "postgresql"])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a fresh queue lives: an SQLite path or a new PostgreSQL database's URL."""
    if request.param == "sqlite":
        return str(tmp_path / "queue.sqlite3")
    cluster: Cluster = request.getfixturevalue("postgres_cluster")
    return cluster.fresh_database()


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(database: str, clock: Clock) -> Iterator[QueueStore]:
    opened = open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, create=True)
    yield opened
    opened.close()


def identity(store: QueueStore, name: str, role: str) -> Identity:
    token = mint_token()
    store.create_token(name, role, hash_token(token))  # type: ignore[arg-type]
    found = store.resolve_token(hash_token(token))
    assert found is not None
    return found


def quorum_of_two(database: str, clock: Clock) -> QueueStore:
    """A fresh store whose policy asks two approvals of every plan."""
    from reviewer.policy.file import Environment, Policy
    from reviewer.policy.quorum import Requirement

    policy = Policy(default=Environment("default", Requirement(approvals=2)))
    return open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, policy=policy, create=True)


def submission(proposal_id: str, revision: int = 1, digest: str | None = None) -> Submission:
    plan_sha256 = digest or f"{revision:064x}"
    return Submission(proposal_id, revision, plan_sha256, "title", "agent-x", 2, b'{"plan": true}')


def decision(revision: int = 1, digest: str | None = None, verdict: str = "approve") -> DecisionRequest:
    return DecisionRequest(revision=revision, plan_sha256=digest or f"{revision:064x}", decision=verdict)  # type: ignore[arg-type]


def claim_request(revision: int = 1) -> ClaimRequest:
    return ClaimRequest(revision=revision, plan_sha256=f"{revision:064x}")


def report(claim_id: str, revision: int = 1) -> ExecutionReport:
    return ExecutionReport(
        revision=revision,
        plan_sha256=f"{revision:064x}",
        claim_id=claim_id,
        ended="completed",
        calls=[{"seq": 1}],
    )


def test_a_new_database_is_created_and_says_so_and_reopening_keeps_it(database: str, clock: Clock) -> None:
    first = open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, create=True)
    assert first.created
    agent = identity(first, "agent", "agent")
    first.submit(agent, submission("kept"))
    first.close()
    again = open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, create=False)
    try:
        assert not again.created
        assert again.get_record(agent, "kept").latest.state == "pending"
    finally:
        again.close()


def test_a_database_without_a_queue_is_refused_when_not_creating(database: str, clock: Clock) -> None:
    with pytest.raises(DatabaseUnusable, match="serve --db"):
        open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, create=False)


def test_another_schema_version_is_refused_with_what_to_do(database: str, clock: Clock) -> None:
    open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, create=True).close()
    newer = SCHEMA_VERSION + 1
    if database.startswith("postgresql://"):
        with psycopg.connect(database, autocommit=True) as raw:
            raw.execute(f"UPDATE reviewer_schema SET version = {newer}")
    else:
        import sqlite3

        with sqlite3.connect(database) as raw:
            raw.execute(f"PRAGMA user_version = {newer}")
    with pytest.raises(
        DatabaseUnusable,
        match=f"schema version {newer}, newer than version {SCHEMA_VERSION} that this release writes; run a",
    ):
        open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, create=True)


def test_submission_numbering_and_the_same_plan_again(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    other = identity(store, "other", "agent")
    assert store.submit(agent, submission("p"))[0] is True
    created, answer = store.submit(agent, submission("p"))
    assert (created, answer.state) == (False, "pending")
    with pytest.raises(
        Conflict, match="next revision of 'p' is 2 and revision 1 is stored with another plan"
    ):
        store.submit(agent, submission("p", 1, "f" * 64))
    with pytest.raises(Conflict, match="next revision of 'p' is 2"):
        store.submit(agent, submission("p", 3))
    with pytest.raises(Conflict, match="belongs to another agent"):
        store.submit(other, submission("p", 2))
    store.submit(agent, submission("p", 2))
    assert store.submit(agent, submission("p", 1))[1].state == "superseded"


def test_decision_rules_in_order_412_then_403_then_409(store: QueueStore) -> None:
    agent = identity(store, "Mallory", "agent")
    alice = identity(store, "alice", "reviewer")
    bob = identity(store, "bob", "reviewer")
    store.submit(agent, submission("p"))
    store.revoke_token("mallory")
    mallory = identity(store, "mallory.r", "reviewer")
    with pytest.raises(StaleRevision):
        store.decide(alice, "p", decision(2), "k1")
    with pytest.raises(StaleRevision):
        store.decide(alice, "p", decision(1, "e" * 64), "k2")
    assert store.decide(alice, "p", decision(1), "k3")[1].decided_by == "alice"
    with pytest.raises(NotPending, match="already approved by alice") as refused:
        store.decide(bob, "p", decision(1, verdict="reject"), "k4")
    assert refused.value.details == {"state": "approved", "decided_by": "alice"}
    assert mallory.name == "mallory.r"


def test_a_name_differing_only_in_case_is_the_same_person(store: QueueStore) -> None:
    agent = identity(store, "Deployer", "agent")
    store.submit(agent, submission("p"))
    with pytest.raises(Conflict, match="keeps its role for life"):
        store.create_token("deployer", "reviewer", "1" * 64)
    with pytest.raises(Conflict, match="exists; revoke it first"):
        store.create_token("DEPLOYER", "agent", "2" * 64)
    assert store.revoke_token("deployer")
    # A reviewer holding the proposer's name in another case, as a database from before the rule could.
    twin = Identity(token_id=999, name="deployer", role="reviewer")
    with pytest.raises(Forbidden, match="you proposed this"), store.write() as db:
        from reviewer.service import rules

        row = db.one("SELECT * FROM proposals WHERE proposal_id = :p", p="p")
        assert row is not None
        rules.check_decision(row, twin, 1, f"{1:064x}", START)


@pytest.mark.parametrize("name", ["", " ", "a b", "bob\x1b[2J", "b\u043eb", "x" * 65, "tab\there", "é"])
def test_token_names_outside_the_rule_are_refused_and_nothing_is_stored(store: QueueStore, name: str) -> None:
    with pytest.raises(BadRequest, match="1 to 64 letters"):
        store.create_token(name, "reviewer", "3" * 64)
    assert store.list_tokens() == []


def test_idempotency_replays_the_first_answer_and_refuses_another_body(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    replayed, first = store.decide(alice, "p", decision(1), "key")
    assert replayed is False
    assert store.decide(alice, "p", decision(1), "key") == (True, first)
    with pytest.raises(IdempotencyMismatch):
        store.decide(alice, "p", decision(1, verdict="reject"), "key")
    history = store.get_record(alice, "p").history
    assert [event.event for event in history] == ["submitted", "approved"]


def test_a_token_revoked_while_its_request_is_in_flight_cannot_write(store: QueueStore) -> None:
    """The route resolved the token before the body arrived; the store reads it again in the write."""
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    assert store.revoke_token("ALICE")
    with pytest.raises(Unauthorized, match="revoked"):
        store.decide(alice, "p", decision(1), "key")
    store.revoke_token("agent")
    with pytest.raises(Unauthorized):
        store.submit(agent, submission("q"))
    assert store.decision_state(agent, "p").state == "pending"


def test_one_claim_per_approval_one_report_per_claim_and_none_after_expiry(
    store: QueueStore, clock: Clock
) -> None:
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    with pytest.raises(ClaimRefused, match="no reviewer has approved it yet"):
        store.claim(agent, "p", claim_request(), "c0")
    with pytest.raises(ExecutionRefused, match="no claim"):
        store.check_report_allowed(agent, "p", None)
    store.decide(alice, "p", decision(1), "k")
    replayed, claim = store.claim(agent, "p", claim_request(), "c1")
    assert (replayed, store.claim(agent, "p", claim_request(), "c1")) == (False, (True, claim))
    with pytest.raises(ClaimRefused, match="a run by agent already holds") as refused:
        store.claim(agent, "p", claim_request(), "c2")
    assert refused.value.details["claimed_by"] == "agent"
    clock.now += 120  # past the approval's TTL: a claim fixes the approval
    assert store.decision_state(agent, "p").state == "claimed"
    store.check_report_allowed(agent, "p", None)
    assert (
        store.record_execution(agent, "p", report(claim.claim_id), b'{"revision":1}', "r")[1].state
        == "executed"
    )
    assert store.record_execution(agent, "p", report(claim.claim_id), b'{"revision":1}', "r")[0] is True
    with pytest.raises(ExecutionRefused, match="already reported"):
        store.check_report_allowed(agent, "p", None)
    store.check_report_allowed(agent, "p", "r")  # a retry under its key goes on to get its answer again
    with pytest.raises(ExecutionRefused, match="already reported"):
        store.record_execution(agent, "p", report(claim.claim_id), b"{}")
    assert [event.event for event in store.get_record(alice, "p").history] == [
        "submitted",
        "approved",
        "claimed",
        "executed",
    ]
    store.submit(agent, submission("q"))
    store.decide(alice, "q", decision(1), "k2")
    clock.now += 60
    with pytest.raises(ClaimRefused, match="expired"):
        store.claim(agent, "q", claim_request(), "c3")


def test_a_claim_past_its_lease_shows_an_unknown_outcome(store: QueueStore, clock: Clock) -> None:
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    store.decide(alice, "p", decision(1), "k")
    store.claim(agent, "p", claim_request(), "c")
    assert store.decision_state(alice, "p").outcome_unknown is False
    before = store.list_version()
    clock.now += store.claim_lease
    state = store.decision_state(alice, "p")
    assert (state.state, state.outcome_unknown) == ("claimed", True)
    assert store.list_version() != before, "the list's version moves when a lease ends"


def test_another_agent_sees_nothing(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    other = identity(store, "other", "agent")
    store.submit(agent, submission("p"))
    for read in (
        store.get_record,
        store.decision_state,
        store.list_executions,
    ):
        with pytest.raises(NotFound):
            read(other, "p")
    with pytest.raises(NotFound):
        store.get_revision_body(other, "p", 1)
    with pytest.raises(NotFound):
        store.check_report_allowed(other, "p", None)
    assert store.get_revision_body(agent, "p", 1) == b'{"plan": true}'


def test_the_list_pages_newest_first_filters_by_state_across_batches_and_versions_move(
    store: QueueStore, clock: Clock
) -> None:
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.LIST_BATCH = 3  # type: ignore[misc]
    before = store.list_version()
    ids = [f"p{number}" for number in range(10)]
    for proposal_id in ids:
        store.submit(agent, submission(proposal_id))
    assert store.list_version().last_seq > before.last_seq
    store.decide(alice, "p0", decision(1, verdict="reject"), "k")
    first = store.list_proposals(None, None, 4)
    assert [summary.proposal_id for summary in first.proposals] == ids[::-1][:4]
    assert first.next_cursor is not None
    rest = store.list_proposals(None, int(first.next_cursor), 100)
    assert [summary.proposal_id for summary in rest.proposals] == ids[::-1][4:]
    assert [summary.proposal_id for summary in store.list_proposals("rejected", None, 5).proposals] == ["p0"]
    pending = store.list_proposals("pending", None, 4)
    assert [summary.proposal_id for summary in pending.proposals] == ids[::-1][:4]
    version = store.list_version()
    assert version.next_deadline == START + 600
    clock.now += 600
    assert store.list_version().next_deadline is None
    assert {summary.state for summary in store.list_proposals(None, None, 20).proposals} == {
        "expired",
        "rejected",
    }


def test_the_idle_polls_one_statement_answers_as_the_two_look_ups_and_sees_a_revocation_at_once(
    store: QueueStore, clock: Clock
) -> None:
    """`caller_and_list_version` is `resolve_token` and `list_version` in one statement: the same
    identity (none for an unknown or revoked token, however the version moves) and the same version."""
    token = mint_token()
    store.create_token("poller", "reviewer", hash_token(token))
    agent = identity(store, "agent", "agent")
    store.submit(agent, submission("p1"))
    caller, version = store.caller_and_list_version(hash_token(token))
    assert caller == store.resolve_token(hash_token(token)) and caller is not None
    assert (caller.name, caller.role) == ("poller", "reviewer")
    assert version == store.list_version() and version.next_deadline == START + 600
    assert store.caller_and_list_version(hash_token(mint_token())) == (None, version)
    clock.now += 600
    assert store.caller_and_list_version(hash_token(token))[1] == store.list_version() != version
    assert store.revoke_token("poller")
    assert store.caller_and_list_version(hash_token(token)) == (None, store.list_version())


def test_the_history_tables_are_append_only(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    store.submit(agent, submission("p"))
    for statement in ("UPDATE trail SET actor = 'mallory'", "DELETE FROM revisions"):
        with pytest.raises(Exception, match="append-only"), store.write() as db:
            db.run(statement)
    assert [event.actor for event in store.get_record(agent, "p").history] == ["agent"]


def test_racing_reviewers_in_threads_one_winner(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    reviewers = [identity(store, f"r{number}", "reviewer") for number in range(4)]
    for round_number in range(10):
        proposal_id = f"race{round_number}"
        store.submit(agent, submission(proposal_id))
        start = threading.Barrier(len(reviewers))

        def attempt(
            reviewer: Identity, proposal_id: str = proposal_id, start: threading.Barrier = start
        ) -> str:
            start.wait()
            try:
                store.decide(reviewer, proposal_id, decision(1), f"{reviewer.name}-{proposal_id}")
            except NotPending:
                return "lost"
            return "won"

        with ThreadPoolExecutor(len(reviewers)) as pool:
            outcomes = list(pool.map(attempt, reviewers))
        assert sorted(outcomes) == ["lost"] * (len(reviewers) - 1) + ["won"]


def test_a_quorum_of_two_and_reviewers_keys_on_either_database(
    database: str, clock: Clock, tmp_path: Path
) -> None:
    """Signed decisions and policies hold on both stores: a second approval by the same
    reviewer is refused, the state stays pending until two distinct reviewers approved, and a key
    belongs to one reviewer at a time."""
    import subprocess

    from reviewer.service.errors import AlreadyApproved
    from reviewer.signing.sshsig import PublicKey

    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        alice = identity(store, "alice", "reviewer")
        bob = identity(store, "bob", "reviewer")
        store.submit(agent, submission("p"))
        first = store.decide(alice, "p", decision(1), "a1")[1]
        assert first.state == "pending"
        with pytest.raises(AlreadyApproved):
            store.decide(alice, "p", decision(1), "a2")
        second = store.decide(bob, "p", decision(1), "b1")[1]
        assert (second.state, second.decided_by) == ("approved", "alice, bob")
        key_file = tmp_path / "alice_key"
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(key_file)], check=True)
        key = PublicKey.from_file(key_file.with_suffix(".pub"))
        store.add_ssh_key("alice", key)
        with pytest.raises(Conflict, match="already registered"):
            store.add_ssh_key("bob", key)
        with pytest.raises(Conflict, match="not a reviewer"):
            store.add_ssh_key("agent", key)
        assert [registered.fingerprint for registered in store.list_ssh_keys("ALICE")] == [key.fingerprint]
        assert store.list_ssh_keys("bob") == []
        assert store.remove_ssh_key("alice", key.fingerprint)
        assert store.list_ssh_keys() == []
    finally:
        store.close()


def test_removing_a_key_withdraws_the_pending_approvals_it_signed_on_either_database(
    database: str, clock: Clock, tmp_path: Path
) -> None:
    """The lost laptop: bob's approval, signed just before `keys remove bob ...`, stops counting, so
    carol's alone does not complete a quorum of two; the history says why, and bob can approve again
    with his new key."""
    import subprocess

    from reviewer.policy.file import Environment, Policy
    from reviewer.policy.quorum import Requirement
    from reviewer.signing.sshsig import DecisionStatement, PublicKey, sign_statement, signer_for

    def key_of(name: str) -> tuple[Path, PublicKey]:
        private = tmp_path / name
        subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(private)], check=True)
        return private, PublicKey.from_file(private.with_suffix(".pub"))

    def signed(who: str, private: Path) -> DecisionRequest:
        statement = DecisionStatement("p", 1, f"{1:064x}", "approve", who, "2026-11-30T09:00:00Z")
        return DecisionRequest(
            revision=1,
            plan_sha256=f"{1:064x}",
            decision="approve",
            statement=statement.to_bytes().decode(),
            signature=sign_statement(statement, signer_for(private)),
        )

    store = open_store(
        database,
        clock=clock,
        pending_ttl=600,
        approval_ttl=60,
        policy=Policy(default=Environment("default", Requirement(approvals=2, signatures=True))),
        create=True,
    )
    try:
        agent = identity(store, "agent", "agent")
        bob, carol = identity(store, "bob", "reviewer"), identity(store, "carol", "reviewer")
        (bob_laptop, bob_key), (carol_private, carol_key) = key_of("bob_laptop"), key_of("carol")
        store.add_ssh_key("bob", bob_key)
        store.add_ssh_key("carol", carol_key)
        store.submit(agent, submission("p"))
        assert store.decide(bob, "p", signed("bob", bob_laptop), "b1")[1].approvals == ["bob"]
        clock.now += 5
        assert store.remove_ssh_key("bob", bob_key.fingerprint)
        withdrawn = store.decision_state(carol, "p")
        assert (withdrawn.state, withdrawn.approvals, withdrawn.signatures) == ("pending", [], [])
        clock.now += 5
        after_carol = store.decide(carol, "p", signed("carol", carol_private), "c1")[1]
        assert (after_carol.state, after_carol.approvals) == ("pending", ["carol"])
        history = store.get_record(carol, "p").history
        assert [event.event for event in history] == ["submitted", "approved", "withdrawn", "approved"]
        assert bob_key.fingerprint in (history[2].reason or "") and history[2].actor == "bob"
        bob_desk, bob_new_key = key_of("bob_desk")
        store.add_ssh_key("bob", bob_new_key)
        final = store.decide(bob, "p", signed("bob", bob_desk), "b2")[1]
        assert (final.state, sorted(final.approvals)) == ("approved", ["bob", "carol"])
    finally:
        store.close()


def test_revoking_a_token_withdraws_its_pending_approvals_on_either_database(
    database: str, clock: Clock
) -> None:
    """As removing a key does: bob approved, then his token was revoked, so carol's approval alone does
    not complete a quorum of two, and the history says why."""

    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        bob, carol = identity(store, "bob", "reviewer"), identity(store, "carol", "reviewer")
        store.submit(agent, submission("p"))
        assert store.decide(bob, "p", decision(1), "b1")[1].approvals == ["bob"]
        clock.now += 5
        assert store.revoke_token("bob")
        assert store.decision_state(carol, "p").approvals == []
        clock.now += 5
        after_carol = store.decide(carol, "p", decision(1), "c1")[1]
        assert (after_carol.state, after_carol.approvals) == ("pending", ["carol"])
        history = store.get_record(carol, "p").history
        assert [event.event for event in history] == ["submitted", "approved", "withdrawn", "approved"]
        assert "token was revoked" in (history[2].reason or "") and history[2].actor == "bob"
        new_bob = identity(store, "bob", "reviewer")
        final = store.decide(new_bob, "p", decision(1), "b2")[1]
        assert (final.state, sorted(final.approvals)) == ("approved", ["bob", "carol"])
    finally:
        store.close()


def test_the_list_names_each_pending_rows_approvals_so_far_on_either_database(
    database: str, clock: Clock
) -> None:
    """Two approvals needed: a row names alice's approval of p1; none on p2 once bob's token was
    revoked (his withdrawal recorded), until Bob, a new token of the same person, approves again;
    none on p3's second revision (alice approved the first); none on a decided plan. Read a page
    at a time, a page's span of rows holding rows a filter left out, the rows say the same."""
    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        alice, bob, carol = (identity(store, name, "reviewer") for name in ("alice", "bob", "carol"))
        for proposal_id in ("p1", "p2", "p3", "p4", "p5"):
            store.submit(agent, submission(proposal_id))
        store.decide(alice, "p1", decision(1), "a1")
        store.decide(bob, "p2", decision(1), "b2")
        store.decide(alice, "p3", decision(1), "a3")
        store.submit(agent, submission("p3", 2))
        store.decide(alice, "p4", decision(1), "a4")
        store.decide(carol, "p4", decision(1), "c4")
        clock.now += 5
        assert store.revoke_token("bob")

        def approvals(state: str | None = None, limit: int = 50) -> dict[str, list[str]]:
            found, cursor = {}, None
            while True:
                page = store.list_proposals(state, cursor, limit)  # type: ignore[arg-type]
                found.update({row.proposal_id: row.approvals for row in page.proposals})
                if page.next_cursor is None:
                    return found
                cursor = int(page.next_cursor)

        expected = {"p1": ["alice"], "p2": [], "p3": [], "p4": [], "p5": []}
        assert approvals() == expected and approvals(limit=1) == expected
        assert approvals("pending", limit=2) == {"p1": ["alice"], "p2": [], "p3": [], "p5": []}
        store.decide(identity(store, "Bob", "reviewer"), "p2", decision(1), "b2-again")
        assert approvals()["p2"] == ["Bob"]
    finally:
        store.close()


@pytest.mark.parametrize("other", ["agent1.", "Agent_1", "agent-l", "AGENT1"])
def test_a_name_that_folds_to_an_agents_is_the_agent_and_never_a_reviewer(
    store: QueueStore, other: str
) -> None:
    identity(store, "agent1", "agent")
    with pytest.raises(Conflict):
        identity(store, other, "reviewer")


def test_a_quorum_counts_per_revision_and_one_request_for_changes_closes_the_revision(
    database: str, clock: Clock
) -> None:
    """Two approvals needed: alice's approval of revision 1 does not count for revision 2 after bob
    asked for changes, and an approval of the closed revision is refused."""
    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        alice = identity(store, "alice", "reviewer")
        bob = identity(store, "bob", "reviewer")
        carol = identity(store, "carol", "reviewer")
        store.submit(agent, submission("p"))
        assert store.decide(alice, "p", decision(1), "a1")[1].approvals == ["alice"]
        asked = DecisionRequest(
            revision=1, plan_sha256=f"{1:064x}", decision="request_changes", reason="keep t3 open"
        )
        closed = store.decide(bob, "p", asked, "b1")[1]
        assert (closed.state, closed.decided_by, closed.reason) == (
            "changes_requested",
            "bob",
            "keep t3 open",
        )
        with pytest.raises(NotPending, match="changes_requested by bob"):
            store.decide(carol, "p", decision(1), "c1")
        store.submit(agent, submission("p", 2))
        second = store.decide(carol, "p", decision(2), "c2")[1]
        assert (second.state, second.approvals) == ("pending", ["carol"])
        third = store.decide(alice, "p", decision(2), "a2")[1]
        assert (third.state, third.approvals) == ("approved", ["carol", "alice"])
    finally:
        store.close()


def test_every_trail_event_is_a_leaf_of_the_log_and_its_proofs_verify(store: QueueStore) -> None:
    """Each write appends its trail event to the Merkle log in its own transaction, in order: the
    leaves name who did what on which digest (a report by its SHA-256), and every consistency and
    inclusion proof the store makes verifies against roots computed from the leaves alone."""
    import hashlib
    import json

    from reviewer.service.store import trail
    from reviewer.trail import merkle

    agent, alice = identity(store, "agent", "agent"), identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    store.decide(alice, "p", decision(), "k1")
    claim = store.claim(agent, "p", claim_request(), "c1")[1]
    body = b'{"revision":1,"calls":[{"seq":1}]}'
    store.record_execution(agent, "p", report(claim.claim_id), body, "r1")
    store.submit(agent, submission("q"))
    store.decide(alice, "q", decision(verdict="reject"), "k2")

    head = store.trail_head()
    entries = store.trail_entries(0, head.size)
    events = [json.loads(content) for _, _, content in entries]
    assert [(e["event"], e["actor"], e["proposal_id"]) for e in events] == [
        ("submitted", "agent", "p"),
        ("approved", "alice", "p"),
        ("claimed", "agent", "p"),
        ("executed", "agent", "p"),
        ("submitted", "agent", "q"),
        ("rejected", "alice", "q"),
    ]
    assert events[3]["report_sha256"] == hashlib.sha256(body).hexdigest()
    assert (events[1]["identity"], events[3]["identity"]) == ("token:alice", "token:agent")
    assert [e["index"] for e in events] == list(range(6))
    roots = []
    tree = merkle.CompactTree()
    for _, leaf_hash, content in entries:
        assert tree.append(content) == leaf_hash
        roots.append(tree.root())
    assert head.root == roots[-1]
    for first in range(1, head.size + 1):
        proved = store.trail_head(since=first)
        assert proved.consistency is not None
        merkle.verify_consistency(first, roots[first - 1], head.size, head.root, proved.consistency)
    with store.read() as db:
        for index, leaf_hash, _ in entries:
            proof = trail.inclusion(db, index, head.size)
            merkle.verify_inclusion(leaf_hash, index, head.size, proof, head.root)
    assert store.trail_head(since=head.size + 1).consistency is None  # no size this log ever had


def older_replica_submits(store: QueueStore, proposal_id: str) -> None:
    """What a replica of a release before the log writes for an event: the trail row, no leaf."""
    with store.write() as db:
        db.run(
            "INSERT INTO trail (at, actor, event, proposal_id, revision, plan_sha256) "
            "VALUES (:at, 'old-agent', 'submitted', :proposal_id, 1, :digest)",
            at=START,
            proposal_id=proposal_id,
            digest=f"{1:064x}",
        )


def logged_seqs(store: QueueStore) -> tuple[list[int], list[int]]:
    with store.read() as db:
        trail_seqs = [int(row["seq"]) for row in db.all("SELECT seq FROM trail ORDER BY seq")]
        log_seqs = [int(row["seq"]) for row in db.all("SELECT seq FROM trail_log ORDER BY leaf_index")]
    return trail_seqs, log_seqs


def test_events_an_older_replica_wrote_are_logged_in_order_at_the_next_append(store: QueueStore) -> None:
    """During a rolling upgrade a replica of the release before the log writes trail rows alone; the
    next append of any replica of this release logs them first, in their order, in its own
    transaction, and the log still makes the root its leaves make. A restart finds nothing left."""
    import json

    from reviewer.trail import merkle

    agent, alice = identity(store, "agent", "agent"), identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    older_replica_submits(store, "old-1")
    older_replica_submits(store, "old-2")
    assert len(logged_seqs(store)[1]) == 1  # not logged yet: nothing of this release has appended
    store.decide(alice, "p", decision(), "k1")
    older_replica_submits(store, "old-3")
    store.submit(agent, submission("q"))
    trail_seqs, log_seqs = logged_seqs(store)
    assert log_seqs == trail_seqs and len(trail_seqs) == 6
    head = store.trail_head()
    entries = store.trail_entries(0, head.size)
    assert [
        (json.loads(content)["proposal_id"], json.loads(content)["event"]) for _, _, content in entries
    ] == [
        ("p", "submitted"),
        ("old-1", "submitted"),
        ("old-2", "submitted"),
        ("p", "approved"),
        ("old-3", "submitted"),
        ("q", "submitted"),
    ]
    tree = merkle.CompactTree()
    for _, leaf_hash, content in entries:
        assert tree.append(content) == leaf_hash
    assert tree.root() == head.root
    assert store.log_earlier_events() == 0


def test_a_worker_threads_connection_ends_with_its_thread(database: str, store: QueueStore) -> None:
    """The server's worker threads come and go: forty that each read once, one after the other, leave
    the database with as many connections open as threads that still live, not forty."""
    import threading

    def open_connections() -> int:
        if not database.startswith("postgresql"):
            fds = Path("/proc/self/fd")
            return sum(1 for fd in fds.iterdir() if os.path.realpath(fd) == os.path.realpath(database))
        import psycopg

        with psycopg.connect(database) as watcher:
            row = watcher.execute(
                "SELECT count(*) FROM pg_stat_activity "
                "WHERE datname = current_database() AND pid <> pg_backend_pid()"
            ).fetchone()
        return int(row[0]) if row else 0

    store.list_version()
    for _ in range(40):
        worker = threading.Thread(target=store.list_version)
        worker.start()
        worker.join()
    assert open_connections() <= 3, "the living threads' and the last ended one's, not forty"


# executors' refusals: kept once per key, listed with the revision refused, counted, append-only


def refusal(
    kind: str = "trail", message: str = "TrailRefused: the log shrank", revision: int = 1
) -> RefusalReport:
    return RefusalReport(revision=revision, plan_sha256=f"{revision:064x}", kind=kind, message=message)  # type: ignore[arg-type]


def test_a_refusal_is_listed_with_the_approval_it_refused_and_changes_no_state(
    store: QueueStore, clock: Clock
) -> None:
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    store.decide(alice, "p", decision(1), "k")
    clock.now += 5
    replayed, answer = store.record_refusal(agent, "p", refusal(), "r1")
    assert not replayed
    assert answer.state == "approved" and answer.decided_by == "alice"
    [stored] = answer.refusals
    assert (stored.kind, stored.message, stored.refused_by, stored.revision) == (
        "trail",
        "TrailRefused: the log shrank",
        "agent",
        1,
    )
    assert stored.at.timestamp() == START + 5
    assert store.decision_state(alice, "p").refusals == [stored]
    assert store.get_record(alice, "p").latest.refusals == [stored]
    assert [event.event for event in store.get_record(alice, "p").history] == ["submitted", "approved"]


def test_a_retry_under_its_key_is_stored_once_and_another_body_under_it_is_refused(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    store.decide(alice, "p", decision(1), "k")
    first = store.record_refusal(agent, "p", refusal(), "r1")[1]
    assert store.record_refusal(agent, "p", refusal(), "r1") == (True, first)
    with pytest.raises(IdempotencyMismatch):
        store.record_refusal(agent, "p", refusal("ledger"), "r1")
    store.record_refusal(agent, "p", refusal("signatures", "UnsignedApproval: 0 of 1"), "r2")
    kinds = [item.kind for item in store.decision_state(alice, "p").refusals]
    assert kinds == ["trail", "signatures"]
    assert store.figures(()).refusals == {"trail": 1, "signatures": 1, "ledger": 0, "other": 0}


def test_only_the_owner_reports_and_only_of_a_revision_the_queue_holds(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    other = identity(store, "other", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    store.decide(alice, "p", decision(1), "k")
    with pytest.raises(NotFound):
        store.record_refusal(other, "p", refusal(), "r")
    with pytest.raises(StaleRevision, match="no revision 2"):
        store.record_refusal(agent, "p", refusal(revision=2), "r")
    with pytest.raises(StaleRevision, match="another plan under revision 1"):
        store.record_refusal(
            agent, "p", RefusalReport(revision=1, plan_sha256="f" * 64, kind="other", message="x"), "r"
        )
    assert store.decision_state(alice, "p").refusals == []
    assert sum(store.figures(()).refusals.values()) == 0


def test_a_refusal_belongs_to_its_revision_and_the_table_is_append_only(store: QueueStore) -> None:
    agent = identity(store, "agent", "agent")
    alice = identity(store, "alice", "reviewer")
    store.submit(agent, submission("p"))
    store.decide(alice, "p", decision(1), "k")
    store.record_refusal(agent, "p", refusal(), "r1")
    store.submit(agent, submission("p", 2))
    assert store.decision_state(alice, "p").refusals == []  # revision 2 was refused by nobody
    for statement in ("UPDATE refusals SET message = 'fine'", "DELETE FROM refusals"):
        with pytest.raises(Exception, match="append-only"), store.write() as db:
            db.run(statement)
    assert store.figures(()).refusals["trail"] == 1


def test_a_passkey_enrols_once_decides_as_its_owner_once_each_and_nothing_once_removed(
    store: QueueStore, clock: Clock
) -> None:
    from datetime import UTC, datetime

    from reviewer.service.errors import SignatureRefused
    from reviewer.signing.sshsig import DecisionStatement
    from tests.signing.authenticator import Authenticator

    alice, agent = identity(store, "alice", "reviewer"), identity(store, "agent", "agent")
    phone, link = Authenticator(), "1" * 64
    store.create_passkey_link(alice, link)
    assert store.passkey_challenge(link, "Y2hhbGxlbmdl") == "alice"
    store.register_passkey(link, phone.registered(), 0, "phone")
    with pytest.raises(NotFound, match="unknown, used or expired"):
        store.passkey_link_owner(link)
    assert [(item.reviewer, item.label) for item in store.list_passkeys(alice)] == [("alice", "phone")]
    assert store.registered_passkeys() == [phone.registered()]
    assert store.registered_passkeys(provider_signs_in=True) == []  # as deciding by it is refused there

    def statement(proposal_id: str) -> DecisionStatement:
        moment = datetime.fromtimestamp(clock.now, UTC)
        return DecisionStatement.now(proposal_id, 1, f"{1:064x}", "approve", "alice", moment)

    for proposal_id in ("p-1", "p-2", "p-3"):
        store.submit(agent, submission(proposal_id))
    first = statement("p-1")
    assertion = phone.assert_over(first.to_bytes(), counter=1)
    _, state = store.decide_by_passkey("p-1", first.to_bytes().decode(), assertion, "")
    assert (state.state, state.decided_by) == ("approved", "alice")
    assert state.signatures[0].key_fingerprint == f"passkey:{phone.registered().credential_id}"
    with pytest.raises(SignatureRefused, match="statement.proposal_id is 'p-1', not 'p-2'"):
        store.decide_by_passkey("p-2", first.to_bytes().decode(), assertion, "")
    second = statement("p-2")
    with pytest.raises(SignatureRefused, match="(?i)count"):  # a clone's counter, not past the one kept
        store.decide_by_passkey("p-2", second.to_bytes().decode(), phone.assert_over(second.to_bytes()), "")
    with pytest.raises(Forbidden, match="minted token, and reviewers sign in through the identity provider"):
        counted = phone.assert_over(second.to_bytes(), counter=2)
        store.decide_by_passkey("p-2", second.to_bytes().decode(), counted, "", provider_signs_in=True)

    stale = statement("p-3")
    clock.now += 301  # a statement the page asked for more than five minutes ago
    with pytest.raises(
        SignatureRefused, match="not within 300 s of the queue's time; press the button again"
    ):
        counted = phone.assert_over(stale.to_bytes(), counter=3)
        store.decide_by_passkey("p-3", stale.to_bytes().decode(), counted, "")

    assert store.remove_passkey(alice, phone.registered().credential_id[:6])
    third = statement("p-3")
    with pytest.raises(Forbidden, match="not enrolled on this queue, was removed"):
        store.decide_by_passkey(
            "p-3", third.to_bytes().decode(), phone.assert_over(third.to_bytes(), counter=5), ""
        )
    assert store.list_passkeys(alice) == [] and store.registered_passkeys() == []
