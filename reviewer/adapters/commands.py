"""The `reviewer mcp-gate` command line; the MCP SDK and the agent library are imported only when the
command runs, so every other `reviewer` command starts as fast as before."""

from __future__ import annotations

import argparse
import sys


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mcp-gate [--queue URL] [--title TEXT] -- COMMAND ARGS...` to the `reviewer` command line."""
    gate = subparsers.add_parser(
        "mcp-gate",
        help="gate an MCP server's write tools behind the review queue (needs reviewer[mcp])",
        description=(
            "A stdio MCP server in front of an unmodified upstream MCP server started from COMMAND. "
            "Read-only tools pass through; every other call is recorded and runs on the upstream only "
            "after a reviewer approves the plan, once, in order. The agent token comes from "
            "REVIEWER_AGENT_TOKEN."
        ),
    )
    gate.add_argument("--queue", default=None, help="the queue's URL (default http://127.0.0.1:8470)")
    gate.add_argument("--title", default=None, help="the plan's title when reviewer_submit_plan gives none")
    gate.add_argument(
        "--effect",
        action="append",
        metavar="TOOL=EFFECT",
        help="what a tool's calls do (create, update, delete, other), overriding its annotations; repeatable",
    )
    gate.add_argument(
        "--upstream-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long the upstream may take to start and to answer one call (default 30)",
    )
    gate.add_argument("command", nargs=argparse.REMAINDER, metavar="-- COMMAND ARGS...")
    gate.set_defaults(func=_run)


def _run(options: argparse.Namespace) -> int:
    command = list(options.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        print("reviewer mcp-gate: name the upstream server's command after --", file=sys.stderr)
        return 2
    options.command = command
    try:
        from reviewer.adapters.mcp_gate import run
        from reviewer.agent.gate import DEFAULT_QUEUE_URL
    except ModuleNotFoundError as missing:
        print(
            f"reviewer mcp-gate needs the MCP SDK ({missing.name}): pip install 'reviewer[mcp]'",
            file=sys.stderr,
        )
        return 2
    options.queue = options.queue or DEFAULT_QUEUE_URL
    return run(options)
