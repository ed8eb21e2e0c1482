"""`reviewer mcp-gate` driven by the official MCP client over stdio, in front of a small upstream server
written for the test (`upstream_server.py`), with the real queue on loopback."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, TextIO, get_args

import pytest

pytest.importorskip("mcp")

from mcp import Client, MCPError, StdioServerParameters
from mcp.client.stdio import stdio_client

from reviewer.plan.proposal import OutcomeStatus
from reviewer.queue.client import QueueClient
from tests.agent.fixtures import Queue
from tests.agent.helpers import reviewer_decides
from tests.forked_commands import run_reviewer

ROOT = Path(__file__).resolve().parents[2]
UPSTREAM = Path(__file__).with_name("upstream_server.py")


BOUND = 120.0
"""Seconds the gate and the host wait for an answer that comes (a crash, a tool list): a bound, not a
wait; a loaded machine took more than 5 s to start the upstream server."""
HANG_TIMEOUT = 1
"""The gate's wait for the upstream that never answers (to start, or a call): the cases where the
timeout is the event. A hang at the start is bounded by `--upstream-timeout` alone: the start's own
timeout is that one unless given."""


TICKET_TRUST = (
    "--read",
    "list_tickets",
    "--effect",
    "close_ticket=update",
    "--effect",
    "delete_ticket=delete",
)
"""The operator's word on the test upstream's tools: one read, and what its writes do."""


def gate(
    queue: Queue,
    log: Path,
    mode: str = "",
    trust: tuple[str, ...] = TICKET_TRUST,
    upstream_timeout: float = BOUND,
    start_timeout: float | None = None,
    errlog: TextIO | None = None,
    audit_log: Path | None = None,
    state_home: Path | None = None,
) -> Client:
    """The host's view: the gate started as a host starts any stdio MCP server (its stderr to
    `errlog`, else the test's); with `audit_log`, the upstream writes it as the API's access log and
    the gate reads it (`--audit access-log:FILE`). The gate keeps its state (the trail checkpoints it
    saw) in `state_home`, else in a `state` folder beside `log`."""
    audit = ("--audit", f"access-log:{audit_log}") if audit_log is not None else ()
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
            "--name",
            "tickets",
            "--upstream-timeout",
            f"{upstream_timeout:g}",
            *(() if start_timeout is None else ("--upstream-start-timeout", f"{start_timeout:g}")),
            *audit,
            *trust,
            # The upstream's sandbox: it writes its log (and the API's) in the test's folder alone.
            "--writable",
            str(log.parent),
            "--",
            sys.executable,
            str(UPSTREAM),
        ],
        env={
            "REVIEWER_AGENT_TOKEN": queue.agent_token,
            "UPSTREAM_LOG": str(log),
            "UPSTREAM_MODE": mode,
            "UPSTREAM_AUDIT_LOG": str(audit_log or ""),
            "XDG_STATE_HOME": str(state_home or log.parent / "state"),
        },
        cwd=str(ROOT),
    )
    return Client(
        parameters if errlog is None else stdio_client(parameters, errlog), read_timeout_seconds=BOUND
    )


def upstream_writes(log: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def answer(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def failed_run(result: Any, said: str) -> Any:
    """A status of a run that failed: a tool result marked isError (never a protocol error), saying
    `said` first, with the plan's state still in it for the host to read."""
    assert result.is_error, result.content
    assert said in result.content[0].text, result.content[0].text
    return result.structured_content


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
                ("open_ticket", "other"),  # no annotation at all: an effect unknown, never a create
                ("close_ticket", "update"),  # the operator's word
                ("close_ticket", "update"),
                ("delete_ticket", "delete"),
            ]
            assert seen.dry_run.via == "record" and seen.calls[0].args == {"title": "Printer on fire"}
            assert "effect unknown" in (seen.calls[0].outcome.message or "")
            assert [call.destructive for call in seen.calls] == [False, False, False, True]

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
            stopped = failed_run(
                await host.call_tool("reviewer_plan_status", {"proposal_id": first["proposal_id"]}), "{"
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
        ("hang", f"the upstream server did not answer within {HANG_TIMEOUT} s"),
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
        timeout = HANG_TIMEOUT if mode == "hang" else BOUND
        async with gate(queue, tmp_path / "log", mode, upstream_timeout=timeout) as host:
            for call in (host.list_tools(), host.call_tool("open_ticket", {"title": "x"})):
                with pytest.raises(MCPError) as raised:
                    await call
                errors.append(str(raised.value))
        return errors

    for error in asyncio.run(scenario()):
        assert message in error
    assert asyncio.run(pending_count()) == before


# --- what the upstream says of itself is not trusted -----------------------------------------


def test_a_tool_that_calls_itself_read_only_is_gated_unless_the_operator_says_otherwise(
    queue: Queue, tmp_path: Path
) -> None:
    """By default no hint lets a call through; trusting read-only hints lets through only a tool that
    is not also hinted destructive; the operator's --effect wins over any hint."""
    log = tmp_path / "upstream.log"

    async def scenario() -> dict[str, Any]:
        async with gate(queue, log, "lying", trust=()) as host:
            for name, arguments in (
                ("purge_tickets", {}),
                ("peek_ticket", {"id": "t1"}),
                ("list_tickets", {}),
            ):
                recorded = answer(await host.call_tool(name, arguments))
                assert recorded["recorded"] is True, name
            assert upstream_writes(log) == []
        shutil.rmtree(log.parent / "state")  # that plan is dropped, not picked up by the next gate
        trusting = ("--trust-read-only-hints", "--effect", "peek_ticket=update")
        async with gate(queue, log, "lying", trust=trusting) as host:
            listed = await host.call_tool("list_tickets", {})  # hinted read-only, trusted: passes
            assert "recorded" not in listed.content[0].text
            assert answer(await host.call_tool("purge_tickets", {}))["recorded"] is True
            assert answer(await host.call_tool("peek_ticket", {"id": "t1"}))["recorded"] is True
            assert upstream_writes(log) == []
            return answer(await host.call_tool("reviewer_submit_plan", {}))

    submitted = asyncio.run(scenario())
    seen = asyncio.run(reviewer_decides(queue.url, queue.reviewer_token, submitted["proposal_id"], "reject"))
    assert [(call.tool, call.effect) for call in seen.calls] == [
        ("purge_tickets", "update"),
        ("peek_ticket", "update"),
    ]
    assert "may overwrite or destroy" in (seen.calls[0].outcome.message or "")
    assert seen.target.api == "mcp:tickets" and seen.target.tools_sha256 is not None
    assert upstream_writes(log) == []


# --- restarts, changed tools, an upstream that dies ------------------------------------------


async def record_and_submit(host: Client) -> str:
    await host.call_tool("open_ticket", {"title": "Printer on fire"})
    await host.call_tool("close_ticket", {"id": "t1", "merged_into": "<id from call 1>"})
    await host.call_tool("close_ticket", {"id": "t2", "merged_into": "<id from call 1>"})
    return str(answer(await host.call_tool("reviewer_submit_plan", {}))["proposal_id"])


async def status(host: Client, proposal_id: str) -> Any:
    return await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id})


def test_a_restarted_gate_refuses_changed_tools_then_runs_the_plan_once_and_reports_it_after(
    queue: Queue, tmp_path: Path
) -> None:
    log = tmp_path / "upstream.log"

    async def scenario() -> None:
        async with gate(queue, log) as host:
            proposal_id = await record_and_submit(host)
        await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")

        async with gate(queue, log, "changed") as host:  # a new release of the upstream meanwhile
            refused = await status(host, proposal_id)
            assert refused.is_error and refused.structured_content is None
            assert "mcp:tickets: the upstream server's tool definitions changed" in refused.content[0].text
        assert upstream_writes(log) == []
        async with QueueClient(queue.url, queue.agent_token) as agent:
            assert (await agent.decision_state(proposal_id)).state == "approved"  # unused

        async with gate(queue, log) as host:  # the upstream as the plan was recorded against
            executed = answer(await status(host, proposal_id))
        assert executed["ended"] == "completed"
        assert [(call["tool"], call["status"]) for call in executed["calls"]] == [
            ("open_ticket", "ok"),
            ("close_ticket", "ok"),
            ("close_ticket", "ok"),
        ]

        async with gate(queue, log) as host:  # asked again after another restart: the queue's report
            reported = answer(await status(host, proposal_id))
        assert reported["state"] == "executed" and reported["ended"] == "completed"
        assert [call["status"] for call in reported["calls"]] == ["ok", "ok", "ok"]
        assert reported["calls"][0]["result"] == {"id": "tk-3", "status": "open"}
        assert "sent 3 of 3 calls" in reported["summary"]

    asyncio.run(scenario())
    assert upstream_writes(log) == [
        {"tool": "open_ticket", "title": "Printer on fire", "id": "tk-3"},
        {"tool": "close_ticket", "id": "t1", "merged_into": "tk-3"},
        {"tool": "close_ticket", "id": "t2", "merged_into": "tk-3"},
    ]


@pytest.mark.parametrize("mode", ["dies", "stalls"])
def test_a_call_the_upstream_never_answers_ends_the_run_and_is_never_sent_again(
    queue: Queue, tmp_path: Path, mode: str
) -> None:
    """The upstream performs the first close and never answers it (it exits, or it hangs past the
    gate's timeout): an MCP error naming the upstream, the run reported as stopped there, the call's
    outcome unknown, and nothing after it, or again, is sent."""
    log = tmp_path / "upstream.log"

    async def scenario() -> tuple[dict[str, Any], dict[str, Any]]:
        timeout = BOUND if mode == "dies" else HANG_TIMEOUT  # a call's, with BOUND to start in
        async with gate(queue, log, mode, upstream_timeout=timeout, start_timeout=BOUND) as host:
            proposal_id = await record_and_submit(host)
            await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")
            during = failed_run(await status(host, proposal_id), "mcp:tickets: the upstream server")
            assert during["state"] == "executed" and during["ended"] == "stopped"
            first = failed_run(await status(host, proposal_id), "{")
        async with gate(queue, log) as host:
            after_restart = failed_run(await status(host, proposal_id), "{")
        return first, after_restart

    first, after_restart = asyncio.run(scenario())
    for seen in (first, after_restart):
        assert seen["state"] == "executed" and seen["ended"] == "stopped"
        assert [call["tool"] for call in seen["calls"]] == ["open_ticket", "close_ticket"]
        assert seen["calls"][0]["status"] == "ok"
        assert seen["calls"][1]["status"] == ("unknown" if UNKNOWN_OUTCOMES else "error")
    assert [entry["tool"] for entry in upstream_writes(log)] == ["open_ticket", "close_ticket"]


UNKNOWN_OUTCOMES = "unknown" in get_args(OutcomeStatus)
"""Whether this executor reports a call sent and never answered as `unknown` (else as `error`)."""


def test_an_answer_that_breaks_the_tools_own_schema_stops_the_run_there(queue: Queue, tmp_path: Path) -> None:
    """The upstream performs open_ticket and answers outside the output schema it published: an MCP
    error naming the upstream, the run reported as stopped at that call, the close never sent."""
    log = tmp_path / "upstream.log"

    async def scenario() -> dict[str, Any]:
        async with gate(queue, log, "breaks") as host:
            opened = await host.call_tool("open_ticket", {"title": "Printer on fire"})
            assert opened.structured_content == {"id": 0, "status": "<status from call 1>"}  # fits the schema
            await host.call_tool("close_ticket", {"id": "t1", "merged_into": "<status from call 1>"})
            proposal_id = answer(await host.call_tool("reviewer_submit_plan", {}))["proposal_id"]
            await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")
            failed_run(
                await status(host, proposal_id),
                "mcp:tickets: the upstream server answered open_ticket outside",
            )
            return failed_run(await status(host, proposal_id), "{")

    seen = asyncio.run(scenario())
    assert seen["ended"] == "stopped"
    assert [(call["tool"], call["status"]) for call in seen["calls"]] == [("open_ticket", "error")]
    assert [entry["tool"] for entry in upstream_writes(log)] == ["open_ticket"]


def test_a_recorded_answer_satisfies_an_output_schema_of_objects_in_an_array(
    queue: Queue, tmp_path: Path
) -> None:
    """The official client validates structured content against the tool's output schema: the
    recorded answer holds an object (of placeholders) where the schema's array holds objects, no
    value nobody sent (an item's optional size is left out), and nothing the request carried echoed
    as a result: the required count is the schema's empty value, and the answer says it is a
    stand-in, not a result."""
    log = tmp_path / "upstream.log"

    async def scenario() -> tuple[Any, Any]:
        async with gate(queue, log, "items") as host:
            await host.list_tools()  # the client validates only against tools it has listed
            made = await host.call_tool("make_items", {"names": ["bolt"], "count": 2})
            assert not made.is_error, made.content
            return made.structured_content, json.loads(made.content[0].text)

    structured, said = asyncio.run(scenario())
    assert structured == {
        "items": [{"id": "<items.0.id from call 1>", "name": "<items.0.name from call 1>"}],
        "count": 0,
    }
    assert said["recorded"] is True and said["ran"] is False and "Recorded, not run" in said["note"]
    assert said["stand_ins"].startswith(
        "count: the empty value the tool's output schema requires, not a result"
    )
    assert upstream_writes(log) == []


def around_the_gate(audit_log: Path, uri: str, seconds_ago: float = 0) -> None:
    """A write another client made, as the API's access log shows it."""
    time = (datetime.now(UTC) - timedelta(seconds=seconds_ago)).isoformat()
    line = {"time": time, "method": "DELETE", "uri": uri, "status": 204, "request_id": ""}
    with audit_log.open("a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")


def test_an_audit_source_raises_the_alarm_on_the_plan_and_verifies_the_run(
    queue: Queue, tmp_path: Path
) -> None:
    """`mcp-gate --audit access-log:FILE`: a write in the API's log while the plan was being recorded
    (the gate sends nothing then) is on the plan as `writes_around`; after the real run, the report
    the queue stores names the source, finds each upstream write in the log by the time its tool call
    ran, and lists a write nobody approved."""
    log, audit_log = tmp_path / "upstream.log", tmp_path / "access.log"
    audit_log.write_text("")

    async def scenario() -> str:
        async with gate(queue, log, audit_log=audit_log) as host:
            await host.call_tool("open_ticket", {"title": "Printer on fire"})
            around_the_gate(audit_log, "/tickets/t9")  # while the plan is recorded
            await host.call_tool("close_ticket", {"id": "t1"})
            proposal_id: str = answer(await host.call_tool("reviewer_submit_plan", {}))["proposal_id"]
            seen = await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")
            assert seen.dry_run.writes_around == 1
            # Logged in the run's window, seconds from any call the run made.
            around_the_gate(audit_log, "/tickets/t8", seconds_ago=3)
            executed = answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))
            assert executed["ended"] == "completed"
            return proposal_id

    proposal_id = asyncio.run(scenario())

    async def stored() -> Any:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            return (await reviewer.get_executions(proposal_id))[-1]

    report = asyncio.run(stored())
    assert report.audit is not None and report.audit["source"] == f"access-log:{audit_log}"
    assert [(call["seq"], call["verdict"], call.get("matched_by")) for call in report.audit["calls"]] == [
        (1, "matched", "time of the tool call"),
        (2, "matched", "time of the tool call"),
    ]
    unplanned = [(write["method"], write["path"]) for write in report.audit["unplanned"]]
    assert ("DELETE", "/tickets/t8") in unplanned
    assert not any(path.startswith(("/open_ticket", "/close_ticket")) for _, path in unplanned)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--audit", "access-log:/nonexistent/access.log"), "/nonexistent/access.log: No such file"),
        (("--audit-field", "time=ts"), "--audit-field and --audit-header read an --audit KIND:LOCATION"),
        (("--audit", "nginx:/var/log/x"), "no such kind"),
        (("--audit", "access-log:-"), "--audit access-log:-: standard input is the MCP protocol's"),
    ],
)
def test_an_audit_source_that_cannot_be_read_is_refused_before_the_upstream_starts(
    options: tuple[str, ...], said: str, tmp_path: Path
) -> None:
    started = tmp_path / "started"
    upstream = [sys.executable, "-c", f"open({str(started)!r}, 'w')"]
    ended = run_reviewer(
        [sys.executable, "-m", "reviewer", "mcp-gate", *options, "--", *upstream],
        env={**os.environ, "REVIEWER_AGENT_TOKEN": "agent-token"},
        capture_output=True,
        text=True,
        timeout=BOUND,
    )
    assert ended.returncode == 2 and said in ended.stderr, ended.stderr
    assert not started.exists()


def test_an_unsigned_approval_is_answered_not_run_when_the_gate_requires_signatures(
    queue: Queue, tmp_path: Path
) -> None:
    """`--allowed-signers FILE`: the queue's word "approved" (a reviewer approved without signing)
    is not enough; the status answers `not run` with the refusal, marked isError, the upstream gets
    nothing, and the queue is told. A `--signatures` of 0 is one line at the start."""
    from tests.signing.ssh import make_key

    key = make_key(tmp_path, "alice")
    allowed = tmp_path / "allowed_signers"
    allowed.write_text(f"alice {key.public_file.read_text()}")
    log = tmp_path / "upstream.log"
    signers = ("--allowed-signers", str(allowed))

    async def scenario() -> Any:
        async with gate(queue, log, trust=(*TICKET_TRUST, *signers)) as host:
            await host.call_tool("close_ticket", {"id": "t1"})
            submitted = answer(await host.call_tool("reviewer_submit_plan", {}))
            await reviewer_decides(queue.url, queue.reviewer_token, submitted["proposal_id"], "approve")
            status = await host.call_tool("reviewer_plan_status", {"proposal_id": submitted["proposal_id"]})
        async with QueueClient(queue.url, queue.agent_token) as client:
            state = await client.decision_state(submitted["proposal_id"])
        assert state.state == "approved" and [refusal.kind for refusal in state.refusals] == ["signatures"]
        return status

    status = asyncio.run(scenario())
    assert status.is_error, status.content
    said = status.structured_content
    assert said["state"] == "not run", said
    assert "requires signed approvals: 0 of 1 signed approvals" in said["reason"], said
    assert upstream_writes(log) == []

    started = subprocess.run(
        [
            sys.executable,
            "-m",
            "reviewer",
            "mcp-gate",
            "--queue",
            queue.url,
            *signers,
            "--signatures",
            "0",
            "--",
            sys.executable,
            str(UPSTREAM),
        ],
        capture_output=True,
        text=True,
        timeout=BOUND,
        env={**os.environ, "REVIEWER_AGENT_TOKEN": queue.agent_token, "XDG_STATE_HOME": str(tmp_path / "s")},
        check=False,
    )
    assert started.returncode == 2 and started.stderr == (
        "reviewer mcp-gate: --signatures must be 1 or more, not 0\n"
    ), started.stderr
