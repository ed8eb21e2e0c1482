"""Notifications, on SQLite and PostgreSQL alike: each event is written to the outbox in the transaction
that makes it true and delivered, signed, to a real receiver on loopback, at least once and never lost.

The store and the delivery loop share an injected clock, and `Deliverer.deliver_due` is one pass of the
loop: a receiver "down for 10 s" is the clock moved by ten seconds, never a wait.
"""

from __future__ import annotations

import json
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import msgspec
import pytest

from reviewer.policy.file import Policy
from reviewer.queue.messages import ClaimRequest, DecisionRequest
from reviewer.service.auth import Identity
from reviewer.service.bodies import parse_report, submission
from reviewer.service.notifications.delivery import PAST_DEADLINE, Deliverer, next_attempt, retry_delay
from reviewer.service.notifications.sender import NotifyRefused
from reviewer.service.notifications.signature import verify
from reviewer.service.notifications.targets import split_events
from reviewer.service.notifications.webhook import WebhookSender
from reviewer.service.store import SCHEMA_VERSION, Notifying, QueueStore, StoreSettings, events
from reviewer.service.store.opener import open_store
from reviewer.service.store.proposals import ListVersion
from reviewer.service.store.sqlite import SQLiteStore
from tests import forked_commands
from tests.queue_harness import body, proposal
from tests.service.notifications.receiver import Receiver
from tests.service.store.test_migrations import previous_release_database
from tests.service.store.test_store_contract import START, Clock, clock, database, identity

__all__ = ["clock", "database"]  # fixtures of the store contract, used here too

SECRET = b"s3cret-shared-with-the-receiver"


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


class Queue:
    """A store that notifies one webhook receiver, its delivery loop, and the actors that use it."""

    def __init__(
        self,
        database: str,
        clock: Clock,
        receiver: Receiver,
        policy: Policy | None = None,
        **notifying: float,
    ) -> None:
        self.clock = clock
        self.sender = WebhookSender(receiver.url, SECRET, timeout=2, clock=clock)
        self.store: QueueStore = open_store(
            database,
            clock=clock,
            pending_ttl=3600,
            approval_ttl=600,
            policy=policy,
            notifying=Notifying(targets=(self.sender.name,), **notifying),  # type: ignore[arg-type]
            create=True,
        )
        self.deliverer = Deliverer(self.store, [self.sender], clock=clock, sweep_interval=0)
        self.agent = identity(self.store, "agent", "agent")
        self.alice = identity(self.store, "alice", "reviewer")

    def submit(self, proposal_id: str, title: str = "Merge tickets") -> str:
        accepted = submission(body(proposal(proposal_id, title=title)))
        self.store.submit(self.agent, accepted)
        return accepted.plan_sha256

    def approve(self, proposal_id: str, digest: str) -> None:
        request = DecisionRequest(revision=1, plan_sha256=digest, decision="approve")
        self.store.decide(self.alice, proposal_id, request, f"decide-{proposal_id}")

    def claim(self, proposal_id: str, digest: str) -> str:
        request = ClaimRequest(revision=1, plan_sha256=digest)
        return self.store.claim(self.agent, proposal_id, request, f"claim-{proposal_id}")[1].claim_id

    def report(self, proposal_id: str, digest: str, claim_id: str) -> None:
        """As the service stores a report: parsed by the route's own `parse_report`, whose calls stay
        the bytes they were sent as."""
        calls = [{"seq": 1, "outcome": {"status": "ok"}}, {"seq": 2, "outcome": {"status": "refused"}}]
        report = {"revision": 1, "plan_sha256": digest, "claim_id": claim_id, "ended": "stopped"}
        raw = body({**report, "calls": calls})
        self.store.record_execution(self.agent, proposal_id, parse_report(raw), raw)

    def close(self) -> None:
        self.sender.close()
        self.store.close()


@pytest.fixture
def queue(database: str, clock: Clock, receiver: Receiver) -> Iterator[Queue]:
    made = Queue(database, clock, receiver)
    yield made
    made.close()


SAMPLES = Path(__file__).resolve().parents[3] / "reviewer" / "sample_proposals"


@pytest.mark.parametrize("event", ["proposal.waiting", "proposal.reminder"])
def test_a_waiting_page_says_what_the_plan_does_its_alarms_and_its_money(
    database: str, clock: Clock, receiver: Receiver, event: str
) -> None:
    """The Kubernetes sample's page: 6 updates and 3 deletes in production, its three alarms by name
    and in words, in one line a pager shows; the refunds' page: the euros they move. The reminder
    (written by the sweep, from the stored body) says the same as the first page."""
    queue = Queue(database, clock, receiver, remind_after=600)
    try:
        for name in ("k8s-shop-scale-down.server.json", "billing-refunds-2000.server.json"):
            queue.store.submit(queue.agent, submission((SAMPLES / name).read_bytes()))
        if event == "proposal.reminder":
            clock.now += 601
            queue.store.sweep_events()
        while queue.deliverer.deliver_due():
            pass
        arrived = [arrival for arrival in receiver.wait_for(4 if event == "proposal.reminder" else 2)]
        pages = {
            arrival.document["proposal_id"]: arrival.document for arrival in arrived if arrival.event == event
        }
    finally:
        queue.close()
    kubernetes, refunds = pages["k8s-shop-scale-down-1019"], pages["billing-refunds-bulk-2000"]
    assert kubernetes["counts"] == {"creates": 0, "updates": 6, "deletes": 3, "other": 0, "destructive": 3}
    assert kubernetes["environment"] == "production"
    assert [alarm["name"] for alarm in kubernetes["alarms"]] == ["real_refusals", "deletes", "outliers"]
    assert (
        kubernetes["alarms"][1]["text"] == "3 deletes: persistent_volume_claim, namespace, persistent_volume"
    )
    assert kubernetes["summary"].startswith("6 updates, 3 deletes in production; 1 real refusal; 3 deletes")
    assert refunds["totals"] == [
        {"currency": "EUR", "amount": "84641.64", "out": "84641.64", "in": "0", "calls": 1800}
    ]
    assert (
        refunds["summary"] == "1,800 creates, 200 updates in production, moving EUR 84,641.64 (1,800 calls)"
    )


def test_each_event_arrives_signed_with_what_it_reports_and_the_line_that_opens_it(
    queue: Queue, receiver: Receiver
) -> None:
    digest = queue.submit("deskline-merge-0042")
    queue.approve("deskline-merge-0042", digest)
    claim_id = queue.claim("deskline-merge-0042", digest)
    queue.report("deskline-merge-0042", digest, claim_id)
    assert receiver.arrivals == []  # written, not sent: the requests never waited for a receiver
    while queue.deliverer.deliver_due():
        pass
    arrived = receiver.wait_for(3)
    assert [arrival.event for arrival in arrived] == ["proposal.waiting", "proposal.decided", "run.ended"]
    waiting, decided, ended = (arrival.document for arrival in arrived)
    assert waiting["open"] == decided["open"] == ended["open"] == "reviewer review deskline-merge-0042"
    assert waiting | {"at": None} == {
        "format": "reviewer.event/v1",
        "id": arrived[0].delivery,
        "event": "proposal.waiting",
        "at": None,
        "proposal_id": "deskline-merge-0042",
        "revision": 1,
        "open": "reviewer review deskline-merge-0042",
        "title": "Merge tickets",
        "agent": "deskline-agent",
        "proposed_by": "agent",
        "api": "deskline",
        "environment": "staging",
        "base_url": "http://127.0.0.1:8080",
        "calls": 2,
        "write_requests": 2,
        "writes_kept": 0,
        "plan_sha256": digest,
        "submitted_at": waiting["submitted_at"],
        "waited_seconds": 0,
        "expires_at": waiting["expires_at"],
        "counts": {"creates": 0, "updates": 2, "deletes": 0, "other": 0, "destructive": 0},
        "alarms": [],
        "totals": [],
        "summary": "2 updates in staging",
    }
    assert decided["decision"] == "approve" and decided["decided_by"] == "alice"
    assert (ended["ended"], ended["calls_sent"], ended["calls_kept"], ended["claim_id"]) == (
        "stopped",
        2,
        1,
        claim_id,
    )
    for arrival in arrived:
        header = arrival.headers["reviewer-signature"]
        assert verify(header, arrival.body, SECRET, now=START)
        assert not verify(header, arrival.body, b"another secret", now=START)
        assert not verify(header, arrival.body + b" ", SECRET, now=START)
        assert not verify(header, arrival.body, SECRET, now=START + 3600), "an old signature is a replay"
        assert arrival.document["id"] == arrival.delivery, "the signed body names the delivery id"
        resent_under_a_fresh_id = arrival.body.replace(arrival.delivery.encode(), b"f" * 32)
        assert not verify(header, resent_under_a_fresh_id, SECRET, now=START)
    assert len({arrival.delivery for arrival in arrived}) == 3
    assert [delivery.state for delivery in queue.store.list_deliveries()] == ["delivered"] * 3


def test_a_refused_request_writes_no_event(queue: Queue, receiver: Receiver) -> None:
    digest = queue.submit("refused")
    with pytest.raises(Exception, match="not the latest"):
        queue.approve("refused", "0" * 64)
    queue.approve("refused", digest)
    queue.deliverer.deliver_due()
    queue.deliverer.deliver_due()
    assert [arrival.event for arrival in receiver.wait_for(2)] == ["proposal.waiting", "proposal.decided"]


INJECTED = "injected: the outbox cannot be written"
FAILING_TARGET = "pager"


def fail_outbox_inserts(store: QueueStore, failing: bool) -> None:
    """A fault in the database itself: every outbox row for FAILING_TARGET is refused by a trigger, as
    a full disk or a lost connection would refuse it, after the rows before it in the transaction."""
    sqlite = isinstance(store, SQLiteStore)
    if failing and sqlite:
        statements = [
            "CREATE TRIGGER injected_failure BEFORE INSERT ON outbox "
            f"WHEN NEW.target = '{FAILING_TARGET}' BEGIN SELECT RAISE(ABORT, '{INJECTED}'); END"
        ]
    elif failing:
        statements = [
            "CREATE OR REPLACE FUNCTION injected_failure() RETURNS trigger LANGUAGE plpgsql "
            f"AS $body$ BEGIN RAISE EXCEPTION '{INJECTED}'; END $body$",
            "CREATE TRIGGER injected_failure BEFORE INSERT ON outbox FOR EACH ROW "
            f"WHEN (NEW.target = '{FAILING_TARGET}') EXECUTE FUNCTION injected_failure()",
        ]
    else:
        statements = ["DROP TRIGGER injected_failure" + ("" if sqlite else " ON outbox")]
    with store.write() as db:
        for statement in statements:
            db.run(statement)


def test_a_failing_outbox_insert_leaves_neither_the_change_nor_its_event(database: str, clock: Clock) -> None:
    """Two targets, the second's outbox row refused: the submission, then the decision, fails whole
    (no trail event, no state change, not even the first target's row), and succeeds once the fault is
    gone, with one event per target. An event written after the change committed would leave a
    proposal nobody is told of."""
    store = open_store(
        database,
        clock=clock,
        pending_ttl=3600,
        approval_ttl=600,
        notifying=Notifying(targets=("chat", FAILING_TARGET)),
        create=True,
    )
    agent, alice = identity(store, "agent", "agent"), identity(store, "alice", "reviewer")
    accepted = submission(body(proposal("outbox-fault")))
    decision = DecisionRequest(revision=1, plan_sha256=accepted.plan_sha256, decision="approve")
    try:
        fail_outbox_inserts(store, failing=True)
        with pytest.raises(Exception, match=INJECTED):
            store.submit(agent, accepted)
        assert store.list_version().last_seq == 0 and store.list_deliveries() == []
        fail_outbox_inserts(store, failing=False)
        store.submit(agent, accepted)
        written = store.list_version().last_seq

        fail_outbox_inserts(store, failing=True)
        with pytest.raises(Exception, match=INJECTED):
            store.decide(alice, "outbox-fault", decision, "decide-once")
        assert store.decision_state(alice, "outbox-fault").state == "pending"
        assert store.list_version().last_seq == written
        fail_outbox_inserts(store, failing=False)
        assert store.decide(alice, "outbox-fault", decision, "decide-once")[1].state == "approved"
        events_by_target = sorted((row.event, row.target) for row in store.list_deliveries())
        assert events_by_target == [
            ("proposal.decided", "chat"),
            ("proposal.decided", FAILING_TARGET),
            ("proposal.waiting", "chat"),
            ("proposal.waiting", FAILING_TARGET),
        ]
    finally:
        store.close()


def test_a_receiver_down_for_10_s_then_up_gets_every_event_once_under_one_delivery_id(
    queue: Queue, receiver: Receiver, clock: Clock
) -> None:
    receiver.stop()
    ids = [f"down-{number}" for number in range(3)]
    for proposal_id in ids:
        queue.submit(proposal_id)
    started = clock.now
    while clock.now < started + 10:
        queue.deliverer.deliver_due()
        clock.now += 1
    refused = queue.store.list_deliveries()
    assert {delivery.state for delivery in refused} == {"pending"}
    assert all(
        delivery.attempts >= 2 and "cannot reach" in (delivery.last_error or "") for delivery in refused
    )
    receiver.mode = "fail"
    receiver.start()
    clock.now += 60
    queue.deliverer.deliver_due()  # up, but answering 500: still retried
    assert len(receiver.arrivals) == 3 and receiver.accepted() == []
    receiver.mode = "ok"
    clock.now += 60
    queue.deliverer.deliver_due()
    clock.now += 600
    queue.deliverer.deliver_due()
    accepted = receiver.wait_for(3)
    assert sorted(arrival.document["proposal_id"] for arrival in accepted) == ids
    assert len(accepted) == 3, "each event is accepted once"
    first_ids = {arrival.document["proposal_id"]: arrival.delivery for arrival in receiver.arrivals[:3]}
    assert {arrival.document["proposal_id"]: arrival.delivery for arrival in accepted} == first_ids
    assert {delivery.state for delivery in queue.store.list_deliveries()} == {"delivered"}


def test_finished_deliveries_are_deleted_after_their_retention_and_never_written_again(
    database: str, clock: Clock, receiver: Receiver
) -> None:
    queue = Queue(database, clock, receiver, keep_deliveries=600)
    try:
        digest = queue.submit("kept")
        queue.approve("kept", digest)
        queue.claim("kept", digest)
        clock.now += 3600  # the claim's lease ran out: run.unknown
        queue.deliverer.deliver_due()
        assert [arrival.event for arrival in receiver.wait_for(3)] == [
            "proposal.waiting",
            "proposal.decided",
            "run.unknown",
        ]
        receiver.stop()
        queue.submit("still-waiting")
        queue.deliverer.deliver_due()  # refused: pending, retried
        clock.now += 601
        queue.deliverer.deliver_due()
        (left,) = queue.store.list_deliveries()
        assert (left.proposal_id, left.state) == ("still-waiting", "pending"), "pending rows are kept"
        clock.now += 3600
        queue.deliverer.deliver_due()
        assert {delivery.proposal_id for delivery in queue.store.list_deliveries()} == {"still-waiting"}, (
            "the unknown outcome, pruned, is not written again"
        )
    finally:
        queue.close()


def test_a_targets_backlog_is_bounded_by_giving_up_on_its_oldest(
    database: str, clock: Clock, receiver: Receiver
) -> None:
    queue = Queue(database, clock, receiver, backlog=2)
    try:
        receiver.stop()
        for number in range(4):
            queue.submit(f"backlog-{number}")
        queue.deliverer.deliver_due()
        states = {delivery.proposal_id: delivery for delivery in queue.store.list_deliveries()}
        assert {name: delivery.state for name, delivery in states.items()} == {
            "backlog-0": "failed",
            "backlog-1": "failed",
            "backlog-2": "pending",
            "backlog-3": "pending",
        }
        assert states["backlog-0"].last_error == "given up: more than 2 deliveries were waiting"
    finally:
        queue.close()


def test_a_receiver_that_never_answers_2xx_is_given_up_at_the_deadline_and_listed_failed(
    database: str, clock: Clock, receiver: Receiver
) -> None:
    queue = Queue(database, clock, receiver, give_up_after=60)
    try:
        receiver.mode = "redirect"
        queue.submit("never")
        for _ in range(20):
            queue.deliverer.deliver_due()
            clock.now += 10
        (delivery,) = queue.store.list_deliveries()
        assert delivery.state == "failed" and "redirect, which is not followed" in (delivery.last_error or "")
        assert 2 <= delivery.attempts <= 6
        assert all(arrival.path == "/hook" for arrival in receiver.arrivals), (
            "the Location was never followed"
        )
    finally:
        queue.close()


def test_reminders_repeat_while_pending_and_an_unreported_claim_is_notified_once(
    database: str, receiver: Receiver, clock: Clock
) -> None:
    queue = Queue(database, clock, receiver, remind_after=600)
    try:
        digest = queue.submit("slow")
        queue.deliverer.deliver_due()
        clock.now += 599
        queue.deliverer.deliver_due()
        assert [arrival.event for arrival in receiver.wait_for(1)] == ["proposal.waiting"]
        clock.now += 1
        queue.deliverer.deliver_due()
        queue.deliverer.deliver_due()
        clock.now += 600
        queue.deliverer.deliver_due()
        events_seen = [arrival.event for arrival in receiver.wait_for(3)]
        assert events_seen == ["proposal.waiting", "proposal.reminder", "proposal.reminder"]
        assert receiver.accepted()[-1].document["waited_seconds"] == 1200
        queue.approve("slow", digest)
        queue.claim("slow", digest)
        clock.now += 3600  # past the claim's lease (the store's default lease is an hour)
        for _ in range(3):
            queue.deliverer.deliver_due()
        arrived = receiver.wait_for(5)
        assert [arrival.event for arrival in arrived][3:] == ["proposal.decided", "run.unknown"]
        unknown = arrived[-1].document
        assert unknown["claimed_by"] == "agent" and unknown["open"] == "reviewer review slow"
        clock.now += 600
        queue.deliverer.deliver_due()
        assert len(receiver.accepted()) == 5, "no reminder once decided, one unknown per claim"
    finally:
        queue.close()


def test_a_pending_proposal_and_an_unclaimed_approval_that_expire_are_each_notified_once(
    queue: Queue, receiver: Receiver, clock: Clock
) -> None:
    """`proposal.expired` when the clock passes the pending time (3600 s here) or the approval's (600
    s), never before, once however often the sweep runs; an approval a run claimed does not expire."""
    queue.submit("forgotten")
    approved = queue.submit("approved-idle")
    queue.approve("approved-idle", approved)
    claimed = queue.submit("claimed-in-time")
    queue.approve("claimed-in-time", claimed)
    queue.report("claimed-in-time", claimed, queue.claim("claimed-in-time", claimed))
    clock.now += 599.9
    queue.deliverer.deliver_due()
    assert "proposal.expired" not in [arrival.event for arrival in receiver.wait_for(6)]
    clock.now += 0.1
    for _ in range(3):
        queue.deliverer.deliver_due()
    clock.now += 3000
    for _ in range(3):
        queue.deliverer.deliver_due()
    arrived = receiver.wait_for(8)
    expired = [arrival.document for arrival in arrived if arrival.event == "proposal.expired"]
    assert [(event["proposal_id"], event["was"], event["decided_by"]) for event in expired] == [
        ("approved-idle", "approved", "alice"),
        ("forgotten", "pending", None),
    ]
    assert expired[1]["expired_at"] == "2027-01-15T09:00:00+00:00"
    assert len(receiver.accepted()) == 8, "each expiry once, none for the claimed approval"


def test_a_hanging_receiver_costs_one_bounded_attempt_and_a_10_mb_answer_is_never_read(
    queue: Queue, receiver: Receiver
) -> None:
    receiver.mode = "hang"
    queue.sender.client.timeout = httpx.Timeout(0.5)  # the attempt's bound, short for the test
    queue.submit("hung")
    began = time.monotonic()
    queue.deliverer.deliver_due()
    assert receiver.hanging.is_set()
    (delivery,) = queue.store.list_deliveries()
    assert delivery.state == "pending" and delivery.last_error == "no answer in time"
    assert time.monotonic() - began < 10
    receiver.release.set()
    receiver.mode = "huge"
    queue.clock.now += 60
    queue.deliverer.deliver_due()
    (delivery,) = queue.store.list_deliveries()
    assert delivery.state == "delivered"
    with receiver.changed:
        assert receiver.changed.wait_for(lambda: receiver.cut_writes == 1, 10), "the 10 MB were not cut off"


def test_a_target_given_some_events_gets_only_those(database: str, clock: Clock, receiver: Receiver) -> None:
    queue = Queue(database, clock, receiver)
    pager = WebhookSender(receiver.url + "/pager", SECRET, clock=clock)
    try:
        queue.store.notifying = Notifying(
            targets=(queue.sender.name, pager.name), only={pager.name: frozenset({"run.unknown"})}
        )
        queue.deliverer = Deliverer(queue.store, [queue.sender, pager], clock=clock, sweep_interval=0)
        digest = queue.submit("paged")
        queue.approve("paged", digest)
        queue.claim("paged", digest)
        clock.now += 3600
        queue.deliverer.deliver_due()
        arrived = receiver.wait_for(4)
        assert [(arrival.path, arrival.event) for arrival in arrived] == [
            ("/hook", "proposal.waiting"),
            ("/hook", "proposal.decided"),
            ("/hook", "run.unknown"),
            ("/hook/pager", "run.unknown"),
        ]
    finally:
        pager.close()
        queue.close()


def test_events_before_a_url_choose_what_it_gets() -> None:
    assert split_events("https://h.example/x") == (None, "https://h.example/x")
    assert split_events("run.unknown,proposal.reminder=pagerduty://a@b") == (
        frozenset({"run.unknown", "proposal.reminder"}),
        "pagerduty://a@b",
    )
    with pytest.raises(NotifyRefused, match="no event 'run.lost'"):
        split_events("run.lost=https://h.example/x")


def test_the_retry_delays_double_up_to_five_minutes_and_stop_at_the_deadline() -> None:
    assert [retry_delay(attempts) for attempts in (1, 2, 3, 4)] == [2, 4, 8, 16]
    assert retry_delay(30) == 300
    assert next_attempt(1, 100.0, give_up_at=101.0) is None
    assert next_attempt(1, 100.0, give_up_at=102.0) == 102.0


def test_reminder_numbers_count_whole_periods_only() -> None:
    assert events.reminder_number(0, 599, 600) == 0
    assert events.reminder_number(0, 600, 600) == 1
    assert events.reminder_number(0, 3 * 600 + 5, 600) == 3  # down for three periods: the third, once
    assert events.reminder_number(0, 10_000, None) == 0


def test_without_targets_no_event_is_written(database: str, clock: Clock) -> None:
    store = open_store(database, clock=clock, pending_ttl=3600, approval_ttl=600, create=True)
    try:
        agent: Identity = identity(store, "agent", "agent")
        store.submit(agent, submission(body(proposal("quiet"))))
        assert store.sweep_events() == 0 and store.list_deliveries() == []
    finally:
        store.close()


def test_a_version_3_sqlite_file_gains_the_outbox_and_keeps_its_rows(tmp_path: Path) -> None:
    """The previous release's own file (the fixture it wrote), not this schema less the outbox: a
    migration refuses tables ahead of the version they claim."""
    path = previous_release_database(tmp_path / "v3.sqlite3")
    with sqlite3.connect(path) as db:
        before = db.execute("SELECT name FROM tokens ORDER BY id").fetchall()
    assert before
    SQLiteStore(path, StoreSettings(clock=lambda: 2.0, pending_ttl=10, approval_ttl=10)).close()
    with sqlite3.connect(path) as db:
        tables = {row[0] for row in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
        assert "outbox" in tables and db.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        assert db.execute("SELECT name FROM tokens ORDER BY id").fetchall() == before


def test_a_version_3_postgresql_database_gains_the_outbox(postgres_cluster: object, clock: Clock) -> None:
    import psycopg

    from tests.service.store.test_migrations import version_4_postgresql

    url = version_4_postgresql(postgres_cluster)  # type: ignore[arg-type]
    with psycopg.connect(url, autocommit=True) as raw:
        raw.execute("DROP TABLE outbox")  # migration 4's
        raw.execute("UPDATE reviewer_schema SET version = 3")
    store = open_store(url, clock=clock, pending_ttl=10, approval_ttl=10, create=False)
    try:
        assert store.list_deliveries() == []
    finally:
        store.close()


def test_event_documents_carry_agent_text_with_its_hidden_characters_shown() -> None:
    row = {
        "proposal_id": "p",
        "latest_revision": 1,
        "title": "fine\u202eevil" + "x" * 1000,
        "agent_name": "a",
        "owner": "a",
        "call_count": 1,
        "plan_sha256": "0" * 64,
        "submitted_at": START,
        "pending_expires_at": START + 1,
        "summary": None,
    }
    document = events.waiting(row, body(proposal("p", calls=1)), START)
    assert "\u202e" not in document["title"] and len(document["title"]) <= events.MAX_TEXT_CHARS


def test_a_calls_status_is_read_from_its_bytes_as_from_a_dict() -> None:
    for call, status in [
        ({"seq": 1, "outcome": {"status": "ok"}}, "ok"),
        ({"seq": 1, "status": "failed"}, "failed"),
        ({"seq": 1, "outcome": "ok"}, None),
        ({"seq": 1}, None),
    ]:
        assert events.call_status(call) == status
        assert events.call_status(msgspec.Raw(msgspec.json.encode(call))) == status


class _WakeLandsAfterTheRead(threading.Event):
    """The sweep's wake, for a test that drives the loop in its own thread: once `arm`ed (by a read
    of the deadlines), the next clear or wait first lets `land` commit an event and wake the sweep,
    as a request on another thread would. A wait never blocks: it records how long it would have
    waited and whether a wake would have ended it at once, and the second one stops the loop."""

    def __init__(self, land: Callable[[], None], stop: Callable[[], None]) -> None:
        super().__init__()
        self.land, self.stop = land, stop
        self.armed = False
        self.waits: list[tuple[float | None, bool]] = []

    def _land_if_armed(self) -> None:
        if self.armed:
            self.armed = False
            self.land()

    def clear(self) -> None:
        self._land_if_armed()
        super().clear()

    def wait(self, timeout: float | None = None) -> bool:
        self._land_if_armed()
        self.waits.append((timeout, self.is_set()))
        if len(self.waits) == 2:
            self.stop()
        return self.is_set()


def test_a_wake_landing_after_the_sweep_read_its_deadlines_brings_the_earlier_one_forward(
    queue: Queue, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A proposal submitted just after the sweep read the next deadline (none yet) and before it
    waits: that wait ends at once, and the next one lasts until the new proposal's pending time
    (3600 s), not the sweep interval (7200 s). A clear between the read and the wait would lose it."""
    deliverer = Deliverer(queue.store, [queue.sender], clock=queue.clock, sweep_interval=7200)

    def land() -> None:
        queue.submit("submitted-meanwhile")
        deliverer.wake()  # as the store does once the submission committed

    wake = _WakeLandsAfterTheRead(land, deliverer._stopping.set)
    deliverer._sweep_wake = wake
    read = queue.store.list_version

    def read_then_arm() -> ListVersion:
        version = read()
        wake.armed = not wake.waits
        return version

    monkeypatch.setattr(queue.store, "list_version", read_then_arm)
    deliverer._sweep_loop()
    assert wake.waits == [(7200, True), (pytest.approx(3600 + PAST_DEADLINE), False)]


def test_a_claim_wakes_the_sweep_so_its_leases_end_is_looked_for_then(queue: Queue) -> None:
    """A claim writes no event, but its lease's end is a deadline (`run.unknown` when no report came):
    the sweep is woken to read it, as after a submission, instead of finding it at its next interval."""
    digest = queue.submit("claimed-now")
    queue.approve("claimed-now", digest)
    wakes: list[str] = []
    queue.store.on_event = lambda: wakes.append("woken")
    queue.claim("claimed-now", digest)
    assert wakes == ["woken"]


def test_an_event_queued_by_a_release_without_body_ids_is_delivered_with_its_delivery_id(
    tmp_path: Path, clock: Clock, receiver: Receiver
) -> None:
    """The outbox row a previous release wrote (its body without `id`): every attempt carries the same
    `id`, the row's delivery id, which the signature covers."""
    database = tmp_path / "queue.sqlite3"
    queue = Queue(str(database), clock, receiver)
    receiver.mode = "fail"
    queue.submit("queued-before")
    with sqlite3.connect(database) as db:
        ((event_id, stored),) = db.execute("SELECT event_id, body FROM outbox").fetchall()
        old = {key: value for key, value in json.loads(stored).items() if key != "id"}
        db.execute("UPDATE outbox SET body = ?", (json.dumps(old).encode(),))
    queue.deliverer.deliver_due()
    receiver.mode = "ok"
    clock.now += 600
    queue.deliverer.deliver_due()
    first, second = receiver.arrivals[:2]
    assert first.document["id"] == second.document["id"] == event_id == second.delivery
    assert first.body == second.body, "every attempt sends the same bytes"
    assert {key: value for key, value in second.document.items() if key != "id"} == old
    assert verify(second.headers["reviewer-signature"], second.body, SECRET, now=clock.now)


def test_a_rollback_restored_with_db_restore_never_sends_again_what_was_delivered_since(
    tmp_path: Path, clock: Clock, receiver: Receiver
) -> None:
    """The backup taken at the upgrade holds two events still pending; the newer release delivers them;
    `reviewer db restore BACKUP` puts the backup back with those two marked delivered, and the release
    serving it sends nothing again, while an event it had not delivered still goes out."""
    database = tmp_path / "queue.sqlite3"
    queue = Queue(str(database), clock, receiver)
    receiver.mode = "fail"
    queue.submit("before-upgrade-1")
    queue.submit("before-upgrade-2")
    queue.deliverer.deliver_due()  # refused: both stay pending, as the backup keeps them
    backup = tmp_path / "queue.sqlite3.v6-backup"
    live, copy = sqlite3.connect(database), sqlite3.connect(backup)
    live.backup(copy)
    live.close()
    copy.close()
    queue.submit("never-delivered")  # in the backup? no: written after it, so a rollback loses it
    receiver.mode = "ok"
    clock.now += 600
    queue.deliverer.deliver_due()
    delivered = {arrival.document["proposal_id"] for arrival in receiver.accepted()}
    assert delivered == {"before-upgrade-1", "before-upgrade-2", "never-delivered"}
    queue.store.close()

    restored = run_reviewer("db", "restore", str(backup), "--db", str(database))
    assert restored.returncode == 0, restored.stderr
    assert "2 notification(s) delivered since are not sent again" in restored.stderr
    assert list(tmp_path.glob("queue.sqlite3.replaced-*")), "the replaced database is kept"

    receiver.arrivals.clear()
    store = open_store(str(database), clock=clock, pending_ttl=3600, approval_ttl=600, create=False)
    store.notifying = Notifying(targets=(queue.sender.name,))
    clock.now += 600
    Deliverer(store, [queue.sender], clock=clock, sweep_interval=0).deliver_due()
    assert receiver.arrivals == [], "nothing delivered before the rollback is sent again"
    assert [delivery.state for delivery in store.list_deliveries()] == ["delivered", "delivered"]
    store.close()


def run_reviewer(*args: str) -> subprocess.CompletedProcess[str]:
    return forked_commands.run_reviewer(
        [sys.executable, "-m", "reviewer", *args], capture_output=True, text=True, timeout=120
    )


def test_listing_the_outbox_decodes_no_body_this_release_wrote_and_gives_each_its_delivery_id(
    tmp_path: Path, clock: Clock, receiver: Receiver, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A body stored with its `id` is listed as its bytes, never decoded; one a previous release
    wrote without it is decoded to be given its id, as before."""
    database = tmp_path / "queue.sqlite3"
    queue = Queue(str(database), clock, receiver)
    try:
        for number in range(3):
            queue.submit(f"listed-{number}")
        with sqlite3.connect(database) as db:
            event_id, stored = db.execute("SELECT event_id, body FROM outbox ORDER BY id LIMIT 1").fetchone()
            old = {key: value for key, value in json.loads(stored).items() if key != "id"}
            db.execute("UPDATE outbox SET body = ? WHERE event_id = ?", (json.dumps(old).encode(), event_id))
        decoded: list[bytes] = []
        decode = msgspec.json.decode

        def counting(body: bytes, *args: object, **options: object) -> object:
            decoded.append(bytes(body))
            return decode(body, *args, **options)  # type: ignore[call-overload]

        monkeypatch.setattr(msgspec.json, "decode", counting)
        listed = queue.store.list_deliveries()
        monkeypatch.undo()
        assert len(listed) == 3
        assert [msgspec.json.decode(item.body)["id"] for item in listed] == [item.event_id for item in listed]
        assert decoded == [json.dumps(old).encode()], "only the body without its id was decoded"
    finally:
        queue.close()
