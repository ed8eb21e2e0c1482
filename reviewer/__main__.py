"""The command line: `reviewer demo`, `review`, `serve`, `token`, `mcp-gate`, `run`, and the rest.

Each part registers its own sub-commands, so importing this module stays cheap: Textual, FastAPI
and uvicorn are imported only by the command that needs them.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

# Modules that add sub-commands through `register(subparsers)`, in the order help lists them.
_COMMAND_MODULES = (
    "reviewer.tui.commands",
    "reviewer.service.commands",
    "reviewer.queue.commands",
    "reviewer.policy.commands",
    "reviewer.sample_api.commands",
    "reviewer.adapters.commands",
    "reviewer.run.commands",
)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="reviewer",
        description="Review an AI agent's dry-run plans before they write to a real API.",
    )
    subparsers = parser.add_subparsers(title="commands", metavar="COMMAND")
    for name in _COMMAND_MODULES:
        importlib.import_module(name).register(subparsers)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    arguments = list(sys.argv[1:] if argv is None else argv)
    if not arguments:
        arguments = ["review"]
    options = parser.parse_args(arguments)
    handler = getattr(options, "func", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        return int(handler(options) or 0)
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())
