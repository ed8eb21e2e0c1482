"""`reviewer sample-api` and `reviewer walkthrough`: the reference scenario's commands (FastAPI lazily)."""

from __future__ import annotations

import argparse
import os
import sys
from typing import Any

DEFAULT_PORT = 8480


def register(subparsers: Any) -> None:
    """Add `reviewer sample-api [--port N] [--ignore-dry-run] [--write-token-env NAME]` and
    `reviewer walkthrough`."""
    from reviewer.sample_api import walkthrough

    parser: argparse.ArgumentParser = subparsers.add_parser(
        "sample-api",
        help="serve the sample ticket API of the reference scenario on loopback",
        description=(
            "Serve the reference scenario's ticket API on 127.0.0.1: tickets t1, t2, t3 open, "
            "dryRun=All, 409 on deleting an open ticket, 422 on a merge into no ticket, GET /v1/audit."
        ),
    )
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT})")
    parser.add_argument(
        "--ignore-dry-run",
        action="store_true",
        help="drop the dryRun parameter like a server that does not know it (dry runs then keep writes)",
    )
    parser.add_argument(
        "--write-token-env",
        metavar="NAME",
        help="require `Authorization: Bearer <value of env NAME>` on every write (reads stay open)",
    )
    parser.set_defaults(func=_serve)
    walkthrough.register(subparsers)


def _serve(options: argparse.Namespace) -> int:
    from reviewer.sample_api.server import serve_forever

    write_token = None
    if options.write_token_env:
        write_token = os.environ.get(options.write_token_env)
        if not write_token:
            print(
                f"reviewer sample-api: --write-token-env: {options.write_token_env} is not set",
                file=sys.stderr,
            )
            return 2
    serve_forever(port=options.port, ignore_dry_run=options.ignore_dry_run, write_token=write_token)
    return 0
