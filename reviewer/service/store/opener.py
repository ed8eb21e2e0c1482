"""`--db` to a store: a `postgresql://` URL opens PostgreSQL, anything else is an SQLite file path."""

from __future__ import annotations

from pathlib import Path

from reviewer.policy.file import Policy
from reviewer.queue.config import default_db_path
from reviewer.service.errors import DatabaseUnusable
from reviewer.service.store import DEFAULT_CLAIM_LEASE, Clock, QueueStore, StoreSettings

POSTGRES_SCHEMES = ("postgresql://", "postgres://")


def is_postgres_url(db: str) -> bool:
    return db.startswith(POSTGRES_SCHEMES)


def open_store(
    db: str | Path | None,
    *,
    clock: Clock,
    pending_ttl: float,
    approval_ttl: float,
    claim_lease: float = DEFAULT_CLAIM_LEASE,
    policy: Policy | None = None,
    create: bool,
    migrate: bool = True,
) -> QueueStore:
    """The store `--db` names; `create=False` refuses a database that holds no queue yet, and
    `migrate=False` one of an older schema (`reviewer.service.store.migrations`).

    Raises `DatabaseUnusable` (one line for the operator) for a missing, unreachable or foreign database.
    """
    settings = StoreSettings(clock, pending_ttl, approval_ttl, claim_lease, policy)
    target = str(db) if db is not None else str(default_db_path())
    if is_postgres_url(target):
        try:
            from reviewer.service.store.postgres import PostgresStore
        except ImportError:
            raise DatabaseUnusable(
                "a postgresql:// --db needs psycopg: pip install 'reviewer[postgres]'"
            ) from None

        return PostgresStore(target, settings, create=create, migrate=migrate)
    from reviewer.service.store.sqlite import SQLiteStore

    return SQLiteStore(target, settings, create=create, migrate=migrate)
