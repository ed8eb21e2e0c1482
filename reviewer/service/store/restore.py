"""`reviewer db restore` on SQLite: a backup put in place of the queue's file, reopening nothing.

A backup is the queue as it was. Put back as it is, it would undo what happened since: a proposal
approved and run after the backup would be pending and approvable again, a token revoked since
valid again, a notification delivered since sent again. So the file being replaced is read first
(when it still can be), and what happened after the backup is carried into the restored copy:

- each proposal that moved on since (a revision, a decision, a claim or a run) and is still open in
  the copy is **closed by the restore**: a pending one and an unclaimed approval expire at the
  restore's time, a claim's lease ends (its outcome is unknown), with a reason saying so, so the
  waiting agent is told and may submit again; when the replaced file cannot be read, every open
  proposal of the copy is closed, since any may have moved on;
- tokens keep what they became since: revoked, expired, rotated (their secrets, by row);
- SSH keys removed since stay removed;
- notifications delivered or given up on since are not sent again.

Proposals submitted after the backup are not in it; `Carried` names them for the operator.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import closing, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from reviewer.plan.sanitize import safe_text
from reviewer.service import rules
from reviewer.service.errors import DatabaseUnusable
from reviewer.service.store.migrations import backup_sqlite
from reviewer.service.store.proposals import CLOSE, CLOSED_BY_RESTORE, OPEN_STATES

FINISHED_COLUMNS: Final = ("state", "attempts", "last_error", "finished_at")
"""What a finished delivery carries over to a restored backup."""
TOKEN_COLUMNS: Final = (
    "token_sha256",
    "revoked_at",
    "expires_at",
    "previous_sha256",
    "previous_expires_at",
    "session_ends_at",
)
"""What a token became since the backup (those of them both files hold)."""
MOVES: Final = ("latest_revision", "decision", "decided_at", "claim_id", "executed_at")
"""The columns of a proposal's row that change when it moves on (every schema since 2 has them)."""


@dataclass
class Carried:
    """What a restore carried over from the replaced file, for the operator."""

    version: int
    """The backup's schema version (`serve` brings it up to date)."""
    replaced: Path | None = None
    """Where the replaced file was kept (None when there was none)."""
    replaced_read: bool = True
    """False when there was no file to replace, or it could not be read: nothing says what moved on."""
    deliveries: int = 0
    closed: list[str] = field(default_factory=list)
    """Proposals closed by the restore."""
    missing: list[str] = field(default_factory=list)
    """Proposals the replaced file holds and the backup does not (submitted after it)."""
    tokens: int = 0
    keys: int = 0

    def lines(self) -> list[str]:
        said = []
        if not self.replaced_read:
            why = "could not be read" if self.replaced is not None else "did not exist"
            said.append(f"the file replaced {why}: every proposal open in the backup is closed")
        said.append(counted(self.closed, "proposal(s) closed by the restore (decide them again)"))
        if self.missing:
            said.append(counted(self.missing, "proposal(s) submitted after the backup are not in it"))
        said.append(f"{self.tokens} token(s) revoked, expired or rotated since stay so")
        said.append(f"{self.keys} SSH key(s) removed since stay removed")
        said.append(f"{self.deliveries} notification(s) delivered since are not sent again")
        return said


def counted(ids: list[str], what: str) -> str:
    """`N what: id, id, ...` for the operator: ten ids at most, each escaped (a file being replaced
    may hold anything)."""
    shown = ", ".join(safe_text(id_) for id_ in ids[:10]) + (
        f" and {len(ids) - 10} more" if len(ids) > 10 else ""
    )
    return f"{len(ids)} {what}" + (f": {shown}" if ids else "")


def restore_sqlite(backup: Path, database: Path, now: float) -> Carried:
    """Put `backup` in place of `database` (stopped), carrying over what happened since (above).
    The replaced file is kept next to it (`.replaced-STAMP`)."""
    stamp = datetime.fromtimestamp(now, UTC).strftime("%Y%m%dT%H%M%SZ")
    readable = database.exists() and _fold_wal(database)
    staged = database.with_name(f".{database.name}.restoring-{stamp}")
    with closing(sqlite3.connect(f"file:{backup}?mode=ro", uri=True)) as source:
        try:
            backup_sqlite(source, staged)
        except sqlite3.Error as error:
            staged.unlink(missing_ok=True)
            raise DatabaseUnusable(f"{backup} cannot be read as a queue database: {error}") from None
    try:
        carried = _carry_over(staged, database if readable else None, now)
    except BaseException:
        staged.unlink(missing_ok=True)
        raise
    carried.replaced_read = readable
    if database.exists():
        carried.replaced = database.with_name(f"{database.name}.replaced-{stamp}")
        os.replace(database, carried.replaced)
    os.replace(staged, database)
    for leftover in ("-wal", "-shm"):
        database.with_name(database.name + leftover).unlink(missing_ok=True)
    return carried


def _fold_wal(database: Path) -> bool:
    """Fold the replaced file's write-ahead log in, so what it finished is read whole; False when it
    cannot be read (damaged). Refused while another process has it open."""
    try:
        with closing(sqlite3.connect(database)) as current:
            busy = current.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()[0]
            current.execute("SELECT count(*) FROM proposals").fetchone()
    except sqlite3.Error:
        return False
    if busy:
        raise DatabaseUnusable(f"{database} is in use: stop every replica before restoring")
    return True


def _carry_over(restored: Path, replaced: Path | None, now: float) -> Carried:
    with closing(sqlite3.connect(restored)) as target:
        target.row_factory = sqlite3.Row
        carried = Carried(int(target.execute("PRAGMA user_version").fetchone()[0]))
        with target:  # one transaction
            if replaced is None:
                carried.closed = _close(target, _open_proposals(target, now), now)
                return carried
            with _read_only(replaced) as current:
                carried.deliveries = _carry_deliveries(target, current)
                moved, carried.missing = _moved_on(target, current)
                carried.closed = _close(target, [p for p in _open_proposals(target, now) if p in moved], now)
                carried.tokens = _carry_tokens(target, current)
                carried.keys = _carry_removed_keys(target, current, now)
        return carried


@contextmanager
def _read_only(path: Path) -> Iterator[sqlite3.Connection]:
    with closing(sqlite3.connect(f"file:{path}?mode=ro", uri=True)) as connection:
        connection.row_factory = sqlite3.Row
        yield connection


def _open_proposals(target: sqlite3.Connection, now: float) -> list[str]:
    rows = target.execute("SELECT * FROM proposals ORDER BY proposal_id").fetchall()
    return [row["proposal_id"] for row in rows if rules.state_of(row, now) in OPEN_STATES]


def _moved_on(target: sqlite3.Connection, current: sqlite3.Connection) -> tuple[set[str], list[str]]:
    """Proposals the replaced file holds in another state than the backup (a revision, a decision,
    a claim or a run since), and those the backup does not hold at all."""
    query = f"SELECT proposal_id, {', '.join(MOVES)} FROM proposals"
    then = {row[0]: tuple(row) for row in target.execute(query)}
    moved, missing = set(), []
    for row in current.execute(query):
        if row[0] not in then:
            missing.append(row[0])
        elif tuple(row) != then[row[0]]:
            moved.add(row[0])
    return moved, sorted(missing)


def _close(target: sqlite3.Connection, proposal_ids: list[str], now: float) -> list[str]:
    for proposal_id in proposal_ids:
        target.execute(CLOSE, {"reason": CLOSED_BY_RESTORE, "now": now, "proposal_id": proposal_id})
    return proposal_ids


def _columns(connection: sqlite3.Connection, table: str) -> set[str]:
    return {row[1] for row in connection.execute(f"PRAGMA table_info({table})")}


def _carry_tokens(target: sqlite3.Connection, current: sqlite3.Connection) -> int:
    """Every token row both files hold takes the replaced file's secrets, expiry and revocation."""
    columns = [c for c in TOKEN_COLUMNS if c in _columns(target, "tokens") & _columns(current, "tokens")]
    listed = ", ".join(columns)
    then = {row["id"]: tuple(row) for row in target.execute(f"SELECT id, {listed} FROM tokens")}
    changed = 0
    for row in current.execute(f"SELECT id, {listed} FROM tokens"):
        if row["id"] in then and then[row["id"]] != tuple(row):
            assignments = ", ".join(f"{column} = ?" for column in columns)
            target.execute(f"UPDATE tokens SET {assignments} WHERE id = ?", (*tuple(row)[1:], row["id"]))
            changed += 1
    return changed


def _carry_removed_keys(target: sqlite3.Connection, current: sqlite3.Connection, now: float) -> int:
    if "ssh_keys" not in _tables(target) or "ssh_keys" not in _tables(current):
        return 0
    removed = [
        (row["removed_at"], row["id"])
        for row in current.execute("SELECT id, removed_at FROM ssh_keys WHERE removed_at IS NOT NULL")
    ]
    return sum(
        target.execute(
            "UPDATE ssh_keys SET removed_at = ? WHERE id = ? AND removed_at IS NULL", values
        ).rowcount
        for values in removed
    )


def _carry_deliveries(target: sqlite3.Connection, current: sqlite3.Connection) -> int:
    """Each notification the replaced file finished that the backup holds as pending is finished
    in the copy too, so the release that serves the backup never sends it again."""
    if "outbox" not in _tables(target) or "outbox" not in _tables(current):
        return 0
    finished = current.execute(
        f"SELECT event_id, target, {', '.join(FINISHED_COLUMNS)} FROM outbox WHERE state <> 'pending'"
    ).fetchall()
    return sum(
        target.execute(
            "UPDATE outbox SET state = ?, attempts = ?, last_error = ?, finished_at = ?, "
            "leased_until = NULL WHERE event_id = ? AND target = ? AND state = 'pending'",
            (*values, event_id, where),
        ).rowcount
        for event_id, where, *values in finished
    )


def _tables(connection: sqlite3.Connection) -> set[str]:
    return {row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
