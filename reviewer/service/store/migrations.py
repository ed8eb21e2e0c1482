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
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from reviewer.service.errors import DatabaseUnusable
from reviewer.service.store.base import SCHEMA_VERSION

log = logging.getLogger("reviewer.service.store.migrations")

STEPS: Final = {
    3: "reviewers' SSH keys and signed decisions in the trail",
    4: "the notifications' outbox",
    5: "metrics tokens, token expiry, and rotation (the replaced token valid for a grace period)",
    6: "the decision request_changes, and its trail event changes_requested",
    7: "reviewers signed in by an OpenID provider, break-glass tokens, the deciding identity in the trail",
    8: "the trail's Merkle log (every event a leaf, checkpoints signed with --trail-key), and auditor tokens",
    9: "executors' refusals of approvals (a trail that went backwards, signatures, a ledger), append-only, "
    "and the latest time the queue used",
    10: "reviewers' passkeys (each bound to the sign-in that enrolled it), their one-time enrolment links, "
    "and the key of the review pages' links",
    11: "the end of a reviewer's sign-in and each approval it withdrew, as trail events of their own",
    12: "the reading of each proposal's latest revision (counts, alarms, money), stored for the list",
}
"""What each numbered step adds; the backends hold its SQL under the same number."""

MARKS: Final[dict[int, tuple[tuple[str, str | None], ...]]] = {
    3: (("trail", "statement"), ("trail", "signature"), ("trail", "key_fingerprint"), ("ssh_keys", None)),
    4: (("outbox", None),),
    5: (("tokens", "expires_at"), ("tokens", "previous_sha256"), ("tokens", "previous_expires_at")),
    7: (("tokens", "kind"), ("tokens", "issuer"), ("tokens", "subject"), ("trail", "identity")),
    8: (("trail_log", None),),
    9: (("refusals", None),),
    10: (("passkeys", None), ("passkey_links", None), ("review_link_key", None)),
    12: (("proposals", "summary"),),
}
"""The tables (column None) and columns each step adds, in both backends: what tells a database's
tables from the version number it claims. A step that only widens a CHECK leaves no mark."""

Columns = Callable[[str], "set[str] | None"]
"""A table's column names in the database being migrated, or None when it has no such table."""


def check_before_step(location: str, found: int, step: int, columns: Columns) -> None:
    """Refuse (`DatabaseUnusable`, nothing changed) a database whose tables are not those of version
    `step - 1`: it lacks what an earlier step adds, or already has what this step adds. A step run on
    tables it did not expect rebuilds or copies them wrongly (a tokens table that already had expiry
    times would be copied without them)."""
    claimed = f"{location} says queue schema version {found}"
    for earlier in range(min(MARKS), step + 1):
        for table, column in MARKS.get(earlier, ()):
            names = columns(table)
            present = names is not None and (column is None or column in names)
            what = f"table {table}" if column is None else f"column {table}.{column}"
            if earlier < step and not present:
                raise DatabaseUnusable(
                    f"{claimed}, but it lacks the {what} that step {earlier} adds; its tables are not "
                    "those its version says, so nothing was changed. Restore the backup taken before it "
                    "was last changed"
                )
            if earlier == step and present:
                raise DatabaseUnusable(
                    f"{claimed}, but it already has the {what} that step {step} adds; its version number "
                    "is behind its tables, and the step would rebuild them wrongly, so nothing was "
                    "changed. Restore the backup taken before it was last changed"
                )


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
