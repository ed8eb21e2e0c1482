"""`reviewer serve --policy` with escalation steps: the real service under libfaketime, whose wall
clock the test moves by writing a file, pages a real receiver step by step; a ladder that could never
page anyone stops `serve` with one line naming it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.forked_commands import run_reviewer
from tests.queue_harness import Service, decide, reviewer_command, submit
from tests.service.notifications.receiver import Arrival, Receiver, notify_options
from tests.service.notifications.test_escalation import LADDER
from tests.service.ports import free_port
from tests.service.store.test_database_faults import faked_clock, needs_faketime


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    running = Receiver().start()
    yield running
    running.stop()


def escalations(arrivals: list[Arrival]) -> list[tuple[str, int]]:
    return [
        (arrival.document["proposal_id"], arrival.document["step"])
        for arrival in arrivals
        if arrival.event == "proposal.escalated"
    ]


@needs_faketime
def test_serve_pages_step_1_then_step_2_and_nothing_once_decided(tmp_path: Path, receiver: Receiver) -> None:
    """The sweep runs when its time came and a commit wakes it: each "later" is the clock file
    written, then a plan submitted, so no test waits out the sweep's interval."""
    policy = tmp_path / "policy.toml"
    policy.write_text(LADDER)
    clock = tmp_path / "clock"
    service = Service(
        db=tmp_path / "queue.sqlite3",
        log_path=tmp_path / "service.log",
        serve_args=("--policy", str(policy), *notify_options(receiver, tmp_path)),
        env=faked_clock(clock, "+0"),
    )
    service.start()
    try:
        tokens = service.tokens({"alice": "reviewer", "agent": "agent"})
        with service.client(tokens["agent"]) as agent, service.client(tokens["alice"]) as alice:
            digest = submit(agent, "paged")["plan_sha256"]
            clock.write_text("+10m")
            submit(agent, "woken-1")
            receiver.wait_for(3)
            assert escalations(receiver.accepted()) == [("paged", 1)]
            assert decide(alice, "paged", 1, digest).status_code == 201
            clock.write_text("+45m")
            submit(agent, "woken-2")
            arrived = receiver.wait_for(7)
    finally:
        service.stop()
    assert escalations(arrived) == [("paged", 1), ("woken-1", 1), ("woken-1", 2)]
    assert [arrival.event for arrival in arrived if arrival.document["proposal_id"] == "paged"] == [
        "proposal.waiting",
        "proposal.escalated",
        "proposal.decided",
    ]
    assert "[environments.staging] 1 approval; escalates after 10m, 30m, 1h30m" in service.log()


@pytest.mark.parametrize(
    ("ladder", "notify_events", "says"),
    [
        (
            LADDER + '[[environments.staging.escalation]]\nafter = "25h"\n',
            "",
            "policy.toml line 11: escalation step 4 of staging (after 1d1h) comes once its plans "
            "expired (--pending-ttl 86400): it is never sent; not started",
        ),
        (
            LADDER,
            "proposal.escalated:4=",
            "proposal.escalated:4 is never sent: the longest ladder in --policy has 3",
        ),
        ("", "proposal.escalated=", "proposal.escalated is never sent: no --policy escalates"),
        (
            LADDER + '[[environments.staging.escalation]]\nafter = "20m"\n',
            "",
            "policy.toml line 11: escalation step 4 (after 20m) is not later than step 3 (after 1h30m)",
        ),
    ],
    ids=[
        "a step after plans expire",
        "a filter past the ladder",
        "a filter without one",
        "steps out of order",
    ],
)
def test_a_ladder_that_never_pages_stops_serve_with_one_line(
    tmp_path: Path, receiver: Receiver, ladder: str, notify_events: str, says: str
) -> None:
    policy = tmp_path / "policy.toml"
    policy.write_text(ladder)
    notify, url, *secret = notify_options(receiver, tmp_path)
    result = run_reviewer(
        reviewer_command(
            "serve",
            *("--db", str(tmp_path / "q.sqlite3"), "--port", str(free_port())),
            *(("--policy", str(policy)) if ladder else ()),
            *(notify, notify_events + url, *secret),
        ),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode != 0 and says in result.stderr, result.stderr
    assert result.stderr.count("\n") == 1 and result.stderr.startswith("reviewer serve: ")
    assert not (tmp_path / "q.sqlite3").exists(), "nothing was opened"
