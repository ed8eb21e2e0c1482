"""A plan recorded and not yet submitted, kept on disk: a host that starts a server per call (the
Inspector's command line) or reloads its servers starts a new gate, which picks the calls up.

One file per upstream and queue, under the user's state directory (`$XDG_STATE_HOME/reviewer/mcp-gate`,
else `~/.local/state/reviewer/mcp-gate`), readable by the user alone (0600 in a 0700 directory),
rewritten whole after each recorded call and cleared of a gate's calls once it submits its plan. It
holds each call's tool and arguments as the host sent them (what the proposal will show anyway),
never a token.

Two gates for one upstream and queue may run at once (a host that starts the next before the last has
stopped): each call in the file names the gate that keeps it, every change is made under an
exclusive `flock` of a lock file beside it (read, change, replace), and a gate keeps a lock of its
own while it lives, so a new gate picks up only the calls of gates that ended and a gate's
submission clears its own calls alone.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import os
import secrets
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Final

from reviewer import json_text
from reviewer.private_files import private_folder, write_private

FORMAT: Final = "reviewer.mcp-gate.recording/v1"


class RecordingUnreadable(Exception):
    """The file is there and is not a recording this release wrote."""


def state_directory(environ: dict[str, str] | None = None) -> Path:
    environ = dict(os.environ) if environ is None else environ
    base = environ.get("XDG_STATE_HOME") or str(Path(environ.get("HOME") or Path.home()) / ".local/state")
    return Path(base) / "reviewer" / "mcp-gate"


@dataclass(frozen=True)
class RecordedCall:
    tool: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class RecordingFile:
    """Where the plans recorded for one upstream through one queue wait to be submitted; one value
    per gate (`of`), which names the calls it keeps in the file."""

    path: Path
    owner: str = field(default_factory=lambda: secrets.token_hex(8), compare=False)
    """The gate's name in the file, and of the lock it holds while it lives."""
    _alive: list[IO[bytes]] = field(default_factory=list, compare=False, repr=False)

    @classmethod
    def of(cls, queue_url: str, upstream: str, directory: Path | None = None) -> RecordingFile:
        key = hashlib.sha256(f"{queue_url.rstrip('/')}\0{upstream}".encode()).hexdigest()[:32]
        return cls((directory or state_directory()) / f"{key}.json")

    def load(self) -> list[RecordedCall]:
        """This gate's calls; a gate that has none yet takes the calls of one earlier gate that has
        ended (the oldest), now kept by this gate; none when there is no file. A live gate's calls
        stay its own, and two ended gates' plans are never joined into one: a placeholder (`<id from
        call 1>`) names a call of its own plan, which joining would renumber."""
        if not self.path.parent.is_dir():
            return []
        with self._locked():
            document = self._read()
            kept = [call for call in document["calls"] if call.get("owner") == self.owner]
            taken = [call for call in document["calls"] if call.get("owner") != self.owner]
            ended = next((call.get("owner") for call in taken if not self._lives(call.get("owner"))), None)
            free = [call for call in taken if call.get("owner") == ended] if not kept and ended else []
            if free:
                for call in free:
                    call["owner"] = self.owner
                self._write({**document, "calls": [*taken, *kept]})
        try:
            return [RecordedCall(str(call["tool"]), dict(call["arguments"])) for call in [*kept, *free]]
        except (KeyError, TypeError, ValueError):
            raise RecordingUnreadable(f"{self.path} holds a call without its tool or arguments") from None

    def save(self, calls: list[RecordedCall], upstream: str) -> None:
        """Write this gate's calls in place of those it kept, the other gates' calls as they are
        (0600, replaced atomically: a gate killed meanwhile leaves the previous file whole)."""
        private_folder(self.path.parent)
        with self._locked():
            try:
                document = self._read()
            except RecordingUnreadable:  # kept beside it, never overwritten: it may hold a gate's plan
                self.path.replace(self.unreadable_path)
                document = {"format": FORMAT, "calls": []}
            others = [call for call in document["calls"] if call.get("owner") != self.owner]
            mine = [{"tool": call.tool, "arguments": call.arguments, "owner": self.owner} for call in calls]
            self._write({"format": FORMAT, "upstream": upstream, "calls": [*others, *mine]})

    def remove(self) -> None:
        """Clear this gate's calls (its plan was submitted); the file goes with the last call."""
        if not self.path.parent.is_dir():
            return
        with self._locked():
            try:
                document = self._read()
            except RecordingUnreadable:
                return
            others = [call for call in document["calls"] if call.get("owner") != self.owner]
            if others:
                self._write({**document, "calls": others})
            else:  # nothing left to keep: no file stays behind, the lock's included
                self.path.unlink(missing_ok=True)
                self._lock_path.unlink(missing_ok=True)
        for held in self._alive:
            held.close()
        self._alive.clear()
        self._live_path(self.owner).unlink(missing_ok=True)

    @property
    def unreadable_path(self) -> Path:
        """Where a recording this release cannot read is moved when a gate next records a call."""
        return self.path.with_name(f"{self.path.name}.unreadable")

    @property
    def _lock_path(self) -> Path:
        return self.path.with_name(f".{self.path.name}.lock")

    @contextlib.contextmanager
    def _locked(self) -> Iterator[None]:
        """An exclusive lock of the lock file, which the last gate to clear its calls removes: a lock
        taken on a file removed meanwhile is let go and taken again on the one in its place."""
        while True:
            descriptor = os.open(self._lock_path, os.O_RDWR | os.O_CREAT, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                if os.path.exists(self._lock_path) and os.path.samestat(
                    os.fstat(descriptor), os.stat(self._lock_path)
                ):
                    yield
                    return
            finally:
                os.close(descriptor)  # releases the lock

    def _read(self) -> dict[str, Any]:
        try:
            document = json_text.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {"format": FORMAT, "calls": []}
        except (OSError, ValueError) as error:
            raise RecordingUnreadable(f"{self.path} cannot be read as a recording: {error}") from None
        calls = document.get("calls") if isinstance(document, dict) else None
        if not isinstance(calls, list) or document.get("format") != FORMAT:
            raise RecordingUnreadable(f"{self.path} is not a recording this release wrote")
        if not all(isinstance(call, dict) for call in calls):
            raise RecordingUnreadable(f"{self.path} holds a call without its tool or arguments")
        return {**document, "calls": calls}

    def _write(self, document: dict[str, Any]) -> None:
        """Replace the file (under the lock); this gate holds its own lock from its first write on."""
        if not self._alive:
            # Held while the gate lives; the user's alone, as every file here.
            held = os.fdopen(os.open(self._live_path(self.owner), os.O_WRONLY | os.O_CREAT, 0o600), "wb")
            fcntl.flock(held, fcntl.LOCK_EX)
            self._alive.append(held)
        write_private(self.path, json.dumps(document, ensure_ascii=False).encode())

    def _live_path(self, owner: str) -> Path:
        return self.path.with_name(f".{self.path.name}.{owner}.live")

    def _lives(self, owner: object) -> bool:
        """Whether the gate `owner` still runs: it holds its lock (a gate killed lets go of it)."""
        if not isinstance(owner, str) or not owner.isalnum():
            return False  # a call of a release that named no gate, or a name that is no lock's
        try:
            descriptor = os.open(self._live_path(owner), os.O_RDWR)
        except FileNotFoundError:
            return False
        try:
            fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        finally:
            os.close(descriptor)
        self._live_path(owner).unlink(missing_ok=True)
        return False
