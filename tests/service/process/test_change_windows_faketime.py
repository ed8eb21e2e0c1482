"""Change windows with the whole queue and an agent at fixed wall times, set by Debian's libfaketime.

`reviewer serve --policy` runs with its clock read from a file the test writes (its wall time stands
still at what the file says); the agent is a separate process started under `faketime`, running one
approved plan against a real API on loopback. The scenes go forward in time, as the queue's clock does:
in the year-end freeze nothing is written and the agent names the window (also when its own clock says a
Tuesday morning); two break-glass approvals in the freeze write it once with both reasons in the trail;
a Saturday writes nothing; a Tuesday at 10:00 in Berlin writes once; and a night window at 02:30 opens on
the spring-forward day at 03:00, when the clock jumps past it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from tests.agent.loopback import LoopbackServer, loopback_servers
from tests.builders import proposal_document
from tests.forked_commands import run_reviewer
from tests.policies import WORKING_HOURS_AND_YEAR_END_FREEZE, window
from tests.queue_harness import PYTHON, Service, decide, reviewer_command, unique_id
from tests.service.notifications.receiver import Receiver, notify_options
from tests.service.store.test_database_faults import faked_clock, needs_faketime

NIGHT = f"""
[environments.night]
approvals = 1

{window("night", "night shift", "allow", "30 2 * * *", "1h", "Europe/Berlin")}"""

pytestmark = [
    needs_faketime,
    pytest.mark.skipif(shutil.which("faketime") is None, reason="Debian's faketime command is not installed"),
]


@dataclass
class Scene:
    service: Service
    clock: Path
    api: LoopbackServer
    receiver: Receiver
    tokens: dict[str, str]

    def at(self, wall_time: str) -> None:
        """The queue's wall time from now on (UTC), standing still there."""
        self.clock.write_text(wall_time)

    def client(self, name: str) -> httpx.Client:
        return self.service.client(self.tokens[name])

    def reviewer(self, *args: str) -> subprocess.CompletedProcess[str]:
        """A `reviewer` command as alice, on the real clock: the queue's decides."""
        return run_reviewer(
            reviewer_command(*args),
            env={
                **os.environ,
                "REVIEWER_QUEUE": self.service.url,
                "REVIEWER_TOKEN": self.tokens["alice"],
                "XDG_CONFIG_HOME": str(self.clock.parent / "no-config"),
                "COLUMNS": "200",
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def approved(self, environment: str, *glass: tuple[str, str]) -> str:
        """A one-write plan of `environment`, submitted and approved (or broken glass for, by each
        (reviewer, reason)); its proposal id."""
        proposal_id = unique_id("window")
        document = self.document(proposal_id, environment)
        with self.client("agent") as agent:
            submitted = agent.post("/v1/proposals", content=json.dumps(document).encode())
            assert submitted.status_code == 201, submitted.text
        digest = submitted.json()["plan_sha256"]
        for reviewer, reason in glass or (("alice", ""),):
            with self.client(reviewer) as client:
                if glass:
                    answer = client.post(
                        f"/v1/proposals/{proposal_id}/decisions",
                        json={
                            "revision": 1,
                            "plan_sha256": digest,
                            "decision": "approve",
                            "reason": reason,
                            "break_glass": True,
                        },
                        headers={"Idempotency-Key": unique_id("glass")},
                    )
                else:
                    answer = decide(client, proposal_id, 1, digest)
                assert answer.status_code == 201, answer.text
        return proposal_id

    def document(self, proposal_id: str, environment: str) -> dict[str, object]:
        """A plan of one write to the API, in `environment`."""
        return proposal_document(
            [
                {
                    "tool": "create_invoice",
                    "effect": "create",
                    "args": {"proposal": proposal_id},
                    "request": {"method": "POST", "path": f"/invoices/{proposal_id}", "body": {"n": 1}},
                    "outcome": {"status": "ok", "http_status": 201},
                }
            ],
            proposal_id=proposal_id,
            target={"api": "billing", "base_url": self.api.url, "environment": environment},
            dry_run={"via": "record"},
        )

    def agent_at(self, wall_time: str, proposal_id: str) -> subprocess.CompletedProcess[str]:
        """The agent, its own clock at `wall_time` (UTC), running the approved plan once."""
        return subprocess.run(
            [
                "faketime",
                "-m",
                "--exclude-monotonic",
                f"{wall_time} UTC",
                PYTHON,
                "-m",
                "tests.service.windows_agent",
                self.service.url,
                self.api.url,
                proposal_id,
            ],
            env={**os.environ, "REVIEWER_TOKEN": self.tokens["agent"], "TZ": "UTC"},
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def writes(self, proposal_id: str) -> int:
        return sum(path == f"/invoices/{proposal_id}" for _method, path, _headers, _body in self.api.seen)


@pytest.fixture(scope="module")
def scene(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Scene]:
    folder = tmp_path_factory.mktemp("windows")
    (folder / "policy.toml").write_text(WORKING_HOURS_AND_YEAR_END_FREEZE + NIGHT)
    clock = folder / "clock"
    receiver = Receiver().start()
    service = Service(
        db=folder / "queue.sqlite3",
        log_path=folder / "service.log",
        serve_args=("--policy", str(folder / "policy.toml"), *notify_options(receiver, folder)),
        env={**faked_clock(clock, "2026-12-29 09:00:00"), "TZ": "UTC"},  # a Tuesday in the freeze
    )
    service.start()
    tokens = service.tokens({"alice": "reviewer", "bob": "reviewer", "agent": "agent"})
    with loopback_servers(1) as (api,):
        yield Scene(service, clock, api, receiver, tokens)
    service.stop()
    receiver.stop()


def test_in_the_freeze_nothing_is_written_and_the_agent_names_the_window(scene: Scene) -> None:
    scene.at("2026-12-29 09:00:00")
    proposal_id = scene.approved("production")
    ran = scene.agent_at("2026-12-29 09:00:00", proposal_id)
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert "kept by year-end freeze" in ran.stdout
    assert "runs from 2027-01-04 08:00 UTC" in ran.stdout
    # The agent's own clock says a Tuesday at 10:00 in Berlin: the queue's clock decides, not its.
    fooled = scene.agent_at("2027-01-12 09:00:00", proposal_id)
    assert fooled.returncode == 3, fooled.stdout + fooled.stderr
    assert scene.writes(proposal_id) == 0
    with scene.client("alice") as alice:
        state = alice.get(f"/v1/proposals/{proposal_id}/decision").json()
    assert state["state"] == "approved", "the approval was not used"
    waiting = [
        arrival.document
        for arrival in scene.receiver.wait_for(2)
        if arrival.document.get("proposal_id") == proposal_id
        and arrival.document["event"] == "proposal.waiting"
    ]
    assert waiting[0]["runs_from"] == "2027-01-04T08:00:00+00:00"


def test_show_and_approve_say_when_it_runs_and_break_glass_from_the_command_line(scene: Scene) -> None:
    scene.at("2026-12-29 12:00:00")
    with scene.client("agent") as agent:
        proposal_id = unique_id("window")
        document = scene.document(proposal_id, "production")
        digest = agent.post("/v1/proposals", content=json.dumps(document).encode()).json()["plan_sha256"]
    shown = scene.reviewer("show", proposal_id)
    assert shown.returncode == 0, shown.stderr
    assert (
        "runs from 2027-01-04 08:00 UTC (inside the deny window 'year-end freeze'; break glass 0 of 2)"
        in " ".join(shown.stdout.split())
    )
    approve = ("approve", proposal_id, "--revision", "1", "--digest", digest)
    unexplained = scene.reviewer(*approve, "--break-glass", " ")
    assert unexplained.returncode == 2
    assert unexplained.stderr.strip().endswith(
        "--break-glass must say why the plan cannot wait; nothing was sent"
    )
    approved = scene.reviewer(*approve, "--break-glass", "the invoices of the 31st must go out")
    assert approved.returncode == 0, approved.stderr
    assert "approved by alice (unsigned); runs from 2027-01-04 08:00 UTC" in approved.stdout
    assert "break glass 1 of 2: alice)" in approved.stdout


def test_two_break_glass_approvals_in_the_freeze_write_once_with_both_reasons(scene: Scene) -> None:
    scene.at("2026-12-30 15:00:00")
    glass = (("alice", "invoices due today fail"), ("bob", "checked the plan with finance"))
    proposal_id = scene.approved("production", *glass)
    ran = scene.agent_at("2026-12-30 15:00:00", proposal_id)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert scene.writes(proposal_id) == 1
    with scene.client("alice") as alice:
        history = alice.get(f"/v1/proposals/{proposal_id}").json()["history"]
    assert [(event["actor"], event.get("reason")) for event in history if event["event"] == "approved"] == [
        ("alice", "break glass: invoices due today fail"),
        ("bob", "break glass: checked the plan with finance"),
    ]
    broken = [
        arrival.document
        for arrival in scene.receiver.wait_for(5)
        if arrival.document.get("proposal_id") == proposal_id
        and arrival.document["event"] == "proposal.break_glass"
    ]
    assert [(event["reviewer"], event["break_glass"]) for event in broken] == [
        ("alice", ["alice"]),
        ("bob", ["alice", "bob"]),
    ]


def test_a_saturday_writes_nothing(scene: Scene) -> None:
    scene.at("2027-01-09 10:00:00")
    proposal_id = scene.approved("production")
    ran = scene.agent_at("2027-01-09 10:00:00", proposal_id)
    assert ran.returncode == 3, ran.stdout + ran.stderr
    assert "kept by working hours" in ran.stdout and "runs from 2027-01-11 08:00 UTC" in ran.stdout
    assert scene.writes(proposal_id) == 0


def test_a_tuesday_at_ten_in_berlin_writes_once(scene: Scene) -> None:
    scene.at("2027-01-12 09:00:00")
    proposal_id = scene.approved("production")
    ran = scene.agent_at("2027-01-12 09:00:00", proposal_id)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert scene.writes(proposal_id) == 1


def test_the_night_window_at_half_past_two_opens_when_the_clock_jumps_on_the_spring_forward_day(
    scene: Scene,
) -> None:
    scene.at("2027-03-28 00:55:00")  # 01:55 in Berlin: the clock jumps from 02:00 to 03:00
    proposal_id = scene.approved("night")
    early = scene.agent_at("2027-03-28 00:55:00", proposal_id)
    assert early.returncode == 3, early.stdout + early.stderr
    assert "runs from 2027-03-28 01:00 UTC" in early.stdout
    scene.at("2027-03-28 01:10:00")  # 03:10 in Berlin, summer time
    ran = scene.agent_at("2027-03-28 01:10:00", proposal_id)
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert scene.writes(proposal_id) == 1
