"""Schema migrations: numbered steps, the versions a release accepts, and the SQLite backup before them.

Each step brings a database from `version - 1` to `version`; a backend keeps its own SQL for each
(`store.sqlite.MIGRATIONS`, `store.postgres.MIGRATIONS`) and runs every step a database needs in one
transaction, so a failed step leaves the database as it was. Before the first step on SQLite the
file is copied with SQLite's online backup API next to it: that copy is a database the previous
release serves, the way back. A database newer than this release, or older than the oldest step,
is refused naming both versions; `serve --no-migrate` refuses any database that would need a step.
"""

from __future__ import annotations

import logging
import os
import sqlite3
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from reviewer.service.errors import DatabaseUnusable
from reviewer.service.store import SCHEMA_VERSION

log = logging.getLogger("reviewer.service.migrations")

STEPS: Final = {
    3: "reviewers' SSH keys and signed decisions in the trail",
    4: "the notifications' outbox",
    5: "metrics tokens, token expiry, and rotation (the replaced token valid for a grace period)",
    6: "the decision request_changes, and its trail event changes_requested",
    7: "reviewers signed in by an OpenID provider, break-glass tokens, the deciding identity in the trail",
    8: "the trail's Merkle log (every event a leaf, checkpoints signed with --trail-key), and auditor tokens",
}
"""What each numbered step adds; the backends hold its SQL under the same number."""


@dataclass(frozen=True)
class Upgrade:
    """The steps a database of version `found` needs to reach this release's version."""

    location: str
    found: int

    @property
    def steps(self) -> list[int]:
        return list(range(self.found + 1, SCHEMA_VERSION + 1))

    def describe(self) -> str:
        return "; ".join(f"{step}: {STEPS[step]}" for step in self.steps)


def plan_upgrade(location: str, found: int, *, oldest: int, migrate: bool) -> Upgrade | None:
    """The upgrade a database of schema version `found` needs, None when it is this release's.

    Raises `DatabaseUnusable` for a version this release cannot or may not bring up to date.
    """
    if found == SCHEMA_VERSION:
        return None
    if found > SCHEMA_VERSION:
        raise DatabaseUnusable(
            f"{location} holds queue schema version {found}, newer than version {SCHEMA_VERSION} that this "
            f"release writes; run a release that writes version {found}, or restore the backup taken "
            "before the upgrade"
        )
    if found < oldest:
        raise DatabaseUnusable(
            f"{location} holds queue schema version {found}, and this release upgrades from version "
            f"{oldest} up to {SCHEMA_VERSION}; upgrade it with an earlier release first"
        )
    if not migrate:
        raise DatabaseUnusable(
            f"{location} holds queue schema version {found}, and this release writes version "
            f"{SCHEMA_VERSION}; run `reviewer db upgrade --db ...` (it backs an SQLite file up first), "
            "or start `serve` without --no-migrate"
        )
    return Upgrade(location, found)


def backup_before_upgrade(source: sqlite3.Connection, database: Path, version: int, now: float) -> Path:
    """A backup next to the database, `queue.sqlite3.v4-20261202T015500Z.backup` (`-2` and on after
    the stamp when another process starting at the same second took that name); its path."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    for number in range(1, 100):
        suffix = "" if number == 1 else f"-{number}"
        destination = database.with_name(f"{database.name}.v{version}-{stamp}{suffix}.backup")
        try:
            backup_sqlite(source, destination)
        except FileExistsError:
            continue
        return destination
    raise DatabaseUnusable(f"cannot name a backup of {database}: too many backups of this second")


def backup_sqlite(source: sqlite3.Connection, destination: Path) -> None:
    """Copy the open database to `destination` (created 0600, never overwritten) with the online
    backup API: a consistent copy even while other processes write."""
    descriptor = os.open(destination, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    os.close(descriptor)
    target = sqlite3.connect(destination)
    try:
        source.backup(target)
    finally:
        target.close()


def sqlite_statements(script: str) -> Iterator[str]:
    """A script's statements one by one (a trigger's body holds `;` too), to run inside a
    transaction: `executescript` would commit it first."""
    statement = ""
    for piece in script.split(";"):
        statement += piece + ";"
        if sqlite3.complete_statement(statement):
            if statement.strip(" \n;"):
                yield statement
            statement = ""


def log_upgrade(upgrade: Upgrade, backup: Path | None) -> None:
    where = f"; the version-{upgrade.found} database was backed up to {backup}" if backup else ""
    log.info(
        "migrating %s from queue schema version %d to %d (%s)%s",
        upgrade.location,
        upgrade.found,
        SCHEMA_VERSION,
        upgrade.describe(),
        where,
    )


def log_upgraded(upgrade: Upgrade) -> None:
    log.info("migrated %s to queue schema version %d", upgrade.location, SCHEMA_VERSION)
