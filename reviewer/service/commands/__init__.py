"""The service's commands: `reviewer serve`, `notify list`, `token`, `keys` and `db`.

Each command's module declares its own parser and runs it (`serve`, `tokens`, `database`): `tokens`
holds `token` and `keys`, `database` holds `notify` and `db`; what they share is in `support`.
FastAPI and the stores are imported only when a command runs, so `reviewer --help` stays quick.
Every error an operator can meet (a bad port, a taken port, a missing or unreachable database) is
one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse

from reviewer.service.commands import database, serve, tokens


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add the service's commands to the `reviewer` command line, in the order `--help` lists them."""
    serve.register(subparsers)
    database.register_notify(subparsers)
    tokens.register(subparsers)
    database.register(subparsers)
