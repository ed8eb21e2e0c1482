"""The options that say which approvals an executor runs, declared once for `reviewer run` and
`reviewer mcp-gate`: `--allowed-signers FILE`, `--allowed-passkeys FILE`, `--signatures N` and
`--ledger PATH`. Light on purpose:
every command registers when `reviewer --help` starts, so they are read (`reviewer.agent.signer_options`)
only when a command runs."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_signer_options(parser: argparse.ArgumentParser) -> None:
    """`--allowed-signers FILE`, `--allowed-passkeys FILE`, `--signatures N` and `--ledger PATH`."""
    parser.add_argument(
        "--allowed-signers",
        type=Path,
        metavar="FILE",
        help="run an approval only when people this OpenSSH allowed-signers file names signed exactly "
        "this plan (the file `ssh-keygen -Y verify -f` reads; `reviewer keys list --allowed-signers` "
        "prints the queue's keys in it): a queue whose database or host is in other hands cannot "
        "make this executor run anything",
    )
    parser.add_argument(
        "--allowed-passkeys",
        type=Path,
        metavar="FILE",
        help="run an approval only when people signed exactly this plan, counting the passkeys this "
        "file lists (`reviewer passkey export` writes it) beside --allowed-signers: an approval from "
        "the review page is verified here, offline",
    )
    parser.add_argument(
        "--signatures",
        type=int,
        metavar="N",
        help="distinct people of --allowed-signers and --allowed-passkeys who must have signed the "
        "approval (default 1)",
    )
    parser.add_argument(
        "--ledger",
        type=Path,
        metavar="PATH",
        help="the file where this executor records each approval it runs, before the first write, and "
        "refuses one it holds (default with --allowed-signers: ~/.local/state/reviewer/ledger.jsonl, "
        "shared by this user's executors on this host)",
    )
