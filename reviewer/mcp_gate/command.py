"""The `reviewer mcp-gate` command line; the MCP SDK and the agent library are imported only when the
command runs, so every other `reviewer` command starts as fast as before."""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

from reviewer import collection_held
from reviewer.audit.options import add_source_options
from reviewer.sandbox.options import add_sandbox_options
from reviewer.signing.options import add_signer_options


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `mcp-gate [--queue URL] [--title TEXT] -- COMMAND ARGS...` to the `reviewer` command line."""
    gate = subparsers.add_parser(
        "mcp-gate",
        help="gate an MCP server's write tools behind the review queue (needs reviewer-gate[mcp])",
        description=(
            "A stdio MCP server in front of an unmodified upstream MCP server started from COMMAND. "
            "Only tools the operator names with --read (or, with --trust-read-only-hints, tools the "
            "upstream hints read-only and not destructive) pass through; every other call is recorded "
            "and runs on the upstream only after a reviewer approves the plan, once, in order. The "
            "agent token comes from REVIEWER_AGENT_TOKEN."
        ),
    )
    gate.add_argument("--queue", default=None, help="the queue's URL (default http://127.0.0.1:8470)")
    gate.add_argument(
        "--name", default=None, help="the upstream's name in proposals (default: its command line)"
    )
    gate.add_argument("--environment", default=None, help="the target environment, for the queue's policies")
    gate.add_argument("--base-url", default=None, help="the URL of what the upstream acts on, for policies")
    gate.add_argument("--title", default=None, help="the plan's title when reviewer_submit_plan gives none")
    gate.add_argument(
        "--read",
        action="append",
        metavar="TOOL",
        help="a tool that only reads: its calls pass to the upstream un-gated; repeatable",
    )
    gate.add_argument(
        "--effect",
        action="append",
        metavar="TOOL=EFFECT",
        help="what a tool's calls do (create, update, delete, other), gated, overriding its annotations; "
        "repeatable",
    )
    gate.add_argument(
        "--tools",
        type=Path,
        default=None,
        metavar="FILE",
        help="a TOML file of read = [...] and [effects]; --read and --effect win over it",
    )
    gate.add_argument(
        "--trust-read-only-hints",
        action="store_true",
        help="let tools the upstream hints readOnlyHint (and not destructiveHint) pass un-gated",
    )
    add_source_options(
        gate,
        "The log of the API the upstream writes to: writes in it while the plan was recorded are an "
        "alarm on the plan, and the real run's report says which writes it shows and which no approved "
        "call made",
    )
    gate.add_argument(
        "--upstream-timeout",
        type=float,
        default=30.0,
        metavar="SECONDS",
        help="how long the upstream may take to answer one tool call (default 30)",
    )
    gate.add_argument(
        "--upstream-start-timeout",
        type=float,
        metavar="SECONDS",
        help="how long the upstream may take to start and list its tools, and to answer any request "
        "but a tool call (default: --upstream-timeout)",
    )
    gate.add_argument(
        "--decision-timeout",
        type=float,
        default=60.0,
        metavar="SECONDS",
        help="how long a call waits for a queue that is away (restarting, upgrading) before it answers "
        "that it is (default 60; the host asks again later)",
    )
    add_signer_options(gate)
    add_sandbox_options(gate, role="upstream")
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
    if options.upstream_start_timeout is None:
        options.upstream_start_timeout = options.upstream_timeout
    for flag, seconds in (
        ("--upstream-timeout", options.upstream_timeout),
        ("--upstream-start-timeout", options.upstream_start_timeout),
        ("--decision-timeout", options.decision_timeout),
    ):
        if not 0 < seconds < math.inf:
            print(
                f"reviewer mcp-gate: {flag} must be a finite number of seconds above 0, not {seconds:g}",
                file=sys.stderr,
            )
            return 2
    try:
        with collection_held():
            from reviewer.agent.gate import DEFAULT_QUEUE_URL
            from reviewer.mcp_gate.server import run
    except ModuleNotFoundError as missing:
        print(
            f"reviewer mcp-gate needs the MCP SDK ({missing.name}): pip install 'reviewer-gate[mcp]'",
            file=sys.stderr,
        )
        return 2
    options.queue = options.queue or DEFAULT_QUEUE_URL
    return run(options)
