"""The review screen's alarm line says what the queue's policy found: a plan whose base URL is
production's though it says staging, and the rule that asks for two approvals."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from reviewer.plan.proposal import parse_proposal
from tests.policies import DELETES_IN_PRODUCTION
from tests.queue_harness import body, proposal, start_service, unique_id
from tests.tui.live.helpers import Queue, open_proposal, run, shown_text, until

POLICY = f"""\
[default]
approvals = 1

[environments.production]
base_urls = ["http://127.0.0.1:9/*"]

{DELETES_IN_PRODUCTION}"""


@pytest.fixture(scope="module")
def policy_queue(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Queue]:
    folder = tmp_path_factory.mktemp("policy-screen")
    (folder / "policy.toml").write_text(POLICY)
    service = start_service(folder, "--policy", str(folder / "policy.toml"))
    tokens = {name: service.token(name, role) for name, role in (("alice", "reviewer"), ("agent", "agent"))}
    yield Queue(service, tokens)
    service.stop()


def test_the_alarm_line_names_the_policy_s_environment_mismatch_and_the_rule(policy_queue: Queue) -> None:
    async def scenario() -> None:
        app = policy_queue.app()
        async with app.run_test(size=(160, 30)) as pilot, policy_queue.agent() as agent:
            proposal_id = unique_id("mismatch")
            document = proposal(proposal_id)
            document["target"] = {
                "api": "deskline",
                "base_url": "http://127.0.0.1:9/v1",
                "environment": "staging",
            }
            document["calls"][0]["effect"] = "delete"
            await agent.submit(parse_proposal(body(document)))
            await until(pilot, lambda: proposal_id in app.queue_screen.items, "the new row")
            await open_proposal(pilot, app, proposal_id)
            await until(
                pilot, lambda: "deletes in production" in shown_text(app, "#alarms"), "the policy's alarm"
            )
            alarms = shown_text(app, "#alarms")
            assert "needs 2 approvals: rule `deletes in production`" in alarms
            assert "says environment 'staging', but its base URL is 'production''s" in alarms

    run(scenario)
