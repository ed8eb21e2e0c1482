"""`reviewer mcp-gate` in front of the official MCP filesystem and memory servers (npm packages that
`.ci/run` installs into `.mcp-servers/`), driven by the official MCP client, with the real queue.

The gate restarts between the submission and the approval in each test, as desktop hosts restart
their servers on every reload: the approved plan runs from the queue's copy, once.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp")

from mcp import Client, StdioServerParameters

from tests.agent.fixtures import Queue
from tests.agent.helpers import reviewer_decides

ROOT = Path(__file__).resolve().parents[2]
SERVERS = Path(os.environ.get("REVIEWER_MCP_SERVERS", ROOT / ".mcp-servers")) / "node_modules" / ".bin"
INSTALL = (
    "npm install --prefix .mcp-servers @modelcontextprotocol/server-filesystem@2026.8.31 "
    "@modelcontextprotocol/server-memory@2026.8.31 @modelcontextprotocol/server-everything@2026.8.31 "
    "(as .ci/run does)"
)


def server(name: str) -> str:
    path = SERVERS / name
    if not path.exists():
        pytest.skip(f"the official MCP server {name} is not installed: {INSTALL}")
    return str(path)


def gate(
    queue: Queue, upstream: list[str], *flags: str, writable: Path, env: dict[str, str] | None = None
) -> Client:
    """The gate a host starts, the upstream in its sandbox writing `writable` alone."""
    return Client(
        gate_parameters(queue, upstream, *flags, writable=writable, env=env), read_timeout_seconds=60
    )


def gate_parameters(
    queue: Queue, upstream: list[str], *flags: str, writable: Path, env: dict[str, str] | None = None
) -> StdioServerParameters:
    return StdioServerParameters(
        command=sys.executable,
        args=[
            "-m",
            "reviewer",
            "mcp-gate",
            "--queue",
            queue.url,
            "--upstream-timeout",
            "30",
            *flags,
            "--writable",
            str(writable),
            "--",
            *upstream,
        ],
        env={
            "REVIEWER_AGENT_TOKEN": queue.agent_token,
            "PATH": os.environ.get("PATH", ""),
            "XDG_STATE_HOME": str(queue.db.parent / "mcp-gate-state"),
            **(env or {}),
        },
        cwd=str(ROOT),
    )


def answer(result: Any) -> Any:
    assert not result.is_error, result.content
    return json.loads(result.content[0].text)


def test_filesystem_writes_nothing_before_approval_and_each_write_once_after_a_restart(
    queue: Queue, tmp_path: Path
) -> None:
    root = tmp_path / "files"
    root.mkdir()
    (root / "notes.txt").write_text("old notes\n")
    upstream = [server("mcp-server-filesystem"), str(root)]
    flags = ("--name", "files", "--environment", "staging", "--read", "read_text_file")

    async def scenario() -> tuple[str, dict[str, Any]]:
        async with gate(queue, upstream, *flags, writable=root) as host:
            read = await host.call_tool("read_text_file", {"path": str(root / "notes.txt")})
            assert read.structured_content == {"content": "old notes\n"}  # an operator-named read passes
            listing = await host.call_tool("list_directory", {"path": str(root)})  # hinted only: gated
            assert json.loads(listing.content[0].text)["recorded"] is True
            await host.call_tool("create_directory", {"path": str(root / "sub")})
            await host.call_tool("write_file", {"path": str(root / "sub" / "new.txt"), "content": "new\n"})
            await host.call_tool("write_file", {"path": str(root / "notes.txt"), "content": "new notes\n"})
            proposal_id = answer(await host.call_tool("reviewer_submit_plan", {"title": "files"}))[
                "proposal_id"
            ]
        assert sorted(path.name for path in root.rglob("*")) == ["notes.txt"]
        assert (root / "notes.txt").read_text() == "old notes\n"
        seen = await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")
        assert [(call.tool, call.effect) for call in seen.calls] == [
            ("list_directory", "other"),  # hinted read-only, not named a read: gated, effect unknown
            ("create_directory", "create"),
            ("write_file", "update"),  # destructiveHint: may overwrite, not a delete
            ("write_file", "update"),
        ]
        assert seen.target.api == "mcp:files" and seen.target.environment == "staging"
        assert root.joinpath("sub").exists() is False
        async with gate(queue, upstream, *flags, writable=root) as host:  # the host reloaded its servers
            executed = answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))
            again = answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))
            assert again == executed
        return proposal_id, executed

    _, executed = asyncio.run(scenario())
    assert executed["ended"] == "completed", executed
    assert [call["status"] for call in executed["calls"]] == ["ok"] * 4
    assert (root / "sub" / "new.txt").read_text() == "new\n"
    assert (root / "notes.txt").read_text() == "new notes\n"


def test_memory_chains_into_an_array_result_after_a_restart_and_serves_its_resources(
    queue: Queue, tmp_path: Path
) -> None:
    """create_entities answers `{"entities": [...]}`: the dry answer offers `<entities.0.name from call
    1>`, and the real run sends the first created entity's name to add_observations."""
    memory = tmp_path / "memory.jsonl"
    upstream = [server("mcp-server-memory")]
    env = {"MEMORY_FILE_PATH": str(memory)}
    flags = ("--name", "memory", "--trust-read-only-hints")

    async def scenario() -> dict[str, Any]:
        async with gate(queue, upstream, *flags, writable=tmp_path, env=env) as host:
            resources = await host.list_resources()
            assert [resource.uri for resource in resources.resources] == ["memory://knowledge-graph"]
            created = await host.call_tool(
                "create_entities", {"entities": [{"name": "Ada", "entityType": "person", "observations": []}]}
            )
            first = created.structured_content["entities"][0]["name"]
            assert first == "<entities.0.name from call 1>"
            await host.call_tool(
                "add_observations",
                {"observations": [{"entityName": first, "contents": ["wrote the first program"]}]},
            )
            graph = await host.call_tool("read_graph", {})  # hinted read-only and not destructive
            assert graph.structured_content["entities"] == []
            proposal_id = answer(await host.call_tool("reviewer_submit_plan", {"title": "remember Ada"}))[
                "proposal_id"
            ]
        assert not memory.exists() or "Ada" not in memory.read_text()
        await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")
        async with gate(queue, upstream, *flags, writable=tmp_path, env=env) as host:
            executed = answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))
            read = await host.read_resource("memory://knowledge-graph")
            assert "wrote the first program" in read.contents[0].text
        return executed

    executed = asyncio.run(scenario())
    assert executed["ended"] == "completed", executed
    assert executed["calls"][1]["result"]["results"][0]["entityName"] == "Ada"
    lines = [json.loads(line) for line in memory.read_text().splitlines()]
    assert [line["name"] for line in lines if line.get("type") == "entity"] == ["Ada"]
    assert [line["observations"] for line in lines if line.get("type") == "entity"] == [
        ["wrote the first program"]
    ]


def test_everything_through_the_gate_holds_nothing_of_the_reviewers_and_reaches_the_hosts_model(
    queue: Queue, tmp_path: Path
) -> None:
    """The reference server's `get-env` shows the upstream's environment to the model: through the
    gate it holds no token of the reviewer's, though the gate's own held two. A host with sampling,
    elicitation and roots is offered the tools that need them (as it is offered them bare), and the
    server's sampling request reaches the host's model; a long operation's progress reaches the host."""
    import mcp_types as types

    async def sampling(context: Any, params: types.CreateMessageRequestParams) -> types.CreateMessageResult:
        return types.CreateMessageResult(
            role="assistant", content=types.TextContent(type="text", text="the host's model"), model="host"
        )

    async def elicitation(context: Any, params: types.ElicitRequestParams) -> types.ElicitResult:
        return types.ElicitResult(action="decline")

    async def roots(context: Any) -> types.ListRootsResult:
        return types.ListRootsResult(roots=[])

    callbacks = {
        "sampling_callback": sampling,
        "elicitation_callback": elicitation,
        "list_roots_callback": roots,
    }
    everything = [server("mcp-server-everything"), "stdio"]
    flags = ("--name", "everything", "--trust-read-only-hints", "--read", "trigger-sampling-request")
    (tmp_path / "home").mkdir()
    (tmp_path / "work").mkdir()
    env = {"REVIEWER_TOKEN": queue.reviewer_token, "HOME": str(tmp_path / "home")}
    progress: list[float] = []

    async def on_progress(done: float, total: float | None, message: str | None) -> None:
        progress.append(done)

    async def scenario() -> tuple[set[str], set[str], Any, Any]:
        bare = Client(StdioServerParameters(command=everything[0], args=everything[1:]), **callbacks)
        async with bare:
            offered_bare = {tool.name for tool in (await bare.list_tools()).tools}
        parameters = gate_parameters(queue, everything, *flags, writable=tmp_path / "work", env=env)
        async with Client(parameters, read_timeout_seconds=60, mode="legacy", **callbacks) as host:
            offered = {tool.name for tool in (await host.list_tools()).tools}
            shown = await host.call_tool("get-env", {})
            sampled = await host.call_tool("trigger-sampling-request", {"prompt": "hello", "maxTokens": 5})
            await host.call_tool(
                "trigger-long-running-operation", {"duration": 0.2, "steps": 2}, progress_callback=on_progress
            )
        return offered_bare, offered, shown, sampled

    offered_bare, offered, shown, sampled = asyncio.run(scenario())
    assert offered == offered_bare | {"reviewer_submit_plan", "reviewer_plan_status"}
    assert {"trigger-sampling-request", "trigger-elicitation-request", "get-roots-list"} <= offered
    environment = shown.content[0].text
    assert queue.reviewer_token not in environment and queue.agent_token not in environment
    assert "REVIEWER_" not in environment and "PATH" in environment
    assert "the host's model" in sampled.content[0].text
    assert progress == [1.0, 2.0]


def git_server() -> str:
    """The official git server (Python, from PyPI), in a virtual environment of its own (.ci/run makes
    it): its MCP SDK is not the gate's."""
    path = SERVERS.parents[1] / "git-venv" / "bin" / "mcp-server-git"
    if not path.exists():
        pytest.skip(
            "the official MCP server mcp-server-git is not installed: python3 -m venv .mcp-servers/git-venv "
            "&& .mcp-servers/git-venv/bin/pip install mcp-server-git==2026.10.19 (as .ci/run does)"
        )
    return str(path)


def test_git_branches_nothing_before_approval_then_creates_and_checks_out_once(
    queue: Queue, tmp_path: Path
) -> None:
    """mcp-server-git in its sandbox, writing the repository alone: the branch and the checkout are
    recorded, not made; once approved (the gate restarted between) they run once, in order."""
    import subprocess

    repo = tmp_path / "repo"
    repo.mkdir()
    for command in (["init", "-q", "-b", "main"], ["commit", "-q", "--allow-empty", "-m", "first"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@example.invalid", *command], cwd=repo, check=True
        )
    upstream = [git_server()]
    flags = ("--name", "git", "--trust-read-only-hints")

    def head() -> str:
        return subprocess.run(
            ["git", "branch", "--show-current"], cwd=repo, capture_output=True, text=True
        ).stdout

    async def scenario() -> tuple[str, dict[str, Any]]:
        async with gate(queue, upstream, *flags, writable=repo) as host:
            status = await host.call_tool("git_status", {"repo_path": str(repo)})  # hinted read-only
            assert "On branch main" in status.content[0].text, status.content
            branch = {"repo_path": str(repo), "branch_name": "feature", "base_branch": "main"}
            await host.call_tool("git_create_branch", branch)
            await host.call_tool("git_checkout", {"repo_path": str(repo), "branch_name": "feature"})
            proposal_id = answer(await host.call_tool("reviewer_submit_plan", {"title": "branch"}))[
                "proposal_id"
            ]
        assert head().strip() == "main", "nothing ran before approval"
        await reviewer_decides(queue.url, queue.reviewer_token, proposal_id, "approve")
        async with gate(queue, upstream, *flags, writable=repo) as host:
            executed = answer(await host.call_tool("reviewer_plan_status", {"proposal_id": proposal_id}))
        return proposal_id, executed

    _, executed = asyncio.run(scenario())
    assert executed["ended"] == "completed", executed
    assert head().strip() == "feature"
