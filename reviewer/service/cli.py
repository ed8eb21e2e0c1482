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
    serve.add_argument(
        "--policy",
        type=Path,
        default=None,
        metavar="FILE",
        help="a TOML policy: approvals, signatures and reviewers per target environment "
        "(default: one approval by any reviewer, unsigned)",
    )
    serve.set_defaults(func=run_serve)

    token = subparsers.add_parser(
        "token", help="mint, list and revoke the queue's tokens", description="Manage the queue's tokens."
    )
    commands = token.add_subparsers(title="token commands", metavar="COMMAND", required=True)
    create = commands.add_parser("create", help="mint a token and print it, once")
    create.add_argument("--name", required=True, help="who holds it: shown as the author of decisions")
    create.add_argument("--role", required=True, choices=("agent", "reviewer"))
    create.add_argument(
        "--ssh-key",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a reviewer's SSH public key (.pub) that signs their decisions; repeatable",
    )
    _db_option(create)
    create.set_defaults(func=run_token_create)
    listing = commands.add_parser("list", help="list token names and roles (never the tokens)")
    _db_option(listing)
    listing.set_defaults(func=run_token_list)
    revoke = commands.add_parser("revoke", help="revoke the active token of NAME")
    revoke.add_argument("name", metavar="NAME")
    _db_option(revoke)
    revoke.set_defaults(func=run_token_revoke)

    keys = subparsers.add_parser(
        "keys",
        help="register and remove reviewers' SSH signing keys",
        description="The SSH public keys each reviewer signs decisions with. The queue verifies a signed "
        "decision against these; an executor checks it against its own allowed-signers file.",
    )
    key_commands = keys.add_subparsers(title="keys commands", metavar="COMMAND", required=True)
    add = key_commands.add_parser("add", help="register a public key (.pub) for reviewer NAME")
    add.add_argument("name", metavar="NAME")
    add.add_argument("key_file", type=Path, metavar="FILE")
    _db_option(add)
    add.set_defaults(func=run_keys_add)
    remove = key_commands.add_parser("remove", help="remove NAME's key by its SHA256: fingerprint")
    remove.add_argument("name", metavar="NAME")
    remove.add_argument("fingerprint", metavar="FINGERPRINT")
    _db_option(remove)
    remove.set_defaults(func=run_keys_remove)
    show = key_commands.add_parser("list", help="list registered keys (of NAME, or everyone's)")
    show.add_argument("name", nargs="?", metavar="NAME")
    show.add_argument(
        "--allowed-signers",
        action="store_true",
        help="print them as an OpenSSH allowed-signers file (review it before an executor trusts it)",
    )
    _db_option(show)
    show.set_defaults(func=run_keys_list)


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
    from reviewer.policy import PolicyError, read_policy

    try:
        policy = read_policy(args.policy) if args.policy is not None else None
    except PolicyError as error:
        print(f"reviewer serve: {error}; not started", file=sys.stderr)
        return 2
    db_path = args.db or default_db_path()
    app = create_app(
        db_path,
        pending_ttl=DEFAULT_PENDING_TTL if args.pending_ttl is None else args.pending_ttl,
        approval_ttl=DEFAULT_APPROVAL_TTL if args.approval_ttl is None else args.approval_ttl,
        claim_lease=DEFAULT_CLAIM_LEASE if args.claim_lease is None else args.claim_lease,
        policy=policy,
    )
    logging.getLogger("reviewer.service").info("queue database: %s", db_path)
    if args.policy is not None:
        logging.getLogger("reviewer.service").info("decision policy: %s", args.policy)
    config = uvicorn.Config(
        app, host=args.host, port=args.port, access_log=False, log_config=None, server_header=False
    )
    uvicorn.Server(config).run()
    return 0


def run_token_create(args: argparse.Namespace) -> int:
    from reviewer.service.auth import hash_token, mint_token
    from reviewer.service.errors import Conflict
    from reviewer.signing import PublicKey, SigningError

    if args.ssh_key and args.role != "reviewer":
        print("reviewer token create: --ssh-key is for reviewers: their keys sign decisions", file=sys.stderr)
        return 2
    try:
        keys = [(PublicKey.from_file(path), _key_comment(path)) for path in args.ssh_key]
    except SigningError as error:
        print(f"reviewer token create: {error}; no token was made", file=sys.stderr)
        return 2
    store = _store(args)
    token = mint_token()
    try:
        store.create_token(args.name, args.role, hash_token(token))
        for key, comment in keys:
            store.add_ssh_key(args.name, key, comment)
    except Conflict as error:
        print(f"reviewer token create: {error.message}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(token)
    for key, _comment in keys:
        print(f"registered {key.key_type} {key.fingerprint} for {args.name}", file=sys.stderr)
    return 0


def _key_comment(path: Path) -> str:
    """The comment after the key in a .pub file (often user@host), kept to tell keys apart."""
    from reviewer.sanitize import safe_text

    parts = path.read_text().split(maxsplit=2)
    return safe_text(parts[2].strip())[:200] if len(parts) > 2 else ""


def run_keys_add(args: argparse.Namespace) -> int:
    from reviewer.service.errors import Conflict
    from reviewer.signing import PublicKey, SigningError

    try:
        key = PublicKey.from_file(args.key_file)
    except SigningError as error:
        print(f"reviewer keys add: {error}", file=sys.stderr)
        return 2
    store = _store(args)
    try:
        store.add_ssh_key(args.name, key, _key_comment(args.key_file))
    except Conflict as error:
        print(f"reviewer keys add: {error.message}", file=sys.stderr)
        return 1
    finally:
        store.close()
    print(f"registered {key.key_type} {key.fingerprint} for {args.name}", file=sys.stderr)
    return 0


def run_keys_remove(args: argparse.Namespace) -> int:
    store = _store(args)
    try:
        removed = store.remove_ssh_key(args.name, args.fingerprint)
    finally:
        store.close()
    if not removed:
        print(
            f"reviewer keys remove: {args.name!r} has no key {args.fingerprint!r} (see `reviewer keys list`)",
            file=sys.stderr,
        )
        return 1
    print(f"removed {args.fingerprint} of {args.name}", file=sys.stderr)
    return 0


def run_keys_list(args: argparse.Namespace) -> int:
    from reviewer.signing import NAMESPACE

    store = _store(args)
    try:
        keys = store.list_ssh_keys(args.name)
    finally:
        store.close()
    for key in keys:
        if args.allowed_signers:
            print(f'{key.name} namespaces="{NAMESPACE}" {key.public_key}')
        else:
            print(f"{key.name}\t{key.fingerprint}\t{key.comment}\tadded {key.added_at:%Y-%m-%d %H:%M}")
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
