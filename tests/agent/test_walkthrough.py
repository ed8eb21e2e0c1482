"""`reviewer walkthrough` prints the reference scenario's table, cell by cell, from what really happened."""

from __future__ import annotations

import argparse
import asyncio

from rich.console import Console

from reviewer.queue.client import QueueClient
from reviewer.sample_api import walkthrough
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.agent.helpers import first_pending

REFERENCE_TABLE = {
    "create": {"server": "ok, id tk-4", "record": "recorded", "real": "ok, id tk-4"},
    "update t1": {"server": "422 (chain noise)", "fake": "ok", "record": "recorded", "real": "ok"},
    "update t2": {"server": "422 (chain noise)", "fake": "ok", "record": "recorded", "real": "ok"},
    "delete t3": {"server": "409 (real refusal)", "fake": "ok", "record": "recorded", "real": "409"},
}
REFERENCE_COUNTS = {"server": (4, 0), "fake": (0, 0), "transport": (0, 0), "record": (0, 0), "real": (4, 3)}


def table_of(result: walkthrough.Walkthrough) -> dict[str, dict[str, str]]:
    from reviewer.reading.analysis import Analysis

    table: dict[str, dict[str, str]] = {}
    for column in result.columns:
        for index, call in enumerate(column.calls):
            verdict = Analysis(column.proposal).row(index).verdict.value if column.proposal else None
            table.setdefault(walkthrough.row_label(call), {})[column.mode] = walkthrough.cell(
                column.mode, call, verdict
            )
    return table


def rendered(result: walkthrough.Walkthrough) -> str:
    console = Console(record=True, width=120, color_system=None)
    walkthrough.render(result, console)
    return console.export_text()


def assert_design_table(result: walkthrough.Walkthrough) -> None:
    table = table_of(result)
    assert list(table) == list(REFERENCE_TABLE)
    for row, expected in REFERENCE_TABLE.items():
        for mode, text in expected.items():
            assert table[row][mode] == text, (row, mode)
    assert table["create"]["fake"].startswith("ok, minted id fake-")
    counts = {column.mode: (column.write_requests, column.writes_kept) for column in result.columns}
    assert counts == REFERENCE_COUNTS
    assert result.verification.naive_identical == 1
    assert result.verification.matching_once_resolved == 3
    assert result.verification.planned == 4


def test_the_walkthrough_reproduces_the_design_table(sample_api: RunningSampleApi) -> None:
    result = asyncio.run(walkthrough.walk(sample_api.base_url))
    assert_design_table(result)
    text = rendered(result)
    assert "Plan verification: 3 of 4 calls match once placeholders resolve; delete t3: refused 409" in text
    assert "Naive comparison (placeholders left as written): 1 of 4 calls identical." in text
    assert "delete t3: the real run met 409; only the server dry run saw it coming." in text
    assert "approved by walkthrough (no queue)" in text


def test_the_walkthrough_waits_for_a_reviewer_when_given_a_queue(
    queue: Queue, sample_api: RunningSampleApi
) -> None:
    async def reviewer_approves() -> None:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            pending = await first_pending(
                reviewer, lambda item: "walkthrough" in item.proposal_id, "the walkthrough's proposal"
            )
            await reviewer.decide(pending.proposal_id, 1, pending.plan_sha256, "approve", "walkthrough")

    async def both() -> walkthrough.Walkthrough:
        _, result = await asyncio.gather(
            reviewer_approves(),
            walkthrough.walk(sample_api.base_url, queue_url=queue.url, token=queue.agent_token, wait=20),
        )
        return result

    result = asyncio.run(both())
    assert_design_table(result)
    assert result.approved_by == "test-reviewer"


def test_the_command_line_registers_walkthrough_and_sample_api() -> None:
    from reviewer.sample_api import commands

    parser = argparse.ArgumentParser()
    commands.register(parser.add_subparsers())
    options = parser.parse_args(["walkthrough", "--queue", "http://127.0.0.1:1"])
    assert options.func is walkthrough.run_walkthrough and options.queue == "http://127.0.0.1:1"
    options = parser.parse_args(["sample-api", "--port", "9999", "--ignore-dry-run"])
    assert options.port == 9999 and options.ignore_dry_run is True


def test_the_walkthrough_with_a_queue_and_no_token_says_how_to_get_one(monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.delenv("REVIEWER_AGENT_TOKEN", raising=False)
    parser = argparse.ArgumentParser()
    walkthrough.register(parser.add_subparsers())
    options = parser.parse_args(["walkthrough", "--queue", "http://127.0.0.1:1"])
    assert options.func(options) == 2
    assert "reviewer token create" in capsys.readouterr().out


def test_an_executor_refusal_is_one_line(queue: Queue, monkeypatch, capsys, tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The executor's memory of the queue's trail is damaged: the reviewer approves, the executor
    refuses the approval, and the walkthrough says so in one line (no traceback, no table), exit 1."""
    import threading

    from reviewer.trail.memory import memory_file

    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("REVIEWER_AGENT_TOKEN", queue.agent_token)
    remembered = memory_file(queue.url)
    remembered.parent.mkdir(parents=True)
    remembered.write_text('{"format": "something else"}')

    async def reviewer_approves() -> None:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            pending = await first_pending(
                reviewer, lambda item: "walkthrough" in item.proposal_id, "the walkthrough's proposal"
            )
            await reviewer.decide(pending.proposal_id, 1, pending.plan_sha256, "approve", "walkthrough")

    approving = threading.Thread(target=asyncio.run, args=(reviewer_approves(),))
    approving.start()
    parser = argparse.ArgumentParser()
    walkthrough.register(parser.add_subparsers())
    options = parser.parse_args(["walkthrough", "--queue", queue.url, "--wait", "20"])
    try:
        assert options.func(options) == 1
    finally:
        approving.join(timeout=30)
    said = capsys.readouterr().out.splitlines()
    assert said[-1] == (
        f"walkthrough: the executor refused the approval: {remembered} is not a remembered trail "
        "checkpoint; restore or remove it"
    )
    assert not any("Traceback" in line or "real run" in line for line in said), said
