"""The service's commands: `reviewer serve` and `reviewer token create|list|revoke`.

FastAPI and uvicorn are imported only when `serve` runs, so `reviewer --help` stays quick.
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from reviewer.config import default_db_path


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `serve` and `token` to the `reviewer` command line."""
    serve = subparsers.add_parser(
        "serve", help="run the queue service", description="Run the queue service (HTTP, SQLite)."
    )
    _db_option(serve)
    serve.add_argument("--host", default="127.0.0.1", help="address to listen on (default: loopback only)")
    serve.add_argument("--port", type=int, default=8470, help="port to listen on (default: 8470)")
    serve.add_argument(
        "--pending-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long an undecided proposal stays pending (default: one day)",
    )
    serve.add_argument(
        "--approval-ttl",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long an approval may wait for a run to claim it (default: one hour)",
    )
    serve.add_argument(
        "--claim-lease",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a claimed run may take before its outcome shows as unknown (default: one hour)",
    )
    serve.set_defaults(func=run_serve)

    token = subparsers.add_parser(
        "token", help="mint, list and revoke the queue's tokens", description="Manage the queue's tokens."
    )
    commands = token.add_subparsers(title="token commands", metavar="COMMAND", required=True)
    create = commands.add_parser("create", help="mint a token and print it, once")
    create.add_argument("--name", required=True, help="who holds it: shown as the author of decisions")
    create.add_argument("--role", required=True, choices=("agent", "reviewer"))
    _db_option(create)
    create.set_defaults(func=run_token_create)
    listing = commands.add_parser("list", help="list token names and roles (never the tokens)")
    _db_option(listing)
    listing.set_defaults(func=run_token_list)
    revoke = commands.add_parser("revoke", help="revoke the active token of NAME")
    revoke.add_argument("name", metavar="NAME")
    _db_option(revoke)
    revoke.set_defaults(func=run_token_revoke)


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        type=Path,
        default=None,
        metavar="PATH",
        help=f"the queue's SQLite file (default: {default_db_path()})",
    )


def _store(args: argparse.Namespace):  # type: ignore[no-untyped-def]
    import time

    from reviewer.service.app import DEFAULT_APPROVAL_TTL, DEFAULT_PENDING_TTL
    from reviewer.service.store import SQLiteStore

    return SQLiteStore(
        args.db or default_db_path(),
        clock=time.time,
        pending_ttl=DEFAULT_PENDING_TTL,
        approval_ttl=DEFAULT_APPROVAL_TTL,
    )


def run_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from reviewer.service.app import DEFAULT_APPROVAL_TTL, DEFAULT_PENDING_TTL, create_app
    from reviewer.service.store import DEFAULT_CLAIM_LEASE

    logging.basicConfig(
        level=logging.INFO, stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s: %(message)s"
    )
    db_path = args.db or default_db_path()
    app = create_app(
        db_path,
        pending_ttl=DEFAULT_PENDING_TTL if args.pending_ttl is None else args.pending_ttl,
        approval_ttl=DEFAULT_APPROVAL_TTL if args.approval_ttl is None else args.approval_ttl,
        claim_lease=DEFAULT_CLAIM_LEASE if args.claim_lease is None else args.claim_lease,
    )
    logging.getLogger("reviewer.service").info("queue database: %s", db_path)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, access_log=False, log_config=None, server_header=False
    )
    uvicorn.Server(config).run()
    return 0


def run_token_create(args: argparse.Namespace) -> int:
    from reviewer.service.auth import hash_token, mint_token
    from reviewer.service.errors import Conflict

    store = _store(args)
    token = mint_token()
    try:
        store.create_token(args.name, args.role, hash_token(token))
    except Conflict as error:
        print(f"reviewer token create: {error.message}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(token)
    return 0


def run_token_list(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        tokens = store.list_tokens()
    finally:
        store.close()
    for token in tokens:
        status = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
        print(f"{token.name}\t{token.role}\tcreated {token.created_at:%Y-%m-%d %H:%M}\t{status}")
    return 0


def run_token_revoke(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        revoked = store.revoke_token(args.name)
    finally:
        store.close()
    if not revoked:
        print(f"reviewer token revoke: no active token named {args.name!r}", file=sys.stderr)
        return 1
    print(f"revoked {args.name}", file=sys.stderr)
    return 0
