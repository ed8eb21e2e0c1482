"""`reviewer token` and `reviewer keys`: the queue's tokens and reviewers' SSH signing keys."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reviewer.service.commands.support import opened, refusal


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
