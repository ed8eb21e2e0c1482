"""`reviewer run --max-revisions N`: a reviewer asks for changes through the queue, the Node agent plans
again from `REVIEWER_FEEDBACK`, and the next revision of the same proposal is approved and runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import httpx
import pytest

from reviewer.agent.feedback import Feedback
from reviewer.run.replan import FEEDBACK_ENV, FEEDBACK_LIMIT, feedback_text, with_feedback_env
from tests.run.harness import Queue, RunProcess, SampleApi, proposal, reviewer_decides, start_run

NODE = shutil.which("node")
REPLAN_AGENT = str(Path(__file__).with_name("replan_agent.mjs"))
needs_node = pytest.mark.skipif(
    NODE is None, reason="node is not installed (the agent needs node 18 or later)"
)


def tools(queue: Queue, proposal_id: str, revision: int) -> list[str]:
    return [call["tool"] for call in proposal(queue, proposal_id, revision)["calls"]]


def ticket_status(api: SampleApi, ticket_id: str) -> str:
    status: str = httpx.get(f"{api.url}/v1/tickets/{ticket_id}", timeout=10).json()["status"]
    return status


def feedback_seen(log: Path) -> list[str]:
    return [json.loads(line) for line in log.read_text().splitlines()]


def agent_asked_to_keep_t3(queue: Queue, api: SampleApi, log: Path, *options: str) -> tuple[RunProcess, str]:
    """`reviewer run` of the Node agent, its first plan (close t1, close and delete t3) submitted as
    revision 1, and a reviewer's request through the queue to change it: "keep t3 open"."""
    run = start_run(queue, api, *options, writable=log.parent, command=[str(NODE), REPLAN_AGENT, str(log)])
    proposal_id, revision = run.wait_for_plan()
    assert revision == 1
    assert tools(queue, proposal_id, 1) == [
        "PATCH /v1/tickets/t1",
        "PATCH /v1/tickets/t3",
        "DELETE /v1/tickets/t3",
    ]
    reviewer_decides(queue, proposal_id, "request_changes", reason="keep t3 open")
    return run, proposal_id


@needs_node
def test_a_request_for_changes_makes_the_agent_plan_again_and_the_next_revision_runs(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    log = tmp_path / "feedback.jsonl"
    run, proposal_id = agent_asked_to_keep_t3(queue, sample_api, log, "--max-revisions", "2")

    assert run.wait_for_plan() == (proposal_id, 2), "the re-plan is the next revision of the proposal"
    assert tools(queue, proposal_id, 2) == ["PATCH /v1/tickets/t1"]
    assert sample_api.audit() == [], "nothing may be written before a reviewer approves"
    reviewer_decides(queue, proposal_id)

    status, stderr = run.finish()
    assert status == 0, stderr
    assert "alice asked for changes to revision 1: keep t3 open; COMMAND plans again" in stderr
    assert feedback_seen(log) == ["none", "alice asked for changes to revision 1: keep t3 open"]
    assert (ticket_status(sample_api, "t1"), ticket_status(sample_api, "t3")) == ("closed", "open")
    assert [(line["method"], line["path"]) for line in sample_api.audit()] == [("PATCH", "/v1/tickets/t1")]


@needs_node
def test_by_default_a_request_for_changes_ends_the_run_saying_so(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    log = tmp_path / "feedback.jsonl"
    run, _ = agent_asked_to_keep_t3(queue, sample_api, log)

    status, stderr = run.finish()
    assert status == 1
    assert (
        "alice asked for changes to revision 1: keep t3 open; nothing ran (--max-revisions 1: "
        "COMMAND does not plan again)"
    ) in stderr
    assert feedback_seen(log) == ["none"]
    assert sample_api.audit() == []


def test_feedback_reaches_command_on_one_line_hidden_characters_shown_and_clipped() -> None:
    hostile = Feedback("keep t3\x00 open\n\x1b[2Jrm -rf /" + "x" * FEEDBACK_LIMIT, "mallory\r", 1)
    text = feedback_text(hostile)
    assert text.startswith(
        "mallory\\x0d asked for changes to revision 1: keep t3\\x00 open\\n\\x1b[2Jrm -rf /"
    )
    assert not any(character in text for character in "\x00\n\r\x1b")
    assert len(text) <= FEEDBACK_LIMIT


def test_the_first_plan_never_gets_feedback_from_the_parent_environment() -> None:
    inherited = {"PATH": "/bin", FEEDBACK_ENV: "approve everything"}
    assert with_feedback_env(inherited, None) == {"PATH": "/bin"}
    asked = Feedback("keep t3 open", "alice", 1)
    assert (
        with_feedback_env(inherited, asked)[FEEDBACK_ENV]
        == "alice asked for changes to revision 1: keep t3 open"
    )


def test_max_revisions_below_one_is_refused_before_command_starts(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    run = start_run(queue, sample_api, "--max-revisions", "0", command=["touch", str(marker)])
    status, stderr = run.finish()
    assert status == 2
    assert "reviewer run: --max-revisions must be 1 or more, not 0" in stderr
    assert not marker.exists()
