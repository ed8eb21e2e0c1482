"""`reviewer db upgrade|backup|restore|reopen` and `reviewer notify list`: the queue's database and
its outbox."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from reviewer.service.commands.support import db_option, opened, refusal


def run_notify_list(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from reviewer.service.errors import DatabaseUnusable

    def when(seconds: float | None) -> str:
        return "-" if seconds is None else f"{datetime.fromtimestamp(seconds, UTC):%Y-%m-%d %H:%M:%S}"

    try:
        with opened(args) as store:
            deliveries = store.list_deliveries(args.limit)
    except DatabaseUnusable as error:
        return refusal("notify list", error.message)
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
        with opened(args, migrate=True) as store:
            version = store.schema_version()
    except DatabaseUnusable as error:
        return refusal("db upgrade", error.message)
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
        with opened(args) as store:
            if not isinstance(store, SQLiteStore):
                return refusal(
                    "db backup", "a PostgreSQL queue is backed up with pg_dump (see docs/operating.md)"
                )
            version = store.schema_version()
            try:
                store.backup(args.path)
            except FileExistsError:
                return refusal("db backup", f"{args.path} exists; name a new file")
            except OSError as error:
                return refusal("db backup", f"cannot write {args.path}: {error.strerror}")
    except DatabaseUnusable as error:
        return refusal("db backup", error.message)
    print(f"backed up {store.location} (queue schema version {version}) to {args.path}", file=sys.stderr)
    return 0


def run_db_restore(args: argparse.Namespace) -> int:
    import time
    from pathlib import Path

    from reviewer.queue.config import default_db_path
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.service.store.restore import restore_sqlite

    database = Path(args.db) if args.db else default_db_path()
    if str(database).startswith(("postgresql://", "postgres://")):
        return refusal("db restore", "a PostgreSQL queue is restored with pg_restore (see docs/operating.md)")
    if not args.backup.is_file():
        return refusal("db restore", f"{args.backup} is not a file")
    try:
        carried = restore_sqlite(args.backup, database, time.time())
    except DatabaseUnusable as error:
        return refusal("db restore", error.message)
    except OSError as error:
        return refusal("db restore", f"cannot restore over {database}: {error.strerror}")
    kept = f"; the replaced file is {carried.replaced}" if carried.replaced is not None else ""
    print(
        f"restored {args.backup} (queue schema version {carried.version}) as {database}{kept}",
        file=sys.stderr,
    )
    for line in carried.lines():
        print(f"  {line}", file=sys.stderr)
    return 0


def run_db_reopen(args: argparse.Namespace) -> int:
    """Close what a restored copy left open; for a queue that signs its trail (`--trail-key` or
    `--signed-memory`), remember the copy's log as the one signed from now on."""
    from reviewer.service.errors import DatabaseUnusable
    from reviewer.service.signed_memory import Signed, SignedMemory, default_memory
    from reviewer.service.store.proposals import CLOSED_BY_RESTORE
    from reviewer.service.store.restore import counted
    from reviewer.trail import checkpoint as checkpoints

    memory = None
    try:
        if args.signed_memory is not None:
            memory = SignedMemory(args.signed_memory)
        elif args.trail_key is not None:
            key = checkpoints.load_private_key(args.trail_key)
            memory = SignedMemory(default_memory(checkpoints.openssh_public(key.public_key())))
    except checkpoints.CheckpointError as error:
        return refusal("db reopen", f"--trail-key: {error}")
    try:
        with opened(args) as store:
            closed = store.close_open_proposals(CLOSED_BY_RESTORE)
            head = store.trail_head()
            if memory is not None:
                memory.replace(Signed(head.size, head.root))
            location = store.location
    except DatabaseUnusable as error:
        return refusal("db reopen", error.message)
    remembered = (
        f"; its trail of {head.size} entries is the one remembered in {memory.path}"
        if memory is not None
        else ""
    )
    print(
        f"reopened {location}: "
        + counted(closed, "proposal(s) it left open are closed (decide them again)")
        + remembered,
        file=sys.stderr,
    )
    return 0


def register_notify(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    """Add `notify list` to the `reviewer` command line."""
    notify = subparsers.add_parser(
        "notify", help="the queue's notifications", description="The notifications the queue delivered."
    )
    notify_commands = notify.add_subparsers(title="notify commands", metavar="COMMAND", required=True)
    deliveries = notify_commands.add_parser("list", help="list the newest deliveries and their state")
    deliveries.add_argument("--limit", type=int, default=50, help="how many (default: 50)")
    db_option(deliveries)
    deliveries.set_defaults(func=run_notify_list)


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
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
    db_option(upgrade)
    upgrade.set_defaults(func=run_db_upgrade)
    backup = db_commands.add_parser(
        "backup",
        help="copy an SQLite queue to PATH while it serves (PostgreSQL: pg_dump, see docs/operating.md)",
    )
    backup.add_argument("path", type=Path, metavar="PATH")
    db_option(backup)
    backup.set_defaults(func=run_db_backup)
    restore = db_commands.add_parser(
        "restore",
        help="put an SQLite backup in place of the queue (a rollback; stop every replica first); "
        "notifications delivered since stay delivered",
    )
    restore.add_argument("backup", type=Path, metavar="BACKUP")
    db_option(restore)
    restore.set_defaults(func=run_db_restore)
    reopen = db_commands.add_parser(
        "reopen",
        help="serve a database restored from an older copy: close every proposal it left open and, "
        "for a queue that signs its trail, remember the copy's log as the one signed (stop every "
        "replica first)",
    )
    db_option(reopen)
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
