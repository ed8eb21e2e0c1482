"""The service's commands: `reviewer serve` and `reviewer token create|list|revoke`.

FastAPI and the stores are imported only when a command runs, so `reviewer --help` stays quick.
Every error an operator can meet (a bad port, a taken port, a missing or unreachable database)
is one line on stderr and a non-zero exit.
"""

from __future__ import annotations

import argparse
import logging
import socket
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from reviewer.policy.expressions import DEFAULT_DEADLINE
from reviewer.service.timeouts import DEFAULT_BODY_TIMEOUT, DEFAULT_HEADER_TIMEOUT

if TYPE_CHECKING:
    from reviewer.policy.file import Policy
    from reviewer.service.notifications.sender import Sender
    from reviewer.service.server import Listening
    from reviewer.service.signed_decisions import PolicySigning
    from reviewer.service.store import QueueStore


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
        choices=("agent", "reviewer", "metrics"),
        help="agent (submits, runs), reviewer (decides), metrics (reads /metrics only)",
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


def duration(text: str) -> float:
    """`90d`, `12h`, `30m`, `45s` or a number of seconds, more than 0."""
    units = {"d": 86400.0, "h": 3600.0, "m": 60.0, "s": 1.0}
    number, unit = (text[:-1], units[text[-1]]) if text[-1:] in units else (text, 1.0)
    try:
        seconds = float(number) * unit
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration like 90d, 12h, 30m or 3600") from None
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r}: a duration is more than 0")
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
    """Add `db upgrade` and `db backup` to the `reviewer` command line."""
    db = subparsers.add_parser(
        "db",
        help="upgrade or back up the queue's database",
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


def _store(
    args: argparse.Namespace, *, create: bool = False, policy: Policy | None = None, migrate: bool = False
) -> QueueStore:
    """The store `--db` names; token commands never create one (a mistyped path is an error), and
    only `serve` and `db upgrade` migrate one (the others refuse an older schema, saying what to do)."""
    import time

    from reviewer.service.store import DEFAULT_APPROVAL_TTL, DEFAULT_CLAIM_LEASE, DEFAULT_PENDING_TTL
    from reviewer.service.store.opener import open_store

    pending_ttl = getattr(args, "pending_ttl", None)
    approval_ttl = getattr(args, "approval_ttl", None)
    claim_lease = getattr(args, "claim_lease", None)
    return open_store(
        args.db,
        clock=time.time,
        pending_ttl=DEFAULT_PENDING_TTL if pending_ttl is None else pending_ttl,
        approval_ttl=DEFAULT_APPROVAL_TTL if approval_ttl is None else approval_ttl,
        claim_lease=DEFAULT_CLAIM_LEASE if claim_lease is None else claim_lease,
        policy=policy,
        create=create,
        migrate=migrate,
    )


def _refusal(command: str, message: str) -> int:
    print(f"reviewer {command}: {message}", file=sys.stderr)
    return 1


def run_serve(args: argparse.Namespace) -> int:
    from reviewer.policy.file import PolicyError, read_policy
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.service.server import Listening, ListenRefused

    try:
        policy = read_policy(args.policy) if args.policy is not None else None
    except PolicyError as error:
        *earlier, last = error.mistakes
        for mistake in earlier:
            print(f"reviewer serve: {mistake}", file=sys.stderr)
        print(f"reviewer serve: {last}; not started", file=sys.stderr)
        return 2
    signing = None
    if args.policy_key is not None:
        from reviewer.service.signed_decisions import PolicySigning
        from reviewer.signing.sshsig import KeyFileSigner, SigningError

        try:
            signing = PolicySigning(KeyFileSigner(args.policy_key), args.policy_principal)
        except SigningError as error:
            return _refusal("serve", f"--policy-key: {error}")

    from reviewer.service.notifications.logs import hide_urls_in_logs
    from reviewer.service.notifications.sender import NotifyRefused
    from reviewer.service.notifications.targets import senders, split_events
    from reviewer.service.notifications.webhook import DEFAULT_ATTEMPT_TIMEOUT

    if args.remind_after is not None and not args.remind_after > 0:
        return _refusal("serve", f"--remind-after must be more than 0 seconds, not {args.remind_after}")
    if args.notify_keep is not None and not args.notify_keep > 0:
        return _refusal("serve", f"--notify-keep must be more than 0 seconds, not {args.notify_keep}")
    try:
        hide_urls_in_logs(split_events(value)[1] for value in args.notify)
        notify_senders = senders(
            args.notify, args.notify_secret_file, attempt_timeout=DEFAULT_ATTEMPT_TIMEOUT
        )
    except NotifyRefused as error:
        return _refusal("serve", error.message)
    listening = Listening(
        host=args.host,
        port=args.port,
        tls_cert=args.tls_cert,
        tls_key=args.tls_key,
        behind_tls_proxy=args.behind_tls_proxy,
        header_timeout=args.header_timeout,
        body_timeout=args.body_timeout,
    )
    try:
        listening.check()
        listener = listening.bind()
    except ListenRefused as error:
        return _refusal("serve", error.message)
    try:
        return _serve(args, listening, listener, policy, notify_senders, signing)
    except (ListenRefused, DatabaseUnusable) as error:
        return _refusal("serve", error.message)
    finally:
        listener.close()


def _serve(
    args: argparse.Namespace,
    listening: Listening,
    listener: socket.socket,
    policy: Policy | None,
    notify_senders: list[Sender],
    signing: PolicySigning | None = None,
) -> int:
    import asyncio
    import ssl

    import uvicorn

    from reviewer.policy.bounded import PolicyEvaluator
    from reviewer.service.app import create_app
    from reviewer.service.deadlines import DescriptorExhaustionLog
    from reviewer.service.log_format import configure_logging
    from reviewer.service.notifications.targets import describe
    from reviewer.service.server import ListenRefused

    configure_logging(args.log_format)
    log = logging.getLogger("reviewer.service")
    store = _store(args, create=True, policy=policy, migrate=not args.no_migrate)
    store.policy_signing = signing
    if policy is not None and not policy.trivial:
        store.policy_evaluator = PolicyEvaluator(policy, args.policy_deadline, signing=signing is not None)
    if store.created:
        log.info("created a new, empty queue in %s", store.location)
    app = create_app(
        None,
        store=store,
        senders=notify_senders,
        remind_after=args.remind_after,
        keep_deliveries=args.notify_keep,
        api_docs=args.api_docs,
    )
    log.info("queue database: %s", store.location)
    for sender in notify_senders:
        log.info("notifying %s", describe(sender))
    if policy is not None:
        _report_policy(log, args.policy, policy, store, signing)
    if listening.behind_tls_proxy and not listening.tls_cert:
        log.warning(
            "serving plain HTTP on %s because --behind-tls-proxy says a TLS-terminating proxy is in front; "
            "anyone who reaches this port directly sees tokens in clear text",
            listening.host,
        )
    config = listening.uvicorn_config(app)
    try:
        config.load()
    except (OSError, ssl.SSLError) as error:
        store.close()
        raise ListenRefused(f"cannot use the TLS certificate or key: {error}") from None
    log.info("listening on %s://%s:%d", listening.scheme, listening.host, listening.port)
    server = uvicorn.Server(config)

    async def serve() -> None:
        asyncio.get_running_loop().set_exception_handler(DescriptorExhaustionLog())
        await server.serve(sockets=[listener])

    asyncio.run(serve())
    return 0 if server.started else 1


def _report_policy(
    log: logging.Logger, path: Path, policy: Policy, store: QueueStore, signing: PolicySigning | None
) -> None:
    """What `serve` loaded, one line each, and what would make it wrong silently: no `[default]`,
    a listed reviewer no token is named for, approval by policy where it cannot sign."""
    from fnmatch import fnmatchcase

    log.info("decision policy: %s (sha256 %s)", path, policy.sha256[:12])
    for line in policy.describe():
        log.info("policy: %s", line)
    if not policy.has_default:
        log.warning(
            "policy: %s has no [default]: a plan of no listed environment needs 1 approval from "
            "any reviewer, "
            "unsigned; write [default] to say so",
            path,
        )
    reviewers = [
        token.name.casefold()
        for token in store.list_tokens()
        if token.role == "reviewer" and token.revoked_at is None
    ]
    for pattern, where in policy.listed_reviewers():
        if not any(fnmatchcase(name, pattern.casefold()) for name in reviewers):
            log.warning("policy: %s lists reviewer %r, but no reviewer token has that name", where, pattern)
    if signing is None and any(rule.approve for rule in policy.rules):
        signed = [
            e.name
            for e in (policy.default, *policy.environments.values())
            if e.allow_policy_approval and e.requirement.signatures
        ]
        if signed:
            log.warning(
                "policy: approvals by policy in %s need signatures, and no --policy-key was given: "
                "a human decides there",
                ", ".join(signed),
            )
    changed = store.reevaluate_pending()
    if changed:
        log.info("policy: %d pending proposals evaluated again under this policy", changed)


def run_token_create(args: argparse.Namespace) -> int:
    from reviewer.service.auth import hash_token, mint_token
    from reviewer.service.errors import DatabaseUnusable, ServiceError
    from reviewer.signing.sshsig import PublicKey, SigningError

    if args.ssh_key and args.role != "reviewer":
        print("reviewer token create: --ssh-key is for reviewers: their keys sign decisions", file=sys.stderr)
        return 2
    try:
        keys = [(PublicKey.from_file(path), _key_comment(path)) for path in args.ssh_key]
    except SigningError as error:
        print(f"reviewer token create: {error}; no token was made", file=sys.stderr)
        return 2
    token = mint_token()
    try:
        store = _store(args)
        try:
            expires_at = None if args.expires_in is None else store.clock() + args.expires_in
            store.create_token(args.name, args.role, hash_token(token), expires_at)
            for key, comment in keys:
                store.add_ssh_key(args.name, key, comment)
        finally:
            store.close()
    except (DatabaseUnusable, ServiceError) as error:
        return _refusal("token create", error.message)
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
        store = _store(args)
        try:
            store.add_ssh_key(args.name, key, _key_comment(args.key_file))
        finally:
            store.close()
    except (Conflict, DatabaseUnusable) as error:
        return _refusal("keys add", error.message)
    print(f"registered {key.key_type} {key.fingerprint} for {args.name}", file=sys.stderr)
    return 0


def run_keys_remove(args: argparse.Namespace) -> int:
    from reviewer.service.errors import DatabaseUnusable

    try:
        store = _store(args)
        try:
            removed = store.remove_ssh_key(args.name, args.fingerprint)
        finally:
            store.close()
    except DatabaseUnusable as error:
        return _refusal("keys remove", error.message)
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
        store = _store(args)
        try:
            keys = store.list_ssh_keys(args.name)
        finally:
            store.close()
    except DatabaseUnusable as error:
        return _refusal("keys list", error.message)
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
        store = _store(args)
        try:
            tokens = store.list_tokens()
        finally:
            store.close()
    except DatabaseUnusable as error:
        return _refusal("token list", error.message)
    now = datetime.now(UTC)
    for token in tokens:
        status = f"revoked {token.revoked_at:%Y-%m-%d %H:%M}" if token.revoked_at else "active"
        if token.revoked_at is None and token.expires_at is not None:
            status = (
                f"{'expired' if token.expires_at <= now else 'expires'} {token.expires_at:%Y-%m-%d %H:%M}"
            )
        if token.revoked_at is None and token.previous_valid_until and token.previous_valid_until > now:
            status += f", rotated: the old token works until {token.previous_valid_until:%Y-%m-%d %H:%M}"
        # Names made before the name rules may hold anything: shown with hidden characters escaped.
        print(f"{safe_text(token.name)}\t{token.role}\tcreated {token.created_at:%Y-%m-%d %H:%M}\t{status}")
    return 0


def run_token_revoke(args: argparse.Namespace) -> int:
    from reviewer.plan.sanitize import safe_text
    from reviewer.service.errors import DatabaseUnusable

    try:
        store = _store(args)
        try:
            revoked = store.revoke_token(args.name)
        finally:
            store.close()
    except DatabaseUnusable as error:
        return _refusal("token revoke", error.message)
    if not revoked:
        return _refusal("token revoke", f"no active token named {safe_text(args.name)!r}")
    print(f"revoked {safe_text(args.name)}", file=sys.stderr)
    return 0


def run_notify_list(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from reviewer.service.errors import DatabaseUnusable

    def when(seconds: float | None) -> str:
        return "-" if seconds is None else f"{datetime.fromtimestamp(seconds, UTC):%Y-%m-%d %H:%M:%S}"

    try:
        store = _store(args)
        try:
            deliveries = store.list_deliveries(args.limit)
        finally:
            store.close()
    except DatabaseUnusable as error:
        return _refusal("notify list", error.message)
    for delivery in deliveries:
        pending_note = (
            f"next {when(delivery.next_attempt_at)}"
            if delivery.state == "pending"
            else when(delivery.finished_at)
        )
        print(
            f"{delivery.event_id}\t{delivery.event}\t{delivery.proposal_id}\t{delivery.target}\t"
            f"{delivery.state}\t{delivery.attempts} attempts\t{pending_note}\t{delivery.last_error or ''}"
        )
    return 0


def run_db_upgrade(args: argparse.Namespace) -> int:
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.service.log_format import configure_logging

    configure_logging("text")
    try:
        store = _store(args, migrate=True)
        try:
            version = store.schema_version()
        finally:
            store.close()
    except DatabaseUnusable as error:
        return _refusal("db upgrade", error.message)
    if store.upgraded_from is None:
        print(
            f"{store.location} holds queue schema version {version}, this release's: nothing to do",
            file=sys.stderr,
        )
    return 0


def run_db_backup(args: argparse.Namespace) -> int:
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.service.store.sqlite import SQLiteStore

    try:
        store = _store(args)
    except DatabaseUnusable as error:
        return _refusal("db backup", error.message)
    try:
        if not isinstance(store, SQLiteStore):
            return _refusal(
                "db backup", "a PostgreSQL queue is backed up with pg_dump (see docs/operating.md)"
            )
        version = store.schema_version()
        store.backup(args.path)
    except FileExistsError:
        return _refusal("db backup", f"{args.path} exists; name a new file")
    except OSError as error:
        return _refusal("db backup", f"cannot write {args.path}: {error.strerror}")
    finally:
        store.close()
    print(f"backed up {store.location} (queue schema version {version}) to {args.path}", file=sys.stderr)
    return 0


def run_token_rotate(args: argparse.Namespace) -> int:
    from reviewer.plan.sanitize import safe_text
    from reviewer.service.auth import hash_token, mint_token
    from reviewer.service.errors import DatabaseUnusable

    token = mint_token()
    try:
        store = _store(args)
        try:
            expires_at = None if args.expires_in is None else store.clock() + args.expires_in
            rotated = store.rotate_token(args.name, hash_token(token), args.grace, expires_at)
        finally:
            store.close()
    except DatabaseUnusable as error:
        return _refusal("token rotate", error.message)
    if not rotated:
        return _refusal("token rotate", f"no active token named {safe_text(args.name)!r}")
    print(token)
    print(f"rotated {safe_text(args.name)}: the old token works {args.grace:g} s more", file=sys.stderr)
    return 0
