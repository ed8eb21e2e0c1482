"""`reviewer mcp-gate` driven by the official MCP client over stdio, in front of a small upstream server
written for the test (`upstream_server.py`), with the real queue on loopback."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client, MCPError, StdioServerParameters

from reviewer.queue.client import QueueClient
from tests.agent.fixtures import Queue
from tests.agent.helpers import reviewer_decides

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = Path(__file__).with_name("upstream_server.py")


def gate(queue: Queue, log: Path, mode: str = "") -> Client:
    """The host's view: the gate started as a host starts any stdio MCP server."""
    parameters = StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "reviewer",
            "mcp-gate",
            "--queue",
            queue.url,
            "--title",
            "ticket chores",
            "--upstream-timeout",
            "5",
            "--",
            sys.executable,
            str(UPSTREAM),
        ],
        env={"REVIEWER_AGENT_TOKEN": queue.agent_token, "UPSTREAM_LOG": str(log), "UPSTREAM_MODE": mode},
        cwd=str(ROOT),
    )
    return Client(parameters, read_timeout_seconds=30)


def upstream_writes(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def answer(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_writes_reach_the_upstream_only_after_approval_once_in_order(queue: Queue, tmp_path: Path) -> None:
    log = tmp_path / "upstream.log"

    async def scenario() -> dict[str, Any]:
        async with gate(queue, log) as host:
            listed = {tool.name: tool for tool in (await host.list_tools()).tools}
            assert set(listed) == {
                "list_tickets",
                "open_ticket",
                "close_ticket",
                "delete_ticket",
                "reviewer_submit_plan",
                "reviewer_plan_status",
            }
            assert listed["open_ticket"].output_schema["required"] == ["id", "status"]  # unchanged

            read = await host.call_tool("list_tickets", {})  # a read answers at once, for real
            assert json.loads(read.structured_content["result"])["t1"] == {"status": "open"}

            opened = await host.call_tool("open_ticket", {"title": "Printer on fire", "dryRun": False})
            assert opened.structured_content == {"id": "<id from call 1>", "status": "<status from call 1>"}
            assert "Recorded for review" in answer(opened)["note"]
            for ticket in ("t1", "t2"):
                await host.call_tool("close_ticket", {"id": ticket, "merged_into": "<id from call 1>"})
            await host.call_tool("delete_ticket", {"id": "t1"})
            assert upstream_writes(log) == []

            submitted = answer(
                await host.call_tool("reviewer_submit_plan", {"title": "Merge t1, t2; drop t1"})
            )
            assert submitted["state"] == "pending" and submitted["revision"] == 1
            proposal_id = submitted["proposal_id"]

            late = await host.call_tool("close_ticket", {"id": "t2"})
            assert late.is_error and "A new plan starts after this one ends" in late.content[0].text
            assert (
                answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))["state"]
                == "pending"
            )
            assert upstream_writes(log) == []

            seen = await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")
            assert [(call.tool, call.effect) for call in seen.calls] == [
                ("open_ticket", "update"),
                ("close_ticket", "update"),
                ("close_ticket", "update"),
                ("delete_ticket", "delete"),
            ]
            assert seen.dry_run.via == "record" and seen.calls[0].args == {"title": "Printer on fire"}

            executed = answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))
            again = answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))
            assert again == executed
            fresh = await host.call_tool("close_ticket", {"id": "t2"})  # the plan ended: a new one starts
            assert not fresh.is_error
            return executed

    executed = asyncio.run(scenario())
    assert executed["state"] == "executed" and executed["ended"] == "completed"
    assert [(call["tool"], call["status"]) for call in executed["calls"]] == [
        ("open_ticket", "ok"),
        ("close_ticket", "ok"),
        ("close_ticket", "ok"),
        ("delete_ticket", "ok"),
    ]
    assert executed["calls"][0]["result"] == {"id": "tk-3", "status": "open"}
    assert upstream_writes(log) == [
        {"tool": "open_ticket", "title": "Printer on fire", "id": "tk-3"},
        {"tool": "close_ticket", "id": "t1", "merged_into": "tk-3"},
        {"tool": "close_ticket", "id": "t2", "merged_into": "tk-3"},
        {"tool": "delete_ticket", "id": "t1"},
    ]


def test_a_run_stops_at_the_first_failure_and_a_rejection_returns_the_reason(
    queue: Queue, tmp_path: Path
) -> None:
    log = tmp_path / "upstream.log"

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        async with gate(queue, log) as host:
            await host.call_tool("delete_ticket", {"id": "t2"})  # refused upstream: t2 is open
            await host.call_tool("close_ticket", {"id": "t1"})
            first = answer(await host.call_tool("reviewer_submit_plan", {}))
            await reviewer_decides(queue.url, queue.reviewer_token, first["proposal_id"], "approve")
            stopped = answer(
                await host.call_tool("reviewer_plan_status", {"proposal_id": first["proposal_id"]})
            )

            await host.call_tool("close_ticket", {"id": "t2"})
            second = answer(await host.call_tool("reviewer_submit_plan", {}))
            await reviewer_decides(
                queue.url, queue.reviewer_token, second["proposal_id"], "reject", "t2 stays open"
            )
            rejected = answer(
                await host.call_tool("reviewer_plan_status", {"proposal_id": second["proposal_id"]})
            )
            return stopped, rejected

    stopped, rejected = asyncio.run(scenario())
    assert stopped["ended"] == "stopped"
    assert [(call["tool"], call["status"]) for call in stopped["calls"]] == [("delete_ticket", "error")]
    assert "close t2 before deleting it" in stopped["calls"][0]["message"]
    assert rejected["state"] == "rejected" and rejected["reason"] == "t2 stays open"
    assert upstream_writes(log) == []


def test_an_unknown_proposal_and_an_empty_plan_get_clear_errors(queue: Queue, tmp_path: Path) -> None:
    async def scenario() -> tuple[str, str]:
        async with gate(queue, tmp_path / "log") as host:
            unknown = await host.call_tool("reviewer_plan_status", {"proposal_id": "no-such-plan"})
            empty = await host.call_tool("reviewer_submit_plan", {"title": "nothing"})
            assert unknown.is_error and empty.is_error
            return unknown.content[0].text, empty.content[0].text

    unknown, empty = asyncio.run(scenario())
    assert "knows no proposal 'no-such-plan'" in unknown
    assert "no write tool call was recorded" in empty


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("crash", "the upstream server could not be started or stopped answering"),
        ("hang", "the upstream server did not answer within 5 s"),
        ("empty", "the upstream server lists no tools"),
    ],
)
def test_a_broken_upstream_is_a_clear_mcp_error_and_leaves_the_queue_untouched(
    queue: Queue, tmp_path: Path, mode: str, message: str
) -> None:
    async def pending_count() -> int:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            listing = await reviewer.list_proposals(limit=100)
            assert listing.page is not None
            return len(listing.page.proposals)

    before = asyncio.run(pending_count())

    async def scenario() -> list[str]:
        errors = []
        async with gate(queue, tmp_path / "log", mode) as host:
            for call in (host.list_tools(), host.call_tool("open_ticket", {"title": "x"})):
                with pytest.raises(MCPError) as raised:
                    await call
                errors.append(str(raised.value))
        return errors

    for error in asyncio.run(scenario()):
        assert message in error
    assert asyncio.run(pending_count()) == before
