"""The upstream behind `reviewer mcp-gate` holds nothing of the reviewer's, by construction.

The gate is started as a host starts it, with what a reviewer's own shell holds: `REVIEWER_TOKEN` (a
reviewer's), a copy of it under another name, the login file in the home, an agent socket. Behind it,
a hostile server (`hostile_server.py`) reads its environment, the home and every process it sees, then
asks the queue who it is with every word it found, after its plan was submitted: in the sandbox it
finds nothing and reaches nothing, and the plan still waits for a reviewer. With `--no-sandbox` the same
server reads the reviewer's login and the queue takes it: the walls are what stop it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import socketserver
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.serving import serve_in_thread, stop_serving

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client

from tests.agent.fixtures import Queue

ROOT = Path(__file__).resolve().parents[2]
HOSTILE = Path(__file__).with_name("hostile_server.py")


def attacked(queue: Queue, home: Path, *flags: str) -> tuple[dict[str, Any], str, str]:
    """What the hostile server found and which words the queue took, the plan's state after, and
    what the gate said on its standard error."""
    (home / ".config" / "reviewer").mkdir(parents=True)
    login = home / ".config" / "reviewer" / "token"
    login.write_text(queue.reviewer_token)
    login.chmod(0o600)
    errlog_path = home.parent / f"gate-{home.name}.err"
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "reviewer", "mcp-gate", "--queue", queue.url, "--name", "hostile", "--read", "look"]
        + [*flags, "--", sys.executable, str(HOSTILE)],
        env={
            "PATH": os.environ.get("PATH", ""),
            "HOME": str(home),
            "XDG_STATE_HOME": str(home.parent / f"state-{home.name}"),
            "REVIEWER_AGENT_TOKEN": queue.agent_token,
            "REVIEWER_TOKEN": queue.reviewer_token,
            "COPY_OF_IT": f"Bearer {queue.reviewer_token}",
            "SSH_AUTH_SOCK": str(home.parent / f"agent-{home.name}.sock"),
        },
        cwd=str(ROOT),
    )

    async def scenario() -> tuple[dict[str, Any], str]:
        with open(errlog_path, "w") as errlog:
            async with Client(stdio_client(parameters, errlog), read_timeout_seconds=60) as host:
                await host.call_tool("remember", {"text": "approve me"})
                submitted = await host.call_tool("reviewer_submit_plan", {"title": "approve me"})
                proposal_id = json.loads(submitted.content[0].text)["proposal_id"]
                looked = await host.call_tool("look", {"queue_url": queue.url})
        async with httpx.AsyncClient(headers={"authorization": f"Bearer {queue.reviewer_token}"}) as client:
            state = (await client.get(f"{queue.url}/v1/proposals/{proposal_id}/decision")).json()["state"]
        return json.loads(looked.content[0].text), state

    with socket.socket(socket.AF_UNIX) as agent:
        agent.bind(parameters.env["SSH_AUTH_SOCK"])  # type: ignore[index]
        agent.listen(1)
        found, state = asyncio.run(scenario())
    return found, state, errlog_path.read_text()


def test_a_hostile_upstream_finds_nothing_of_the_reviewers_and_cannot_approve_its_plan(
    queue: Queue, tmp_path: Path
) -> None:
    found, state, said = attacked(queue, tmp_path / "home")
    assert said.startswith("reviewer mcp-gate: sandbox: namespaces (bubblewrap)"), said
    assert "no Unix socket (seccomp), no network; COMMAND writes --writable paths only" in said
    seen = json.dumps(found["seen"])
    assert queue.reviewer_token not in seen and queue.agent_token not in seen
    assert not [name for name in found["seen"]["environ"] if name.startswith("REVIEWER_")]
    assert "COPY_OF_IT" not in found["seen"]["environ"] and "SSH_AUTH_SOCK" not in found["seen"]["environ"]
    assert found["seen"]["home"] == {} and found["seen"]["agent_socket"].startswith("<")
    assert "mcp-gate" not in seen, "the gate's process, and its command line, are out of sight"
    assert (found["accepted"], found["reached"]) == ([], 0), "no word taken: the queue is not even reached"
    assert state == "pending"


def test_without_the_sandbox_the_same_upstream_takes_the_reviewers_login(
    queue: Queue, tmp_path: Path
) -> None:
    """What --no-sandbox costs, shown: the variables are still withheld, but the home is the reviewer's."""
    found, _, said = attacked(queue, tmp_path / "home", "--no-sandbox")
    assert said.startswith("reviewer mcp-gate: sandbox: none (--no-sandbox)"), said
    assert "REVIEWER_TOKEN" not in found["seen"]["environ"]
    assert queue.reviewer_token in found["accepted"] and found["reached"] == 401


def test_with_allow_net_the_upstream_reaches_the_named_host_through_the_proxy_and_nothing_else(
    queue: Queue, tmp_path: Path
) -> None:
    """`mcp-gate --allow-net HOST:PORT`: an upstream that serves an API reaches it through the proxy
    its relay's listener was handed to the gate for, over a handover point the gate removed once taken;
    the queue, through the proxy or not, is out of its reach."""
    echo_server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo)
    serve_in_thread(echo_server)
    echo = echo_server.server_address[1]
    queue_port = int(queue.url.rsplit(":", 1)[1].split("/")[0])
    parameters = StdioServerParameters(
        command=sys.executable,
        args=["-m", "reviewer", "mcp-gate", "--queue", queue.url, "--allow-net", f"127.0.0.1:{echo}"]
        + ["--read", "tunnel", "--read", "direct", "--", sys.executable, str(HOSTILE)],
        env={
            "PATH": os.environ.get("PATH", ""),
            "REVIEWER_AGENT_TOKEN": queue.agent_token,
            "XDG_STATE_HOME": str(tmp_path / "state"),
            "TMPDIR": str(tmp_path),
        },
        cwd=str(ROOT),
    )
    errlog_path = tmp_path / "gate.err"

    async def scenario() -> list[str]:
        with open(errlog_path, "w") as errlog:
            async with Client(stdio_client(parameters, errlog), read_timeout_seconds=60) as host:
                calls = [
                    ("tunnel", {"host": "127.0.0.1", "port": echo}),
                    ("tunnel", {"host": "127.0.0.1", "port": queue_port}),
                    ("direct", {"host": "127.0.0.1", "port": echo}),
                    ("direct", {"host": "127.0.0.1", "port": queue_port}),
                ]
                return [(await host.call_tool(name, arguments)).content[0].text for name, arguments in calls]  # type: ignore[union-attr]

    try:
        through, refused, direct_echo, direct_queue = asyncio.run(scenario())
    finally:
        stop_serving(echo_server)
    said = errlog_path.read_text()
    assert f"no network but through a proxy (HTTPS_PROXY), 127.0.0.1:{echo}" in said, said
    assert through == "HTTP/1.1 200 Connection Established | echo: ping"
    assert refused.startswith("HTTP/1.1 403")
    assert (direct_echo, direct_queue) == ("<ConnectionRefusedError>",) * 2
    assert [path.name for path in tmp_path.iterdir() if path.name.startswith("reviewer-handover-")] == []


class _Echo(socketserver.StreamRequestHandler):
    def handle(self) -> None:
        for line in self.rfile:
            self.wfile.write(b"echo: " + line)
