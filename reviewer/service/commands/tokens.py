"""`reviewer token` and `reviewer keys`: the queue's tokens and reviewers' SSH signing keys."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reviewer.service.commands.support import db_option, duration, opened, refusal


def run_token_create(args: argparse.Namespace) -> int:
    from reviewer.service.auth import hash_token, mint_token
    from reviewer.service.errors import DatabaseUnusable, ServiceError
    from reviewer.signing.sshsig import PublicKey, SigningError

    if args.ssh_key and args.role != "reviewer":
        print("reviewer token create: --ssh-key is for reviewers: their keys sign decisions", file=sys.stderr)
        return 2
    if args.break_glass and args.role != "reviewer":
        print(
            "reviewer token create: --break-glass is for reviewers; agents keep minted tokens",
            file=sys.stderr,
        )
        return 2
    person = None
    if args.person is not None:
        issuer, mark, subject = args.person.partition("#")  # an issuer has no fragment: the first # ends it
        if args.role != "reviewer" or not mark or not issuer or not subject:
            print(
                "reviewer token create: --person is a reviewer's provider identity, ISSUER#SUBJECT "
                "(as `reviewer token list` shows a signed-in person)",
                file=sys.stderr,
            )
            return 2
        person = (issuer, subject)
    try:
        keys = [(PublicKey.from_file(path), _key_comment(path)) for path in args.ssh_key]
    except SigningError as error:
        print(f"reviewer token create: {error}; no token was made", file=sys.stderr)
        return 2
    token = mint_token()
    try:
        with opened(args) as store:
            expires_at = None if args.expires_in is None else store.clock() + args.expires_in
            store.create_token(
                args.name,
                args.role,
                hash_token(token),
                expires_at,
                "break-glass" if args.break_glass else "minted",
                person,
            )
            for key, comment in keys:
                store.add_ssh_key(args.name, key, comment)
    except (DatabaseUnusable, ServiceError) as error:
        return refusal("token create", error.message)
    print(token)
    for key, _comment in keys:
        print(f"registered {key.key_type} {key.fingerprint} for {args.name}", file=sys.stderr)
    return 0


def _key_comment(path: Path) -> str:
    """The comment after the key in a .pub file (often user@host), kept to tell keys apart."""
    from reviewer.plan.sanitize import safe_text

    parts = path.read_text().split(maxsplit=2)
    return safe_text(parts[2].strip())[:200] if len(parts) > 2 else ""


def run_keys_add(args: argparse.Namespace) -> int:
    from reviewer.service.errors import Conflict, DatabaseUnusable
    from reviewer.signing.sshsig import PublicKey, SigningError

    try:
        key = PublicKey.from_file(args.key_file)
    except SigningError as error:
        print(f"reviewer keys add: {error}", file=sys.stderr)
        return 2
    try:
        with opened(args) as store:
            store.add_ssh_key(args.name, key, _key_comment(args.key_file))
    except (Conflict, DatabaseUnusable) as error:
        return refusal("keys add", error.message)
    print(f"registered {key.key_type} {key.fingerprint} for {args.name}", file=sys.stderr)
    return 0


def run_keys_remove(args: argparse.Namespace) -> int:
    from reviewer.service.errors import DatabaseUnusable

    try:
        with opened(args) as store:
            removed = store.remove_ssh_key(args.name, args.fingerprint)
    except DatabaseUnusable as error:
        return refusal("keys remove", error.message)
    if not removed:
        print(
            f"reviewer keys remove: {args.name!r} has no key {args.fingerprint!r} (see `reviewer keys list`)",
            file=sys.stderr,
        )
        return 1
    print(f"removed {args.fingerprint} of {args.name}", file=sys.stderr)
    return 0


def run_keys_list(args: argparse.Namespace) -> int:
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.signing.sshsig import NAMESPACE

    try:
        with opened(args) as store:
            keys = store.list_ssh_keys(args.name)
    except DatabaseUnusable as error:
        return refusal("keys list", error.message)
    for key in keys:
        if args.allowed_signers:
            print(f'{key.name} namespaces="{NAMESPACE}" {key.public_key}')
        else:
            print(f"{key.name}\t{key.fingerprint}\t{key.comment}\tadded {key.added_at:%Y-%m-%d %H:%M}")
    return 0


def run_token_list(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from reviewer.plan.sanitize import safe_text
    from reviewer.service.errors import DatabaseUnusable

    try:
        with opened(args) as store:
            tokens = store.list_tokens()
    except DatabaseUnusable as error:
        return refusal("token list", error.message)
    now = datetime.now(UTC)
    for token in tokens:
        status = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
        if token.revoked_at is None and token.session_ends_at is not None:
            ends = "ended" if token.session_ends_at <= now else "ends"
            status = f"signed in, session {ends} {token.session_ends_at:%Y-%m-%d %H:%M}"
        if token.revoked_at is None and token.expires_at is not None:
            status = (
                f"{'expired' if token.expires_at <= now else 'expires'} {token.expires_at:%Y-%m-%d %H:%M}"
            )
        if token.revoked_at is None and token.previous_valid_until and token.previous_valid_until > now:
            status += f", rotated: the old token works until {token.previous_valid_until:%Y-%m-%d %H:%M}"
        # Names made before the name rules may hold anything: shown with hidden characters escaped.
        bound = f"\tfor {safe_text(token.subject)}" if token.subject else ""
        how = {
            "minted": bound,
            "break-glass": "\tbreak-glass" + bound,
            "provider": f"\t{safe_text(token.subject or '')}",
        }
        print(
            f"{safe_text(token.name)}\t{token.role}\tcreated {token.created_at:%Y-%m-%d %H:%M}\t{status}"
            + how[token.kind]
        )
    return 0


def run_token_revoke(args: argparse.Namespace) -> int:
    """Revoke; a reviewer's end and each pending approval it withdrew are said on stderr in the lines
    a queue logs for them (`reviewer.service.store.endings`)."""
    import logging

    from reviewer.plan.sanitize import safe_text
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.service.store.endings import log as endings_log

    said = logging.StreamHandler(sys.stderr)
    said.setFormatter(logging.Formatter("%(message)s"))
    endings_log.addHandler(said)
    endings_log.setLevel(logging.INFO)
    try:
        with opened(args) as store:
            revoked = store.revoke_token(args.name)
    except DatabaseUnusable as error:
        return refusal("token revoke", error.message)
    if not revoked:
        return refusal("token revoke", f"no active token named {safe_text(args.name)!r}")
    print(f"revoked {safe_text(args.name)}", file=sys.stderr)
    return 0


def run_token_rotate(args: argparse.Namespace) -> int:
    from reviewer.plan.sanitize import safe_text
    from reviewer.service.auth import hash_token, mint_token
    from reviewer.service.errors import DatabaseUnusable

    token = mint_token()
    try:
        with opened(args) as store:
            expires_at = None if args.expires_in is None else store.clock() + args.expires_in
            rotated = store.rotate_token(args.name, hash_token(token), args.grace, expires_at)
    except DatabaseUnusable as error:
        return refusal("token rotate", error.message)
    if not rotated:
        return refusal("token rotate", f"no active token named {safe_text(args.name)!r}")
    print(token)
    print(f"rotated {safe_text(args.name)}: the old token works {args.grace:g} s more", file=sys.stderr)
    return 0


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `token` and `keys` to the `reviewer` command line."""
    token = subparsers.add_parser(
        "token",
        help="mint, list, rotate and revoke the queue's tokens",
        description="Manage the queue's tokens.",
    )
    commands = token.add_subparsers(title="token commands", metavar="COMMAND", required=True)
    create = commands.add_parser("create", help="mint a token and print it, once")
    create.add_argument(
        "--name",
        required=True,
        help="who holds it, shown as the author of decisions: 1 to 64 of A-Z a-z 0-9 . _ -",
    )
    create.add_argument(
        "--role",
        required=True,
        choices=("agent", "reviewer", "metrics", "auditor"),
        help="agent (submits, runs), reviewer (decides), metrics (reads /metrics only), "
        "auditor (reads the trail only)",
    )
    create.add_argument(
        "--ssh-key",
        type=Path,
        action="append",
        default=[],
        metavar="FILE",
        help="a reviewer's SSH public key (.pub) that signs their decisions; repeatable",
    )
    create.add_argument(
        "--expires-in",
        type=duration,
        default=None,
        metavar="DURATION",
        help="the token stops working after DURATION (90d, 12h, 30m or seconds; default: never)",
    )
    create.add_argument(
        "--break-glass",
        action="store_true",
        help="a reviewer's token for when the OpenID provider is down: a queue that signs reviewers "
        "in through the provider accepts no other minted reviewer token, and the trail marks its "
        "decisions break-glass (give it an --expires-in)",
    )
    create.add_argument(
        "--person",
        default=None,
        metavar="ISSUER#SUBJECT",
        help="the identity provider's person this reviewer's token belongs to (as `token list` shows "
        "a signed-in person): a quorum counts their token and their provider sign-in as one person",
    )
    db_option(create)
    create.set_defaults(func=run_token_create)
    listing = commands.add_parser("list", help="list token names and roles (never the tokens)")
    db_option(listing)
    listing.set_defaults(func=run_token_list)
    _token_rotate_command(commands)
    revoke = commands.add_parser("revoke", help="revoke the active token of NAME")
    revoke.add_argument("name", metavar="NAME")
    db_option(revoke)
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
    db_option(add)
    add.set_defaults(func=run_keys_add)
    remove = key_commands.add_parser("remove", help="remove NAME's key by its SHA256: fingerprint")
    remove.add_argument("name", metavar="NAME")
    remove.add_argument("fingerprint", metavar="FINGERPRINT")
    db_option(remove)
    remove.set_defaults(func=run_keys_remove)
    show = key_commands.add_parser("list", help="list registered keys (of NAME, or everyone's)")
    show.add_argument("name", nargs="?", metavar="NAME")
    show.add_argument(
        "--allowed-signers",
        action="store_true",
        help="print them as an OpenSSH allowed-signers file (review it before an executor trusts it)",
    )
    db_option(show)
    show.set_defaults(func=run_keys_list)


def _token_rotate_command(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rotate = commands.add_parser(
        "rotate", help="give NAME's token a new secret, printed once; the old one works a grace period more"
    )
    rotate.add_argument("name", metavar="NAME")
    rotate.add_argument(
        "--grace",
        type=duration,
        default=3600.0,
        metavar="DURATION",
        help="how long the replaced token keeps working, for clients to switch (default: 1h)",
    )
    rotate.add_argument(
        "--expires-in",
        type=duration,
        default=None,
        metavar="DURATION",
        help="the new token stops working after DURATION (default: never)",
    )
    db_option(rotate)
    rotate.set_defaults(func=run_token_rotate)
