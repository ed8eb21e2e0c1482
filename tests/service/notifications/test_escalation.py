"""Escalation steps reach a real webhook receiver on loopback, on SQLite and PostgreSQL alike: each
step once when its time comes, none once the revision is decided, re-planned or expired, once across
two replicas sweeping at the same moment, and only the steps a target chose.

The store and the delivery loop share an injected clock (`Deliverer.deliver_due` is one pass of the
loop): "ten minutes later" is the clock moved, never a wait.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator

import pytest

from reviewer.policy.file import parse_policy
from reviewer.queue.messages import DecisionRequest
from reviewer.service.auth import Identity
from reviewer.service.bodies import submission
from reviewer.service.notifications.chat import chat_text
from reviewer.service.notifications.delivery import Deliverer
from reviewer.service.notifications.sender import NotifyRefused
from reviewer.service.notifications.targets import split_events
from reviewer.service.notifications.webhook import WebhookSender
from reviewer.service.store import Notifying, QueueStore
from reviewer.service.store.opener import open_store
from tests.queue_harness import body, proposal
from tests.service.notifications.receiver import Arrival, Receiver
from tests.service.notifications.test_outbox import SECRET, Queue
from tests.service.postgres import Cluster
from tests.service.store.test_store_contract import Clock, clock, database, identity

__all__ = ["clock", "database"]  # fixtures of the store contract, used here too

MINUTE = 60.0
LADDER = """\
[environments.staging]
approvals = 1

[[environments.staging.escalation]]
after = "10m"
[[environments.staging.escalation]]
after = "30m"
[[environments.staging.escalation]]
after = "90m"
"""
"""The queue's harness proposals run in staging. `Queue`'s plans expire after an hour, so there the
third step never comes: the expiry ends the ladder first."""
POLICY = parse_policy(LADDER)


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


@pytest.fixture
def queue(database: str, clock: Clock, receiver: Receiver) -> Iterator[Queue]:
    made = Queue(database, clock, receiver, policy=POLICY)
    yield made
    made.close()


def steps(arrivals: list[Arrival]) -> list[tuple[str, int, int, int]]:
    """Each escalation that arrived: (proposal, revision, step, of)."""
    return [
        (document["proposal_id"], document["revision"], document["step"], document["of"])
        for document in (arrival.document for arrival in arrivals if arrival.event == "proposal.escalated")
    ]


def move(queue: Queue, minutes: float, passes: int = 2) -> None:
    """Move the clock, then run the delivery loop's pass more than once (a step is written once)."""
    queue.clock.now += minutes * MINUTE
    for _ in range(passes):
        queue.deliverer.deliver_due()


def test_a_pending_plan_gets_step_1_then_step_2_and_nothing_once_decided_or_expired(
    queue: Queue, receiver: Receiver
) -> None:
    decided = queue.submit("decided", title="Close t1 and t2")
    queue.submit("forgotten")
    move(queue, 9.99)
    assert [arrival.event for arrival in receiver.wait_for(2)] == ["proposal.waiting"] * 2
    move(queue, 0.01)
    receiver.wait_for(4)
    assert steps(receiver.accepted()) == [("decided", 1, 1, 3), ("forgotten", 1, 1, 3)]
    page = receiver.accepted()[2].document
    assert page["title"] == "Close t1 and t2" and page["open"] == "reviewer review decided"
    assert page["waited_seconds"] == 600 and page["summary"] == "2 updates in staging"
    queue.approve("decided", decided)
    move(queue, 20)
    move(queue, 30)  # an hour after submission: "forgotten" expires
    move(queue, 60)  # the third step's time
    arrived = receiver.wait_for(8)
    assert steps(arrived) == [("decided", 1, 1, 3), ("forgotten", 1, 1, 3), ("forgotten", 1, 2, 3)]
    assert events_of(arrived, "decided") == [
        "proposal.waiting",
        "proposal.escalated",
        "proposal.decided",
        "proposal.expired",  # the approval, unclaimed for its ten minutes
    ]
    assert events_of(arrived, "forgotten")[-1] == "proposal.expired"
    assert len(receiver.accepted()) == 8, "no step after the decision, nor after the expiry"
    assert len({arrival.delivery for arrival in arrived}) == 8


def events_of(arrivals: list[Arrival], proposal_id: str) -> list[str]:
    return [arrival.event for arrival in arrivals if arrival.document["proposal_id"] == proposal_id]


def test_a_re_plan_ends_the_revisions_ladder_and_the_new_revision_climbs_its_own(
    queue: Queue, receiver: Receiver, clock: Clock
) -> None:
    queue.submit("replanned")
    move(queue, 10)
    receiver.wait_for(2)
    move(queue, 5)
    queue.store.submit(queue.agent, submission(body(proposal("replanned", 2, calls=3))))
    move(queue, 10)  # revision 2's first step
    move(queue, 5)  # revision 1's second step would be due now
    move(queue, 15)  # revision 2's second
    arrived = receiver.wait_for(5)
    assert steps(arrived) == [("replanned", 1, 1, 3), ("replanned", 2, 1, 3), ("replanned", 2, 2, 3)]
    assert arrived[2].event == "proposal.waiting" and arrived[2].document["revision"] == 2
    assert arrived[3].document["waited_seconds"] == 600, "counted from revision 2's submission"
    assert len(receiver.accepted()) == 5


def test_a_request_for_changes_ends_the_ladder(queue: Queue, receiver: Receiver) -> None:
    digest = queue.submit("asked")
    move(queue, 10)
    request = DecisionRequest(revision=1, plan_sha256=digest, decision="request_changes", reason="keep t2")
    queue.store.decide(queue.alice, "asked", request, "ask-asked")
    move(queue, 30)
    arrived = receiver.wait_for(3)
    assert [arrival.event for arrival in arrived] == [
        "proposal.waiting",
        "proposal.escalated",
        "proposal.changes_requested",
    ]
    assert len(receiver.accepted()) == 3


def test_a_target_may_choose_one_step(database: str, clock: Clock, receiver: Receiver) -> None:
    """The channel gets everything, the pager every step (`proposal.escalated`), the manager's pager
    only the second (`proposal.escalated:2`)."""
    queue = Queue(database, clock, receiver, policy=POLICY)
    pager = WebhookSender(receiver.url + "/pager", SECRET, clock=clock)
    manager = WebhookSender(receiver.url + "/manager", SECRET, clock=clock)
    chosen = {pager: "proposal.escalated=x", manager: "proposal.escalated:2=x"}
    try:
        queue.store.notifying = Notifying(
            targets=(queue.sender.name, pager.name, manager.name),
            only={sender.name: split_events(value)[0] or frozenset() for sender, value in chosen.items()},
        )
        queue.deliverer = Deliverer(
            queue.store, [queue.sender, pager, manager], clock=clock, sweep_interval=0
        )
        queue.submit("chosen")
        move(queue, 10)
        move(queue, 20)
        arrived = receiver.wait_for(6)
        assert sorted(
            (arrival.path, arrival.event, arrival.document.get("step", 0)) for arrival in arrived
        ) == [
            ("/hook", "proposal.escalated", 1),
            ("/hook", "proposal.escalated", 2),
            ("/hook", "proposal.waiting", 0),
            ("/hook/manager", "proposal.escalated", 2),
            ("/hook/pager", "proposal.escalated", 1),
            ("/hook/pager", "proposal.escalated", 2),
        ]
        assert len(receiver.accepted()) == 6
    finally:
        pager.close()
        manager.close()
        queue.close()


def test_a_filter_names_a_step_of_escalation_only() -> None:
    assert split_events("proposal.escalated:2,run.unknown=pagerduty://a@b") == (
        frozenset({"proposal.escalated:2", "run.unknown"}),
        "pagerduty://a@b",
    )
    assert split_events("proposal.changes_requested=https://h.example/x")[0] == frozenset(
        {"proposal.changes_requested"}
    )
    for value, says in [
        ("proposal.decided:2=https://h.example/x", "only proposal.escalated has steps"),
        ("proposal.escalated:0=https://h.example/x", "numbered 1 to 10"),
        ("proposal.escalated:11=https://h.example/x", "numbered 1 to 10"),
        ("proposal.escalate:1=https://h.example/x", "no event 'proposal.escalate'"),
    ]:
        with pytest.raises(NotifyRefused, match=says):
            split_events(value)


def test_a_chat_or_a_pager_says_which_step_and_how_long_it_waited() -> None:
    title, text = chat_text(
        {
            "event": "proposal.escalated",
            "title": "Close @here",
            "open": "reviewer review p",
            "revision": 1,
            "step": 2,
            "of": 3,
            "waited_seconds": 1800,
            "agent": "bot",
            "calls": 2,
            "summary": "2 updates in staging",
        }
    )
    assert title == "Escalated, step 2 of 3 (30 min waiting): Close @\u2060here"
    assert "2 updates in staging" in text and text.endswith("Open it: reviewer review p")


def sweep_together(deliverers: list[Deliverer]) -> None:
    """Each replica's delivery pass at the same moment, from its own thread."""
    start = threading.Barrier(len(deliverers))

    def one_pass(deliverer: Deliverer) -> None:
        start.wait()
        deliverer.deliver_due()

    threads = [threading.Thread(target=one_pass, args=(deliverer,)) for deliverer in deliverers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


def test_two_replicas_on_postgresql_sweeping_at_once_send_each_step_once(
    postgres_cluster: Cluster, receiver: Receiver, clock: Clock
) -> None:
    url = postgres_cluster.fresh_database()
    senders = [WebhookSender(receiver.url, SECRET, timeout=2, clock=clock) for _ in range(2)]
    replicas: list[QueueStore] = [
        open_store(
            url,
            clock=clock,
            pending_ttl=3600,
            approval_ttl=600,
            policy=POLICY,
            notifying=Notifying(targets=(sender.name,)),
            create=True,
        )
        for sender in senders
    ]
    try:
        deliverers = [
            Deliverer(replica, [sender], clock=clock, sweep_interval=0)
            for replica, sender in zip(replicas, senders, strict=True)
        ]
        agent: Identity = identity(replicas[0], "agent", "agent")
        ids = [f"both-{number}" for number in range(6)]
        for number, proposal_id in enumerate(ids):
            replicas[number % 2].submit(agent, submission(body(proposal(proposal_id))))
        for minutes in (10, 20):
            clock.now += minutes * MINUTE
            for _ in range(3):
                sweep_together(deliverers)
        arrived = receiver.wait_for(18)
        assert sorted(steps(arrived)) == sorted(
            (proposal_id, 1, step, 3) for proposal_id in ids for step in (1, 2)
        )
        assert len(receiver.accepted()) == 18, "each waiting page and each step once, whichever replica swept"
        assert len({arrival.delivery for arrival in arrived}) == 18
    finally:
        for sender in senders:
            sender.close()
        for replica in replicas:
            replica.close()
