"""The service's commands: `reviewer serve`, `token`, `keys`, `notify list` and `db`, as parsers.

Each command runs from its module (`serve`, `tokens`, `database`); FastAPI and the stores are
imported only when a command runs, so `reviewer --help` stays quick. Every error an operator can
meet (a bad port, a taken port, a missing or unreachable database) is one line on stderr and a
non-zero exit.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Final

from reviewer.policy.expressions import DEFAULT_DEADLINE
from reviewer.service.commands.database import (
    run_db_backup,
    run_db_reopen,
    run_db_restore,
    run_db_upgrade,
    run_notify_list,
)
from reviewer.service.commands.serve import run_serve
from reviewer.service.commands.tokens import (
    run_keys_add,
    run_keys_list,
    run_keys_remove,
    run_token_create,
    run_token_list,
    run_token_revoke,
    run_token_rotate,
)
from reviewer.service.timeouts import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `serve` and `token` to the `reviewer` command line."""
    serve = subparsers.add_parser(
        "serve",
        help="run the queue service",
        description="Run the queue service (HTTP or HTTPS, on SQLite or PostgreSQL).",
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
        "--header-timeout",
        type=float,
        default=DEFAULT_HEADER_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request headers are not complete by then "
        f"(default: {DEFAULT_HEADER_TIMEOUT:g})",
    )
    serve.add_argument(
        "--body-timeout",
        type=float,
        default=DEFAULT_BODY_TIMEOUT,
        metavar="SECONDS",
        help="close a connection whose request body is not complete by then "
        f"(default: {DEFAULT_BODY_TIMEOUT:g})",
    )
    serve.add_argument("--tls-cert", metavar="FILE", help="serve HTTPS with this certificate (PEM)")
    serve.add_argument("--tls-key", metavar="FILE", help="the certificate's private key (PEM)")
    serve.add_argument(
        "--behind-tls-proxy",
        action="store_true",
        help="allow plain HTTP on a non-loopback address because a TLS-terminating proxy is the only way in",
    )
    serve.add_argument(
        "--policy",
        type=Path,
        default=None,
        metavar="FILE",
        help="a TOML policy: environments (by base URL or name) and rules on the plan in CEL "
        "(default: one approval by any reviewer, unsigned); `reviewer policy check FILE` tests one",
    )
    serve.add_argument(
        "--policy-key",
        type=Path,
        default=None,
        metavar="FILE",
        help="the queue's own SSH private key, to sign what the policy approves where signatures "
        "are required",
    )
    serve.add_argument(
        "--trail-key",
        type=Path,
        default=None,
        metavar="FILE",
        help="an OpenSSH Ed25519 private key (ssh-keygen -t ed25519 -N '') that signs the trail's "
        "checkpoints; auditors verify exports with its .pub (`reviewer trail verify`)",
    )
    serve.add_argument(
        "--signed-memory",
        type=Path,
        default=None,
        metavar="FILE",
        help="where the queue remembers the largest trail it signed, to refuse a database restored "
        "from an older copy (default: one file per database in the user's state folder; replicas may "
        "share one on a volume)",
    )
    serve.add_argument(
        "--policy-principal",
        default="queue-policy",
        metavar="NAME",
        help="the name the queue signs its approvals as, for the executors' allowed-signers files "
        "(default: queue-policy)",
    )
    serve.add_argument(
        "--policy-deadline",
        type=float,
        default=DEFAULT_DEADLINE,
        metavar="SECONDS",
        help="how long evaluating the policy on one plan may take; past it the plan needs at least "
        "what every rule not yet decided asks (default: %(default)g)",
    )
    serve.add_argument(
        "--notify",
        action="append",
        default=[],
        metavar="[EVENTS=]URL",
        help="post each event (proposal.waiting, proposal.reminder, proposal.decided, run.ended, "
        "run.unknown) to URL: a signed webhook (https://, or http:// to loopback) or an Apprise URL "
        "(slack://, pagerduty://, ...); EVENTS=URL (comma-separated) sends only those; repeatable",
    )
    serve.add_argument(
        "--notify-secret-file",
        type=Path,
        default=None,
        metavar="FILE",
        help="the secret that signs each webhook (Reviewer-Signature); needed with --notify",
    )
    serve.add_argument(
        "--remind-after",
        type=float,
        default=None,
        metavar="SECONDS",
        help="notify again, every SECONDS, while a proposal is still pending (default: never)",
    )
    serve.add_argument(
        "--notify-keep",
        type=float,
        default=None,
        metavar="SECONDS",
        help="how long a delivered or failed notification stays listed by `notify list`, then is "
        "deleted (default: 604800, a week)",
    )
    _operating_options(serve)
    _sign_in_options(serve)
    serve.set_defaults(func=run_serve)

    notify = subparsers.add_parser(
        "notify", help="the queue's notifications", description="The notifications the queue delivered."
    )
    notify_commands = notify.add_subparsers(title="notify commands", metavar="COMMAND", required=True)
    deliveries = notify_commands.add_parser("list", help="list the newest deliveries and their state")
    deliveries.add_argument("--limit", type=int, default=50, help="how many (default: 50)")
    _db_option(deliveries)
    deliveries.set_defaults(func=run_notify_list)

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
    _db_option(create)
    create.set_defaults(func=run_token_create)
    listing = commands.add_parser("list", help="list token names and roles (never the tokens)")
    _db_option(listing)
    listing.set_defaults(func=run_token_list)
    _token_rotate_command(commands)
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
    register_db(subparsers)


LATEST_EXPIRY: Final = 253402300799.0
"""9999-12-31 23:59:59 UTC, the last second a date shows: a later expiry could not be listed."""


def duration(text: str) -> float:
    """`90d`, `12h`, `30m`, `45s` or a number of seconds, more than 0 (`listing.duration_seconds`)."""
    from reviewer.service.listing import duration_seconds

    try:
        seconds = duration_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if time.time() + seconds >= LATEST_EXPIRY:
        raise argparse.ArgumentTypeError(
            f"{text!r} ends after the year 9999, past any time the queue stores; "
            "leave --expires-in out for a token that does not expire"
        )
    return seconds


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
    _db_option(rotate)
    rotate.set_defaults(func=run_token_rotate)


def _sign_in_options(serve: argparse.ArgumentParser) -> None:
    """`serve`'s options for reviewers signing in through the team's OpenID provider."""
    group = serve.add_argument_group(
        "signing reviewers in through an OpenID provider",
        "Reviewers run `reviewer login --queue URL` (the device authorization grant) instead of "
        "pasting a minted token; agents keep minted tokens. See docs/operating.md.",
    )
    group.add_argument(
        "--oidc-issuer", metavar="URL", help="the provider's issuer URL, exactly as it writes it"
    )
    group.add_argument("--oidc-client-id", metavar="ID", help="the public client registered for reviewer")
    group.add_argument(
        "--oidc-reviewers", metavar="GROUP", help="the group whose members may decide (in the groups claim)"
    )
    group.add_argument(
        "--oidc-groups-claim",
        default="groups",
        metavar="CLAIM",
        help="the identity token's claim that lists the person's groups (default: groups)",
    )
    group.add_argument(
        "--oidc-name-claim",
        default="email",
        metavar="CLAIM",
        help="the claim decisions name the person by, and policies' reviewers lists match (default: email)",
    )
    group.add_argument(
        "--oidc-scopes",
        default=None,
        metavar="SCOPES",
        help="the scopes `reviewer login` asks for (default: openid email groups offline_access)",
    )
    group.add_argument(
        "--oidc-session",
        type=duration,
        default=None,
        metavar="DURATION",
        help="how long a sign-in decides before the client renews it with its refresh token, at most "
        "(default: 10m; a shorter identity token lifetime wins)",
    )


def _operating_options(serve: argparse.ArgumentParser) -> None:
    """`serve`'s options for operators: migrations, the log's format, the API's documentation pages."""
    serve.add_argument(
        "--no-migrate",
        action="store_true",
        help="refuse to start on a database of an older schema instead of migrating it "
        "(then `reviewer db upgrade` migrates it, after a backup)",
    )
    serve.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="text lines, or one JSON object a line with the request's id (default: text)",
    )
    serve.add_argument(
        "--api-docs",
        action="store_true",
        help="serve the API's documentation pages at /docs and /redoc (off: both load scripts from a CDN)",
    )


def register_db(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `db upgrade`, `db backup`, `db restore` and `db reopen` to the `reviewer` command line."""
    db = subparsers.add_parser(
        "db",
        help="upgrade, back up or restore the queue's database",
        description="The queue's database: migrate it to this release's schema, or copy it.",
    )
    db_commands = db.add_subparsers(title="db commands", metavar="COMMAND", required=True)
    upgrade = db_commands.add_parser(
        "upgrade",
        help="migrate the database to this release's schema (an SQLite file is backed up next to it first)",
    )
    _db_option(upgrade)
    upgrade.set_defaults(func=run_db_upgrade)
    backup = db_commands.add_parser(
        "backup",
        help="copy an SQLite queue to PATH while it serves (PostgreSQL: pg_dump, see docs/operating.md)",
    )
    backup.add_argument("path", type=Path, metavar="PATH")
    _db_option(backup)
    backup.set_defaults(func=run_db_backup)
    restore = db_commands.add_parser(
        "restore",
        help="put an SQLite backup in place of the queue (a rollback; stop every replica first); "
        "notifications delivered since stay delivered",
    )
    restore.add_argument("backup", type=Path, metavar="BACKUP")
    _db_option(restore)
    restore.set_defaults(func=run_db_restore)
    reopen = db_commands.add_parser(
        "reopen",
        help="serve a database restored from an older copy: close every proposal it left open and, "
        "for a queue that signs its trail, remember the copy's log as the one signed (stop every "
        "replica first)",
    )
    _db_option(reopen)
    memory = reopen.add_mutually_exclusive_group()
    memory.add_argument(
        "--trail-key",
        type=Path,
        metavar="FILE",
        help="the key `serve --trail-key` signs with: its log's memory is the state folder's, as serve's",
    )
    memory.add_argument(
        "--signed-memory", type=Path, metavar="FILE", help="the file `serve --signed-memory` names"
    )
    reopen.set_defaults(func=run_db_reopen)


def _db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=None,
        metavar="PATH_OR_URL",
        # Not the path itself: finding it loads the platform's folder rules, which every command
        # (the demo's start among them) would then pay for.
        help="the queue's SQLite file, or a postgresql:// URL "
        "(default: queue.sqlite3 in reviewer's user data folder, e.g. ~/.local/share/reviewer)",
    )
