"""The command line: `reviewer demo`, `review`, `serve`, `token`, `mcp-gate`, `run`, and the rest.

Each part registers its own sub-commands, and only the part of the command being run is imported:
`reviewer demo` starts without reading the service's, the queue's or the gate's command modules, and
`reviewer --help` lists every command from the table below without importing any of them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence
from types import ModuleType

COMMANDS: tuple[tuple[str, str, str], ...] = (
    ("demo", "reviewer.tui.commands", "review sample proposals offline; decisions are not sent"),
    ("review", "reviewer.tui.commands", "review the queue's proposals live (the default command)"),
    (
        "login",
        "reviewer.tui.commands",
        "sign in to the queue: your token (asked without echo), or through the team's identity provider",
    ),
    ("serve", "reviewer.service.commands", "run the queue service"),
    ("notify", "reviewer.service.commands", "the queue's notifications"),
    ("token", "reviewer.service.commands", "mint, list, rotate and revoke the queue's tokens"),
    ("keys", "reviewer.service.commands", "register and remove reviewers' SSH signing keys"),
    ("db", "reviewer.service.commands", "upgrade, back up or restore the queue's database"),
    ("approve", "reviewer.queue.commands", "approve one revision of a proposal, by its digest"),
    ("reject", "reviewer.queue.commands", "reject one revision of a proposal, with a reason"),
    (
        "request-changes",
        "reviewer.queue.commands",
        "ask the agent to re-plan one revision of a proposal, saying what to change",
    ),
    (
        "list",
        "reviewer.queue.commands",
        "what waits for your decision, newest first, with environment and alarms",
    ),
    (
        "show",
        "reviewer.queue.commands",
        "one plan's summary, alarms, full digest and the line that approves it",
    ),
    (
        "submit",
        "reviewer.queue.commands",
        "put proposal files on a live queue under an agent token, and print the line that opens each",
    ),
    (
        "passkey",
        "reviewer.queue.passkey_commands",
        "enrol, list and remove your passkeys for the review page; export them for executors",
    ),
    (
        "trail",
        "reviewer.trail.commands",
        "the trail's signed checkpoints: print one, export the entries, verify an export offline",
    ),
    ("policy", "reviewer.policy.commands", "test a queue policy file"),
    (
        "sample-api",
        "reviewer.sample_api.commands",
        "serve the sample ticket API of the reference scenario on loopback",
    ),
    (
        "walkthrough",
        "reviewer.sample_api.commands",
        "run the reference scenario in every dry-run mode and for real, and print what each proved",
    ),
    (
        "mcp-gate",
        "reviewer.mcp_gate.command",
        "gate an MCP server's write tools behind the review queue (needs reviewer-gate[mcp])",
    ),
    (
        "run",
        "reviewer.run.commands",
        "gate an agent in any language: COMMAND's writes become a plan a reviewer approves",
    ),
    (
        "verify",
        "reviewer.audit.commands",
        "hold a run's report against the API's own audit log, call by call",
    ),
)
"""Every sub-command: its name, the module whose `register(subparsers)` adds it, and its help line, in
the order help lists them. A module's commands are next to each other; a test checks that each
module registers exactly these names with these help lines."""

COMMAND_MODULES = tuple(dict.fromkeys(module for _, module, _ in COMMANDS))
"""The modules that add sub-commands, in the order help lists them."""


def top_level() -> argparse.ArgumentParser:
    """`reviewer` itself, before any command: its description and `--version`."""
    parser = argparse.ArgumentParser(
        prog="reviewer",
        description="Review an AI agent's dry-run plans before they write to a real API.",
    )
    parser.add_argument("--version", action=_Version)
    return parser


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The parser that runs `command`: its module registers its sub-commands in full, every other
    command is listed by its name and help line only. Without a known command (`reviewer --help`, a
    mistyped name) every command is listed that way, and none of their modules is imported."""
    parser = top_level()
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    chosen = next((module for name, module, _ in COMMANDS if name == command), None)
    registered = False
    for name, module, help_line in COMMANDS:
        if module != chosen:
            subparsers.add_parser(name, help=help_line)
        elif not registered:  # all of the module's commands, in their places (they are adjacent)
            importlib.import_module(module).register(subparsers)
            registered = True
    return parser


class _Version(argparse.Action):
    """`reviewer --version`: the release and the queue schema it writes, then exit. An action of
    its own so the release is looked up only when asked."""

    def __init__(self, option_strings: Sequence[str], dest: str, **_: object) -> None:
        super().__init__(
            option_strings, dest, nargs=0, help="print the release and the queue schema it writes"
        )

    def __call__(self, parser: argparse.ArgumentParser, *_: object) -> None:
        from reviewer import DISTRIBUTION, release
        from reviewer.service.store.base import SCHEMA_VERSION

        print(f"{DISTRIBUTION} {release()} (queue schema {SCHEMA_VERSION})")
        parser.exit()


def _without_httpx_command_line() -> None:
    """httpx imports its own command line (click, rich's console, pygments) whenever they are
    installed, as they are beside uvicorn and Textual: 30 ms of every command that speaks HTTP, for
    a tool no command runs. Standing in for that module before httpx is first imported, in this
    process alone, leaves `httpx.main` saying it cannot run; a program that imports `reviewer` as a
    library is untouched."""
    if "httpx" not in sys.modules:
        sys.modules.setdefault("httpx._main", ModuleType("httpx._main"))


def main(argv: Sequence[str] | None = None) -> int:
    _without_httpx_command_line()
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments:
        arguments = ["review"]
    command = next((argument for argument in arguments if not argument.startswith("-")), None)
    parser = build_parser(command)
    options = parser.parse_args(arguments)
    handler = getattr(options, "func", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(options) or 0)
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # the reader stopped early (`reviewer list | head`): the command did its part
        from reviewer.queue.pager import quiet_stdout

        quiet_stdout()
        return 0
    except ValueError as error:  # a CA file (--ca-file, REVIEWER_CA_FILE) every command's client reads
        from reviewer.plan.sanitize import clip, safe_text
        from reviewer.queue.trust import UnreadableCaFile

        if not isinstance(error, UnreadableCaFile):
            raise
        print(f"reviewer {command}: {safe_text(clip(str(error), 600))}; nothing was sent", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
