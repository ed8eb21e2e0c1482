"""Offboarding in the trail, on both stores (SQLite and PostgreSQL): the end of a reviewer's sign-in
(out of the provider's group, revoked on the queue, or a token's lifetime run out) is an entry of
its own, and so is each pending approval it withdrew, each with who and why, logged one line each;
a decided proposal keeps its approval, and nothing is recorded twice."""

from __future__ import annotations

import json
import logging
import time
from pathlib import Path

import pytest

from reviewer.service.errors import Forbidden
from reviewer.service.store import QueueStore
from reviewer.trail.ocsf import api_activity
from tests.forked_commands import run_reviewer
from tests.queue_harness import reviewer_command
from tests.service.store.test_provider_people import ISSUER, person
from tests.service.store.test_store_contract import (
    START,
    Clock,
    clock,
    database,
    decision,
    identity,
    quorum_of_two,
    submission,
)

__all__ = ["clock", "database"]  # fixtures of the store contract, used here too


def leaves(store: QueueStore) -> list[dict[str, object]]:
    size = store.trail_head().size
    return [json.loads(leaf) for _index, _hash, leaf in store.trail_entries(0, size)]


def test_a_person_out_of_the_group_ends_in_the_trail_with_the_approval_it_withdrew(
    database: str, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """alice approved p (waiting for a second approval) and q (decided with bob's); her renewed token
    says she left the group: one `sign_in_ended` entry (no proposal) and one `withdrawn` for p, none
    for q, which was decided before; the history shows p's withdrawal once, under its own entry."""
    store = quorum_of_two(database, clock)
    try:
        alice = store.sign_in(person("alice"))
        bob = identity(store, "bob", "reviewer")
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        store.submit(agent, submission("q"))
        store.decide(alice, "p", decision(), "a-p")
        store.decide(alice, "q", decision(), "a-q")
        assert store.decide(bob, "q", decision(), "b-q")[1].state == "approved"
        clock.now = START + 30  # q's approval lasts sixty seconds here
        refused = pytest.raises(Forbidden, match="not in the queue's reviewers group")
        with caplog.at_level(logging.INFO, "reviewer.service.store.endings"), refused:
            store.sign_in(person("alice", reviewer=False, issued=START + 30))
        clock.now = START + 40
        with pytest.raises(Forbidden):  # asked again: already ended, nothing more recorded
            store.sign_in(person("alice", reviewer=False, issued=START + 40))

        ended, withdrawn = leaves(store)[-2:]
        named = ("event", "actor", "identity", "proposal_id", "revision", "reason")
        assert {key: ended[key] for key in named} == {
            "event": "sign_in_ended",
            "actor": "alice@example.com",
            "identity": f"oidc:{ISSUER}#alice",
            "proposal_id": None,
            "revision": None,
            "reason": "out of the reviewers group",
        }
        assert (withdrawn["event"], withdrawn["actor"], withdrawn["proposal_id"], withdrawn["revision"]) == (
            "withdrawn",
            "alice@example.com",
            "p",
            1,
        )
        assert withdrawn["identity"] == f"oidc:{ISSUER}#alice"
        assert "sign-in ended: out of the reviewers group" in str(withdrawn["reason"])
        assert [leaf["event"] for leaf in leaves(store)].count("withdrawn") == 1  # q kept its approval

        history = store.get_record(agent, "p").history
        assert [event.event for event in history] == ["submitted", "approved", "withdrawn"]
        assert store.decision_state(agent, "q").state == "approved"
        assert [record.getMessage() for record in caplog.records] == [
            f"sign-in ended: alice@example.com (oidc:{ISSUER}#alice): out of the reviewers group",
            "approval withdrawn: alice@example.com on proposal p revision 1 "
            "(sign-in ended: out of the reviewers group)",
        ]
        ocsf = api_activity(ended, "hash", "queue.example.com")
        assert ocsf["resources"] == [] and ocsf["message"] == "alice@example.com sign_in_ended"
    finally:
        store.close()


def test_a_revoked_reviewer_token_ends_in_the_trail_once_and_the_history_does_not_repeat_it(
    database: str, clock: Clock
) -> None:
    store = quorum_of_two(database, clock)
    try:
        bob = identity(store, "bob", "reviewer")
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        store.decide(bob, "p", decision(), "b-p")
        clock.now = START + 5
        assert store.revoke_token("bob")
        ended, withdrawn = leaves(store)[-2:]
        assert (ended["event"], ended["actor"], ended["identity"], ended["reason"]) == (
            "sign_in_ended",
            "bob",
            "token:bob",
            "token revoked",
        )
        assert (withdrawn["event"], withdrawn["proposal_id"]) == ("withdrawn", "p")
        assert "bob's token was revoked" in str(withdrawn["reason"])
        history = store.get_record(agent, "p").history
        assert [event.event for event in history] == ["submitted", "approved", "withdrawn"]
        assert store.decision_state(agent, "p").approvals == []
    finally:
        store.close()


def test_an_expired_reviewer_token_ends_in_the_trail_when_the_queue_keeps_its_time(
    database: str, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    """carol's token lasts 20 s; she approved p (waiting for a second approval). The queue writes its
    time down every few seconds (`keep_time`): the first time after her expiry records her end, why
    (token expired) and the approval it withdrew, logged one line each; the next records nothing."""
    from reviewer.service.auth import hash_token, mint_token

    store = quorum_of_two(database, clock)
    try:
        secret = mint_token()
        store.create_token("carol", "reviewer", hash_token(secret), expires_at=START + 20)
        carol = store.resolve_token(hash_token(secret))
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        assert carol is not None and store.decide(carol, "p", decision(), "c-p")[1].state == "pending"
        clock.now = START + 10
        store.keep_time()
        assert [leaf["event"] for leaf in leaves(store)] == ["submitted", "approved"]
        clock.now = START + 25
        with caplog.at_level(logging.INFO, "reviewer.service.store.endings"):
            store.keep_time()
        ended, withdrawn = leaves(store)[-2:]
        assert (ended["event"], ended["actor"], ended["identity"], ended["reason"]) == (
            "sign_in_ended",
            "carol",
            "token:carol",
            "token expired",
        )
        assert (withdrawn["event"], withdrawn["proposal_id"]) == ("withdrawn", "p")
        assert "carol's token expired" in str(withdrawn["reason"])
        assert [record.getMessage() for record in caplog.records] == [
            "sign-in ended: carol (token:carol): token expired",
            "approval withdrawn: carol on proposal p revision 1 (sign-in ended: token expired)",
        ]
        clock.now = START + 30
        store.keep_time()
        assert len(leaves(store)) == 4
    finally:
        store.close()


def test_revoking_an_agent_token_records_no_sign_in(database: str, clock: Clock) -> None:
    store = quorum_of_two(database, clock)
    try:
        identity(store, "agent", "agent")
        assert store.revoke_token("agent")
        assert leaves(store) == []
    finally:
        store.close()


def test_token_revoke_says_the_end_and_each_approval_it_withdrew(tmp_path: Path) -> None:
    """The operator who runs `reviewer token revoke` reads, on stderr, the lines a queue logs for it."""
    database = str(tmp_path / "queue.sqlite3")
    now = Clock()
    now.now = time.time()  # the command's own clock follows
    store = quorum_of_two(database, now)
    try:
        bob = identity(store, "bob", "reviewer")
        store.submit(identity(store, "agent", "agent"), submission("p"))
        store.decide(bob, "p", decision(), "b-p")
    finally:
        store.close()
    revoked = run_reviewer(
        reviewer_command("token", "revoke", "--db", database, "bob"),
        capture_output=True,
        text=True,
        check=True,
    )
    assert revoked.stderr.splitlines() == [
        "sign-in ended: bob (token:bob): token revoked",
        "approval withdrawn: bob on proposal p revision 1 (sign-in ended: token revoked)",
        "revoked bob",
    ]
