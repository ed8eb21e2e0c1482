"""A plan recorded and not yet submitted, kept on disk: a host that starts a server per call (the
Inspector's command line) or reloads its servers starts a new gate, which picks the calls up.

One file per upstream and queue, under the user's state directory (`$XDG_STATE_HOME/reviewer/mcp-gate`,
else `~/.local/state/reviewer/mcp-gate`), readable by the user alone (0600 in a 0700 directory),
rewritten whole after each recorded call and removed once the plan is submitted. It holds each call's
tool and arguments as the host sent them (what the proposal will show anyway), never a token.
"""

from __future__ import annotations

import hashlib
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

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
    """Where the plan recorded for one upstream through one queue waits to be submitted."""

    path: Path

    @classmethod
    def of(cls, queue_url: str, upstream: str, directory: Path | None = None) -> RecordingFile:
        key = hashlib.sha256(f"{queue_url.rstrip('/')}\0{upstream}".encode()).hexdigest()[:32]
        return cls((directory or state_directory()) / f"{key}.json")

    def load(self) -> list[RecordedCall]:
        """The calls recorded by an earlier gate, oldest first; none when there is no file."""
        try:
            document = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return []
        except (OSError, ValueError) as error:
            raise RecordingUnreadable(f"{self.path} cannot be read as a recording: {error}") from None
        calls = document.get("calls") if isinstance(document, dict) else None
        if not isinstance(calls, list) or document.get("format") != FORMAT:
            raise RecordingUnreadable(f"{self.path} is not a recording this release wrote")
        try:
            return [RecordedCall(str(call["tool"]), dict(call["arguments"])) for call in calls]
        except (KeyError, TypeError, ValueError):
            raise RecordingUnreadable(f"{self.path} holds a call without its tool or arguments") from None

    def save(self, calls: list[RecordedCall], upstream: str) -> None:
        """Write the whole recording (0600, replaced atomically: a gate killed meanwhile leaves the
        previous one whole)."""
        self.path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
        document = {
            "format": FORMAT,
            "upstream": upstream,
            "calls": [{"tool": call.tool, "arguments": call.arguments} for call in calls],
        }
        temporary = self.path.with_name(f".{self.path.name}.{os.getpid()}")
        descriptor = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(descriptor, "w") as written:
            json.dump(document, written, ensure_ascii=False)
            written.flush()
            os.fsync(written.fileno())
        os.replace(temporary, self.path)

    def remove(self) -> None:
        self.path.unlink(missing_ok=True)
