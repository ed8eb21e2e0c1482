"""The executor's own ledger of the signed approvals it claimed: one runs once, whatever the queue says.

An executor that checks signatures does not trust the queue to say whether an approval was used: the
queue's database may be in other hands, and its append-only triggers can be dropped. So it keeps, in
a local file it names, one JSON line per approval it claimed (proposal, revision, digest), written and
flushed to disk (`fsync`) before the run's first write, and it refuses an approval the file already
holds. The file is locked (`flock`) while it is read and appended to, so two runs on one host cannot
both find an approval absent. A last line cut short by a crash is ignored: its `fsync` never
returned, so no write of that run was sent. Any other line that does not read is an error: the
executor refuses to run rather than guess.
"""

from __future__ import annotations

import fcntl
import json
import os
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import platformdirs

from reviewer import json_text
from reviewer.agent.errors import AgentError, NotApproved
from reviewer.queue.config import APP_NAME


def default_ledger() -> Path:
    """`~/.local/state/reviewer/ledger.jsonl` (XDG_STATE_HOME is honoured): the one ledger of this
    user's executors on this host, `reviewer run` and `mcp-gate` alike, so an approval one of them ran
    is refused by the other too."""
    return Path(platformdirs.user_state_dir(APP_NAME, appauthor=False)) / "ledger.jsonl"


class LedgerError(AgentError):
    """The ledger cannot be read or written: nothing runs until it can."""


class AlreadyRun(NotApproved):
    """This executor's ledger holds the approval: it claimed it before, so it never runs it again."""

    def __init__(self, proposal_id: str, revision: int, ledger: Path, claimed_at: str) -> None:
        self.ledger = ledger
        self.claimed_at = claimed_at
        super().__init__(
            proposal_id,
            revision,
            f"this executor's ledger ({ledger}) records that it claimed exactly this signed approval at "
            f"{claimed_at}; an approval runs once, whatever the queue says (a queue that offers it again "
            "has lost or rewritten its record: tell its operator)",
        )


@dataclass(frozen=True)
class LedgerEntry:
    proposal_id: str
    revision: int
    plan_sha256: str
    claimed_at: str

    @property
    def approval(self) -> tuple[str, int, str]:
        return (self.proposal_id, self.revision, self.plan_sha256)


class Ledger:
    """The approvals this executor claimed, in the file at `path` (created, mode 0600, on first use).

    One file per executor (or per host of executors): two hosts sharing a network file system should
    each name their own, since `flock` over NFS is not to be relied on.
    """

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)

    def entries(self) -> list[LedgerEntry]:
        """Every approval recorded so far, oldest first."""
        try:
            with self.path.open("rb") as file:
                fcntl.flock(file, fcntl.LOCK_SH)
                return _entries(file.read(), self.path)
        except FileNotFoundError:
            return []
        except OSError as error:
            raise LedgerError(f"cannot read the executor's ledger {self.path}: {error}") from error

    def require_unclaimed(self, proposal_id: str, revision: int, plan_sha256: str) -> None:
        """Raise `AlreadyRun` if the ledger holds this approval."""
        for entry in self.entries():
            if entry.approval == (proposal_id, revision, plan_sha256):
                raise AlreadyRun(proposal_id, revision, self.path, entry.claimed_at)

    def claim(self, proposal_id: str, revision: int, plan_sha256: str) -> LedgerEntry:
        """Record the approval, on disk, before anything of it runs; `AlreadyRun` if it is there."""
        created = not self.path.exists()
        try:
            descriptor = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o600)
        except OSError as error:
            raise LedgerError(f"cannot open the executor's ledger {self.path}: {error}") from error
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX)
            content = _read_all(descriptor)
            for entry in _entries(content, self.path):
                if entry.approval == (proposal_id, revision, plan_sha256):
                    raise AlreadyRun(proposal_id, revision, self.path, entry.claimed_at)
            entry = LedgerEntry(proposal_id, revision, plan_sha256, datetime.now(UTC).isoformat())
            line = json.dumps(vars(entry), sort_keys=True).encode() + b"\n"
            if content and not content.endswith(b"\n"):  # drop a torn last line: nothing of it ran
                os.ftruncate(descriptor, content.rfind(b"\n") + 1)
            os.write(descriptor, line)
            os.fsync(descriptor)
        except OSError as error:
            raise LedgerError(f"cannot write the executor's ledger {self.path}: {error}") from error
        finally:
            os.close(descriptor)
        if created:
            _sync_directory(self.path.parent)
        return entry


def _read_all(descriptor: int) -> bytes:
    chunks = []
    offset = 0
    while chunk := os.pread(descriptor, 1 << 20, offset):
        chunks.append(chunk)
        offset += len(chunk)
    return b"".join(chunks)


def _entries(content: bytes, path: Path) -> list[LedgerEntry]:
    lines = content.split(b"\n")
    if lines and lines[-1]:
        lines = lines[:-1]  # cut short by a crash before its fsync returned: nothing of it ran
    entries = []
    for number, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            fields = json_text.loads(raw)
            entries.append(
                LedgerEntry(
                    str(fields["proposal_id"]),
                    int(fields["revision"]),
                    str(fields["plan_sha256"]),
                    str(fields["claimed_at"]),
                )
            )
        except (ValueError, KeyError, TypeError) as error:
            raise LedgerError(
                f"the executor's ledger {path} line {number} does not read ({error}); nothing runs until "
                "it is repaired, since it may record an approval that already ran"
            ) from error
    return entries


def _sync_directory(directory: Path) -> None:
    """A new file's name is durable only once its directory is flushed too."""
    try:
        descriptor = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)
