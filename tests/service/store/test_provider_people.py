"""People the provider signs in, on both stores (SQLite and PostgreSQL): one row per person across
renewals, ended when the provider no longer counts them a reviewer (their waiting approval withdrawn),
a session ended on the queue not resumed by a token issued before, and names no other token holds."""

from __future__ import annotations

import pytest

from reviewer.service.auth import Identity, hash_token, mint_token
from reviewer.service.errors import Conflict, Forbidden, Unauthorized
from reviewer.service.oidc import ProviderPerson
from reviewer.service.store import QueueStore
from tests.service.store.test_store_contract import (
    START,
    Clock,
    clock,
    database,
    decision,
    identity,
    quorum_of_two,
    store,
    submission,
)

__all__ = ["clock", "database", "store"]  # fixtures of the store contract, used here too

ISSUER = "https://sso.example.com/realms/platform"


def person(subject: str, *, reviewer: bool = True, issued: float = START, name: str = "") -> ProviderPerson:
    return ProviderPerson(
        issuer=ISSUER,
        subject=subject,
        name=name or f"{subject}@example.com",
        email=name or f"{subject}@example.com",
        reviewer=reviewer,
        issued_at=issued,
        session_ends_at=issued + 600,
    )


def test_a_person_keeps_one_identity_across_renewals_and_the_trail_names_them(store: QueueStore) -> None:
    first = store.sign_in(person("alice"))
    renewed = store.sign_in(person("alice", issued=START + 500))
    assert renewed == first
    assert (first.name, first.role, first.kind) == ("alice@example.com", "reviewer", "provider")
    assert first.principal == f"oidc:{ISSUER}#alice"
    agent = identity(store, "agent", "agent")
    store.submit(agent, submission("p"))
    store.decide(first, "p", decision(), "k1")
    approved = [event for event in store.get_record(agent, "p").history if event.event == "approved"]
    assert [(event.actor, event.identity) for event in approved] == [("alice@example.com", first.principal)]
    [row] = [token for token in store.list_tokens() if token.kind == "provider"]
    assert row.subject == f"{ISSUER}#alice" and row.session_ends_at is not None


def test_out_of_the_group_ends_the_sign_in_and_withdraws_the_waiting_approval(
    database: str, clock: Clock
) -> None:
    store = quorum_of_two(database, clock)
    try:
        alice = store.sign_in(person("alice"))
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        store.decide(alice, "p", decision(), "k1")
        assert store.decision_state(agent, "p").approvals == ["alice@example.com"]
        clock.now = START + 60
        with pytest.raises(Forbidden, match="not in the queue's reviewers group"):
            store.sign_in(person("alice", reviewer=False, issued=START + 60))
        assert store.decision_state(agent, "p").approvals == []
        with pytest.raises(Unauthorized, match="this session was ended on the queue"):
            store.sign_in(person("alice", issued=START + 30))  # a token from before: no way back
        again = store.sign_in(person("alice", issued=START + 61))  # back in the group, signed in anew
        assert again.token_id != alice.token_id and again.name == "alice@example.com"
    finally:
        store.close()


def test_a_name_another_token_holds_is_refused(store: QueueStore) -> None:
    identity(store, "deploy-bot", "agent")
    with pytest.raises(Conflict, match="was used for an agent token"):
        store.sign_in(person("bot", name="deploy-bot"))
    store.sign_in(person("carol"))
    with pytest.raises(Conflict, match="another active token is named 'carol@example.com'"):
        store.sign_in(person("carol-2", name="carol@example.com"))


def test_a_person_renamed_at_the_provider_still_has_the_waiting_approval_withdrawn(
    database: str, clock: Clock
) -> None:
    """The provider renames the person (a new email) after they approved: the approval carries the
    old name, the person's row the new one, and ending their sign-in still withdraws it."""
    store = quorum_of_two(database, clock)
    try:
        alice = store.sign_in(person("alice", name="alice@old.example.com"))
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        store.decide(alice, "p", decision(), "k1")
        renamed = store.sign_in(person("alice", name="alice@new.example.com", issued=START + 30))
        assert (renamed.token_id, renamed.name) == (alice.token_id, "alice@new.example.com")
        assert store.decision_state(agent, "p").approvals == ["alice@old.example.com"]
        clock.now = START + 60
        with pytest.raises(Forbidden, match="not in the queue's reviewers group"):
            store.sign_in(person("alice", reviewer=False, issued=START + 60))
        state = store.decision_state(agent, "p")
        assert state.approvals == []
        withdrawn = [event for event in store.get_record(agent, "p").history if event.event == "withdrawn"]
        assert [event.actor for event in withdrawn] == ["alice@old.example.com"]
    finally:
        store.close()


def test_another_person_taking_a_renamed_persons_old_name_withdraws_nothing_of_theirs(
    database: str, clock: Clock
) -> None:
    """An ended sign-in withdraws its own person's approvals only: a person who now holds the name
    another approved under keeps that approval when their own sign-in ends, and the other's stays."""
    store = quorum_of_two(database, clock)
    try:
        alice = store.sign_in(person("alice", name="sam@example.com"))
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        store.decide(alice, "p", decision(), "k1")
        store.sign_in(person("alice", name="alice@example.com", issued=START + 10))
        store.sign_in(person("sam", name="sam@example.com", issued=START + 20))
        clock.now = START + 60
        with pytest.raises(Forbidden, match="not in the queue's reviewers group"):
            store.sign_in(person("sam", reviewer=False, issued=START + 60))
        assert store.decision_state(agent, "p").approvals == ["sam@example.com"]
    finally:
        store.close()


def test_an_outsiders_token_is_refused_while_another_writer_holds_the_write_lock(
    database: str, clock: Clock
) -> None:
    """A valid identity token of someone outside the reviewers group, with no sign-in to end, is
    refused on a read: it neither waits for nor takes the store's one write lock, so a stream of
    them cannot serialize the queue. An insider's ended sign-in still writes once."""
    import sqlite3
    from concurrent.futures import ThreadPoolExecutor

    import psycopg

    from reviewer.service.store.opener import open_store
    from reviewer.service.store.postgres import WRITE_LOCK

    store = open_store(database, clock=clock, pending_ttl=600, approval_ttl=60, create=True)
    if database.startswith("postgresql://"):
        holder: object = psycopg.connect(database)
        holder.execute("SELECT pg_advisory_xact_lock(%s)", (WRITE_LOCK,))  # type: ignore[attr-defined]
    else:
        holder = sqlite3.connect(database, isolation_level=None)
        holder.execute("BEGIN IMMEDIATE")  # type: ignore[attr-defined]
    pool = ThreadPoolExecutor(1)
    try:
        refused = pool.submit(store.sign_in, person("mallory", reviewer=False))
        with pytest.raises(Forbidden, match="not in the queue's reviewers group"):
            refused.result(timeout=5)
    finally:
        holder.rollback()  # type: ignore[attr-defined]
        holder.close()  # type: ignore[attr-defined]
        pool.shutdown()
    try:
        store.sign_in(person("alice"))
        with pytest.raises(Forbidden, match="not in the queue's reviewers group"):
            store.sign_in(person("alice", reviewer=False, issued=START + 60))
        [ended] = [token for token in store.list_tokens() if token.kind == "provider"]
        assert ended.revoked_at is not None
    finally:
        store.close()


def test_a_rejoined_persons_second_end_leaves_the_approval_of_whoever_holds_their_old_name(
    database: str, clock: Clock
) -> None:
    """P approves as sam@, leaves the group (withdrawn) and rejoins as alice@; Q signs in as sam@ and
    approves. P leaves again: Q's approval, under the name P once had, still counts."""
    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        store.decide(store.sign_in(person("alice", name="sam@example.com")), "p", decision(), "k1")
        clock.now = START + 10
        with pytest.raises(Forbidden):
            store.sign_in(person("alice", reviewer=False, issued=START + 10))
        assert store.decision_state(agent, "p").approvals == []
        clock.now = START + 20
        store.sign_in(person("alice", name="alice@example.com", issued=START + 20))
        q = store.sign_in(person("sam", name="sam@example.com", issued=START + 20))
        clock.now = START + 30
        store.decide(q, "p", decision(), "k2")
        clock.now = START + 40
        with pytest.raises(Forbidden):
            store.sign_in(person("alice", reviewer=False, issued=START + 40))
        assert store.decision_state(agent, "p").approvals == ["sam@example.com"]
    finally:
        store.close()


def test_an_outsiders_token_older_than_the_session_ends_nothing(database: str, clock: Clock) -> None:
    """P was out of the group at START + 10 (a token saying so), signed in as a reviewer at START + 20:
    that older token, presented later, is refused and leaves P's session and approval as they are."""
    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        clock.now = START + 20
        signed_in = store.sign_in(person("alice", name="alice@example.com", issued=START + 20))
        store.decide(signed_in, "p", decision(), "k1")
        clock.now = START + 30
        with pytest.raises(Forbidden):
            store.sign_in(person("alice", reviewer=False, issued=START + 10))
        assert store.decision_state(agent, "p").approvals == ["alice@example.com"]
        again = store.sign_in(person("alice", name="alice@example.com", issued=START + 20))
        assert again.token_id == signed_in.token_id
    finally:
        store.close()


def test_one_person_under_two_emails_is_one_approval_of_a_quorum_of_two(database: str, clock: Clock) -> None:
    """The provider's person is ISSUER#SUBJECT, whatever its email says now: carol approves, changes
    her email at the provider, signs in again and approves again; that is still one approval of two."""
    store = quorum_of_two(database, clock)
    try:
        carol = store.sign_in(person("carol", name="carol@example.com"))
        agent = identity(store, "agent", "agent")
        store.submit(agent, submission("p"))
        store.decide(carol, "p", decision(), "k1")
        clock.now = START + 60
        renamed = store.sign_in(person("carol", name="carol.new@example.com", issued=START + 60))
        assert renamed.principal == carol.principal
        with pytest.raises(Conflict, match="already approved this revision"):
            store.decide(renamed, "p", decision(), "k2")
        state = store.decision_state(agent, "p")
        assert state.state == "pending" and len(state.approvals) == 1
        bob = store.sign_in(person("bob"))
        store.decide(bob, "p", decision(), "k3")
        assert store.decision_state(agent, "p").state == "approved"
    finally:
        store.close()


def bound_token(store: QueueStore, name: str, subject: str, kind: str = "minted") -> Identity:
    """A minted reviewer token bound to the provider's person `subject` (`token create --person`)."""
    token = mint_token()
    store.create_token(name, "reviewer", hash_token(token), None, kind, (ISSUER, subject))  # type: ignore[arg-type]
    found = store.resolve_token(hash_token(token))
    assert found is not None
    return found


def test_a_token_bound_to_a_person_and_their_provider_sign_in_are_one_approval_of_two(
    database: str, clock: Clock
) -> None:
    """dave approves through the provider, then through the break-glass token the operator bound to
    him: one person, one approval; either order; the trail still says which way each came."""
    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        dave = store.sign_in(person("dave"))
        glass = bound_token(store, "dave-glass", "dave", "break-glass")
        assert glass.principal == "break-glass:dave-glass" and glass.person_id == dave.person_id
        for proposal_id, first, second in (("p1", dave, glass), ("p2", glass, dave)):
            store.submit(agent, submission(proposal_id))
            store.decide(first, proposal_id, decision(), f"{proposal_id}-k1")
            with pytest.raises(Conflict, match="already approved this revision"):
                store.decide(second, proposal_id, decision(), f"{proposal_id}-k2")
            assert store.decision_state(agent, proposal_id).state == "pending"
        erin = store.sign_in(person("erin"))
        store.decide(erin, "p1", decision(), "p1-k3")
        assert store.decision_state(agent, "p1").state == "approved"
    finally:
        store.close()


def test_two_tokens_bound_to_one_person_are_one_approval_and_unbound_ones_two(
    database: str, clock: Clock
) -> None:
    store = quorum_of_two(database, clock)
    try:
        agent = identity(store, "agent", "agent")
        first, second = (
            bound_token(store, "frank-laptop", "frank"),
            bound_token(store, "frank-phone", "frank"),
        )
        store.submit(agent, submission("bound"))
        store.decide(first, "bound", decision(), "b1")
        with pytest.raises(Conflict, match="already approved this revision"):
            store.decide(second, "bound", decision(), "b2")
        ann, ben = identity(store, "ann", "reviewer"), identity(store, "ben", "reviewer")
        assert ann.person_id is None
        store.submit(agent, submission("unbound"))
        store.decide(ann, "unbound", decision(), "u1")
        store.decide(ben, "unbound", decision(), "u2")
        assert store.decision_state(agent, "unbound").state == "approved"
    finally:
        store.close()
