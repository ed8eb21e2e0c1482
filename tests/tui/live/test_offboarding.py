"""Offboarding as a team lives it, against a real OpenID provider (npm's `oidc-provider`) and queue.

A plan waits for two approvals. dana has it open in her app when alice approves it; the provider then
takes alice out of the reviewers group, and her next request carries the token that says so. dana's
app drops alice's approval at its next poll and says it was withdrawn; alice's own app, open on a
plan she just approved, says her sign-in ended in those words (never advice to mint a token, which
this queue refuses) in its status line and in the review's decision line, which had said what her
approval sent. The queue logs both, the trail holds both as entries an auditor's export verifies,
and `reviewer show` says who was withdrawn and why.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Generator, Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from reviewer.tui.app import ReviewerApp
from reviewer.tui.model.queue_source import QueueSource
from reviewer.tui.widgets.chrome import Chrome
from tests.forked_commands import run_reviewer
from tests.queue_harness import Service, reviewer_command, start_service, submit, unique_id
from tests.service.oidc import Provider, running_provider
from tests.service.routes.test_oidc import POLICY, documented_serve_options
from tests.tui.live.helpers import decide_from_keyboard, open_proposal, run, shown_text, status, until


class Bearer(httpx.Auth):
    """The identity token the provider issued last, as a renewing session presents it; a test swaps
    in the next one the provider issues (after it took the person out of the group)."""

    def __init__(self, token: str) -> None:
        self.token = token

    def auth_flow(self, request: httpx.Request) -> Generator[httpx.Request, httpx.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.token}"
        yield request


@dataclass
class Team:
    provider: Provider
    queue: Service
    agent: httpx.Client
    auditor: str
    folder: Path
    trail_key: Path

    def app(self, auth: Bearer) -> ReviewerApp:
        return ReviewerApp(
            QueueSource(self.queue.url, auth, poll_interval=0.2, retry_base=0.2, max_backoff=1)
        )

    def cli(self, token: str, *args: str) -> subprocess.CompletedProcess[str]:
        environment = {**os.environ, "REVIEWER_TOKEN": token, "COLUMNS": "200"}
        return run_reviewer(
            reviewer_command(*args), capture_output=True, text=True, env=environment, timeout=60
        )


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    folder = tmp_path_factory.mktemp("offboarding")
    key = folder / "trail_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "queue", "-f", str(key)], check=True)
    with running_provider(folder) as provider:
        policy = folder / "policy.toml"
        policy.write_text(POLICY)
        queue = start_service(
            folder,
            "--policy",
            str(policy),
            "--trail-key",
            str(key),
            *documented_serve_options(provider.issuer),
        )
        tokens = queue.tokens({"deploy-agent": "agent", "audit": "auditor"})
        agent = queue.client(tokens["deploy-agent"])
        yield Team(provider, queue, agent, tokens["audit"], folder, key)
        agent.close()
        queue.stop()


def chrome(app: ReviewerApp) -> str:
    return str(app.screen.query_one(Chrome).render())


def out_of_the_group(team: Team, person: str) -> str:
    """The token the provider issues at the person's next renewal once they left the group."""
    return team.provider.identity_token(person, issued=time.time() + 1, groups=["staff"])


def test_an_open_app_follows_a_withdrawn_approval_and_an_ended_sign_in(team: Team) -> None:
    waiting, own = unique_id("offboard"), unique_id("offboard-own")
    submitted = submit(team.agent, waiting)
    alice = Bearer(team.provider.identity_token("alice"))
    dana = Bearer(team.provider.identity_token("dana"))

    async def dana_follows() -> None:
        app = team.app(dana)
        async with (
            app.run_test(size=(200, 30)) as pilot,
            httpx.AsyncClient(base_url=team.queue.url, auth=alice) as alice_client,
        ):
            await until(pilot, lambda: waiting in app.queue_screen.items, "the row")
            await open_proposal(pilot, app, waiting)
            approved = await alice_client.post(
                f"/v1/proposals/{waiting}/decisions",
                json={"revision": 1, "plan_sha256": submitted["plan_sha256"], "decision": "approve"},
                headers={"Idempotency-Key": "alice-1"},
            )
            assert approved.json()["approvals"] == ["alice@example.com"], approved.text
            await until(pilot, lambda: "1 of 2 approvals (alice@example.com)" in chrome(app), "her approval")

            alice.token = out_of_the_group(team, "alice")
            refused = await alice_client.get("/v1/whoami")
            assert refused.json()["error"] == "not_in_reviewers_group", refused.text
            withdrawn = "0 of 2 approvals · 1 approval withdrawn (alice@example.com, sign-in ended)"
            await until(pilot, lambda: "withdrawn (alice@" in chrome(app), "the withdrawal, at the next poll")
            assert withdrawn in app.items[waiting].state_words()  # the chrome clips a part at 80 cells
            alarm = "1 approval withdrawn (alice@example.com, sign-in ended)"
            await until(pilot, lambda: alarm in shown_text(app, "#alarms"), "the alarm line, whole")
            assert "approvals (alice@example.com)" not in chrome(app)

    async def alice_sees_her_sign_in_end() -> None:
        alice.token = team.provider.identity_token("alice", issued=time.time() + 2)  # back in the group
        submit(team.agent, own)
        app = team.app(alice)
        async with app.run_test(size=(200, 30)) as pilot:
            await until(pilot, lambda: own in app.queue_screen.items, "the row")
            await open_proposal(pilot, app, own)
            await decide_from_keyboard(pilot, "a", "y")
            await until(pilot, lambda: "1 of 2 approvals" in shown_text(app, "#decision"), "what she sent")

            alice.token = out_of_the_group(team, "alice")
            ended = "your sign-in ended: not in the reviewers group"
            await until(pilot, lambda: ended in shown_text(app, "#decision"), "the footer, from the queue")
            footer = shown_text(app, "#decision")
            assert "1 of 2 approvals" not in footer and "token create" not in footer
            assert "your pending approvals no longer count" in footer
            assert ended in status(app) and "token create" not in status(app)

    run(dana_follows)
    run(alice_sees_her_sign_in_end)

    log = team.queue.log_path.read_text()
    assert f"approval withdrawn: alice@example.com on proposal {waiting} revision 1" in log
    assert f"approval withdrawn: alice@example.com on proposal {own} revision 1" in log
    assert log.count("sign-in ended: alice@example.com") == 2

    export = team.folder / "trail.jsonl"
    exported = team.cli(team.auditor, "trail", "export", "--queue", team.queue.url, "-o", str(export))
    assert exported.returncode == 0, exported.stderr
    verified = team.cli("", "trail", "verify", str(export), "--key", f"{team.trail_key}.pub")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    leaves = [json.loads(line)["leaf"] for line in export.read_text().splitlines()[1:]]
    ended = [leaf for leaf in leaves if leaf["event"] == "sign_in_ended"]
    assert [(leaf["actor"], leaf["reason"], leaf["proposal_id"]) for leaf in ended] == [
        ("alice@example.com", "out of the reviewers group", None)
    ] * 2
    assert [leaf["proposal_id"] for leaf in leaves if leaf["event"] == "withdrawn"] == [waiting, own]

    shown = team.cli(dana.token, "show", waiting, "--queue", team.queue.url)
    assert shown.returncode == 0, shown.stderr
    assert "1 approval withdrawn (alice@example.com, sign-in ended)" in shown.stdout
