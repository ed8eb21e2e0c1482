"""A plan recorded and not yet submitted survives the gate: `mcp-gate` keeps it in a 0600 file under
the user's state directory, a gate killed with SIGKILL loses nothing, and a new gate for the same
upstream and queue picks the calls up, says so, and submits them, through the official MCP client."""

from __future__ import annotations

import asyncio
import contextlib
import io
import json
import os
import shutil
import signal
import stat
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("mcp")

from reviewer.mcp_gate.recordings import RecordedCall, RecordingFile, RecordingUnreadable
from reviewer.queue.client import QueueClient
from tests.agent.fixtures import Queue
from tests.mcp_gate.test_server import ROOT, TICKET_TRUST, UPSTREAM, answer, gate, upstream_writes


def gate_processes(state: Path) -> list[int]:
    """The pids of the `mcp-gate` processes this test started (their XDG_STATE_HOME is its own)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            command = (entry / "cmdline").read_bytes().split(b"\0")
            environment = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"mcp-gate" in command and f"XDG_STATE_HOME={state}".encode() in environment:
            found.append(int(entry.name))
    return found


def test_a_gate_killed_after_recording_two_writes_leaves_them_to_the_next_which_submits_them(
    queue: Queue, tmp_path: Path
) -> None:
    log = tmp_path / "upstream.log"
    state = tmp_path / "state"
    said = io.StringIO()

    async def record_then_die() -> None:
        with contextlib.suppress(BaseException):  # the host sees its server vanish: that is the point
            async with gate(queue, log) as host:
                await host.call_tool("open_ticket", {"title": "Printer on fire"})
                await host.call_tool("close_ticket", {"id": "t1", "merged_into": "<id from call 1>"})
                (pid,) = gate_processes(state)
                os.kill(pid, signal.SIGKILL)
                await host.call_tool("list_tickets", {})

    asyncio.run(record_then_die())
    (kept,) = (state / "reviewer" / "mcp-gate").glob("*.json")
    assert stat.S_IMODE(kept.stat().st_mode) == 0o600
    assert stat.S_IMODE(kept.parent.stat().st_mode) == 0o700

    async def submit_in_a_new_gate() -> dict[str, object]:
        with (tmp_path / "gate.err").open("w+") as errlog:
            async with gate(queue, log, errlog=errlog) as host:
                submitted = answer(await host.call_tool("reviewer_submit_plan", {"title": "merge"}))
            errlog.seek(0)
            said.write(errlog.read())
        return submitted

    submitted = asyncio.run(submit_in_a_new_gate())
    assert "picked up 2 recorded call(s) of a plan not yet submitted" in said.getvalue()
    assert not kept.exists(), "a submitted plan is no longer kept"
    assert list(kept.parent.iterdir()) == [], "no lock or marker is left behind"
    # The model that submitted is told of the calls it did not make in this conversation.
    assert "2 call(s) recorded by an earlier session of this gate" in str(submitted["carried_over"])
    assert "(open_ticket, close_ticket)" in str(submitted["carried_over"])

    async def plan() -> list[tuple[str, dict[str, object] | None, str]]:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            proposal = await reviewer.get_revision(str(submitted["proposal_id"]), 1)
        return [(call.tool, call.args, call.outcome.message or "") for call in proposal.calls]

    planned = asyncio.run(plan())
    assert [(tool, args) for tool, args, _ in planned] == [
        ("open_ticket", {"title": "Printer on fire"}),
        ("close_ticket", {"id": "t1", "merged_into": "<id from call 1>"}),
    ]
    # ... and so is the reviewer, on each of them (the screen, `show` and the page show the outcome).
    assert all("carried over: recorded by an earlier session" in message for _, _, message in planned)
    assert upstream_writes(log) == [], "nothing was written before a reviewer approved"


def test_a_recording_file_is_refused_when_it_is_not_one(tmp_path: Path) -> None:
    recording = RecordingFile.of("http://127.0.0.1:8470/", "mcp:tickets", tmp_path)
    assert recording == RecordingFile.of("http://127.0.0.1:8470", "mcp:tickets", tmp_path)
    assert recording != RecordingFile.of("http://127.0.0.1:8470", "mcp:other", tmp_path)
    assert recording.load() == []
    recording.save([RecordedCall("open_ticket", {"title": "\x1b[2Jx"})], "mcp:tickets")
    assert recording.load() == [RecordedCall("open_ticket", {"title": "\x1b[2Jx"})]
    recording.path.write_text('{"format": "something else", "calls": []}')
    with pytest.raises(RecordingUnreadable, match="not a recording this release wrote"):
        recording.load()
    recording.path.write_text("{")
    with pytest.raises(RecordingUnreadable, match="cannot be read as a recording"):
        recording.load()
    recording.save([RecordedCall("open_ticket", {"title": "next"})], "mcp:tickets")
    assert recording.unreadable_path.read_text() == "{", "kept beside it, never overwritten"
    assert recording.load() == [RecordedCall("open_ticket", {"title": "next"})]


MCP_TOOLS = ROOT / ".mcp-tools" / "node_modules" / "@modelcontextprotocol"
INSPECTOR = MCP_TOOLS / "inspector" / "clients" / "launcher" / "build" / "index.js"
INSTALL_TOOLS = "npm install --prefix .mcp-tools @modelcontextprotocol/inspector@2.12.0 (as .ci/run does)"


def installed(path: Path) -> str:
    """The npm tool's path; a missing one skips the test here, and fails it in CI, which installs it."""
    if not path.exists() or shutil.which("node") is None:
        message = f"{path.relative_to(ROOT)} (or node) is not installed: {INSTALL_TOOLS}"
        if os.environ.get("CI"):
            pytest.fail(message)
        pytest.skip(message)
    return str(path)


def test_the_inspector_cli_records_one_call_per_process_and_the_last_submits_them(
    queue: Queue, tmp_path: Path
) -> None:
    """The Inspector's command line starts the gate for each call and stops it after: the plan is
    built across three processes, and the third submits the two writes the first two recorded."""
    inspector = installed(INSPECTOR)
    log = tmp_path / "upstream.log"
    environment = {
        **os.environ,
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "UPSTREAM_LOG": str(log),
        "XDG_STATE_HOME": str(tmp_path / "state"),
        "MCP_CATALOG_PATH": str(tmp_path / "inspector-catalog.json"),
    }
    # The Inspector starts the server with the variables it is given, not its own environment.
    server_environment = [
        f"-e{name}={environment[name]}" for name in ("REVIEWER_AGENT_TOKEN", "UPSTREAM_LOG", "XDG_STATE_HOME")
    ]
    command = [sys.executable, "-m", "reviewer", "mcp-gate", "--queue", queue.url, "--name", "tickets"]
    command += [*TICKET_TRUST, "--", sys.executable, str(UPSTREAM)]

    def call(tool: str, *arguments: str) -> dict[str, object]:
        pairs = ["--tool-arg", *arguments] if arguments else []
        finished = subprocess.run(
            # The Inspector's options, then after `--` the server's command (with its own `--`)
            [
                "node",
                inspector,
                "--cli",
                *server_environment,
                "--method",
                "tools/call",
                "--tool-name",
                tool,
                *pairs,
                "--",
                *command,
            ],
            capture_output=True,
            text=True,
            env=environment,
            cwd=ROOT,
            timeout=120,
        )
        assert finished.returncode == 0, finished.stderr
        result = json.loads(finished.stdout)
        assert not result.get("isError"), result
        return dict(json.loads(result["content"][0]["text"]))

    assert call("open_ticket", "title=Printer on fire")["recorded"] is True
    assert call("close_ticket", "id=t1", "merged_into=<id from call 1>")["recorded"] is True
    submitted = call("reviewer_submit_plan", "title=merge")

    async def plan() -> list[str]:
        async with QueueClient(queue.url, queue.reviewer_token) as reviewer:
            proposal = await reviewer.get_revision(str(submitted["proposal_id"]), 1)
        return [call.tool for call in proposal.calls]

    assert asyncio.run(plan()) == ["open_ticket", "close_ticket"]
    assert upstream_writes(log) == []


GATE_RECORDING = """
import sys
from pathlib import Path
from reviewer.mcp_gate.recordings import RecordedCall, RecordingFile

directory, name, count = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
recording = RecordingFile.of("http://127.0.0.1:8470", "mcp:tickets", directory)
calls = []
for number in range(count):
    calls.append(RecordedCall("open_ticket", {"title": f"{name} {number}"}))
    recording.save(calls, "mcp:tickets")
print("recorded", flush=True)
sys.stdin.read()  # a gate that lives until told to end
"""


def test_two_gates_for_one_upstream_keep_each_others_calls_and_a_later_gate_picks_up_the_ended_ones(
    tmp_path: Path,
) -> None:
    """Two gate processes recording at once for one upstream and queue: neither loses the other's
    calls; while both live a third gate picks none up; once they end it picks up one of their plans,
    whole and in order, and a fourth the other: two plans are never joined into one (each one's
    `<id from call 1>` names a call of its own)."""
    count = 150
    gates = [
        subprocess.Popen(
            [sys.executable, "-c", GATE_RECORDING, str(tmp_path), name, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        for name in ("first", "second")
    ]
    for process in gates:
        assert process.stdout is not None and process.stdout.readline() == "recorded\n"
    later = RecordingFile.of("http://127.0.0.1:8470", "mcp:tickets", tmp_path)
    titles = [call["arguments"]["title"] for call in json.loads(later.path.read_text())["calls"]]
    assert sorted(titles) == sorted(f"{name} {n}" for name in ("first", "second") for n in range(count))
    assert later.load() == [], "a live gate's calls stay its own"
    for process in gates:
        process.communicate("")
    picked = [call.arguments["title"] for call in later.load()]
    fourth = RecordingFile.of("http://127.0.0.1:8470", "mcp:tickets", tmp_path)
    other = [call.arguments["title"] for call in fourth.load()]
    plans = {name: [f"{name} {n}" for n in range(count)] for name in ("first", "second")}
    assert sorted([picked, other]) == sorted(plans.values())
    assert [call.arguments["title"] for call in later.load()] == picked, "nothing joined to it since"


def test_a_gate_submitting_clears_its_own_calls_only(tmp_path: Path) -> None:
    first = RecordingFile.of("http://127.0.0.1:8470", "mcp:tickets", tmp_path)
    second = RecordingFile.of("http://127.0.0.1:8470", "mcp:tickets", tmp_path)
    first.save([RecordedCall("open_ticket", {"title": "one"})], "mcp:tickets")
    second.save([RecordedCall("open_ticket", {"title": "two"})], "mcp:tickets")
    first.save(
        [RecordedCall("open_ticket", {"title": "one"}), RecordedCall("close_ticket", {"id": "1"})],
        "mcp:tickets",
    )
    # Every file the gates keep is theirs alone: the recording, its lock, each gate's live marker.
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in tmp_path.iterdir()} == dict.fromkeys(
        [
            first.path.name,
            f".{first.path.name}.lock",
            *(f".{first.path.name}.{gate.owner}.live" for gate in (first, second)),
        ],
        0o600,
    )
    first.remove()
    assert [call["arguments"] for call in json.loads(first.path.read_text())["calls"]] == [{"title": "two"}]
    assert stat.S_IMODE(first.path.stat().st_mode) == 0o600
    second.remove()
    assert not first.path.exists()
    assert list(tmp_path.iterdir()) == [], "nothing is left behind once no gate keeps a call"
