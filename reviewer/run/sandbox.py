"""Where COMMAND runs, so that it cannot reach what the gate holds.

The gate holds the API's credential and the agent token; a process of the same user could read them
from the gate's or an ancestor's `/proc/PID/environ` (the shell that exported the credential, a
`timeout` wrapper), from the reviewer's configuration (a reviewer's login token) or data (the queue's
database and keys), from the credential's `file:` or through the agent socket (`SSH_AUTH_SOCK`). So
COMMAND runs in one of these, the first the machine allows:

- `namespaces`: bubblewrap's unprivileged user and PID namespaces. COMMAND sees only its own
  processes (a fresh `/proc`), an empty folder where the reviewer's configuration and data are, an
  empty file where the credential's file and the agent socket are, and holds no capability (so it
  cannot unmount them). It keeps the file system, the network (it reaches the gate on loopback) and
  the user it was started as.
- `another user`: when `reviewer run` is root and no namespace can be made, COMMAND runs as `nobody`:
  the kernel keeps root's processes, files and sockets from it.
- `none`: only with `--no-sandbox`. COMMAND runs as the operator's user and can read whatever that user
  can, above all the environment every ancestor was started with.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

from reviewer.queue.config import config_dir, data_dir
from reviewer.run.errors import RunRefused

SandboxKind = Literal["namespaces", "another user", "none"]
NOBODY: Final = 65534
PROBE_TIMEOUT_SECONDS: Final = 10.0
NO_SANDBOX_COST: Final = (
    "without a sandbox COMMAND runs as your user and can read what your user can: the environment of "
    "every process it descends from (/proc/PID/environ of the shell that exported the API's credential), "
    "the reviewer's configuration and login token, a credential's file, and the agent socket"
)


@dataclass(frozen=True)
class Sandbox:
    """How COMMAND is started: the words put before it, and what they keep from it."""

    kind: SandboxKind
    prefix: tuple[str, ...] = ()

    def wrap(self, command: Sequence[str]) -> list[str]:
        return [*self.prefix, *command]


def hidden_paths(environ: Mapping[str, str], credential_files: Iterable[str] = ()) -> list[Path]:
    """What COMMAND must not open: the reviewer's configuration and data folders, the credential's
    files, and the agent socket; only those that exist (the sandbox covers each with an empty one)."""
    candidates = [config_dir(), data_dir(), *(Path(name) for name in credential_files)]
    if environ.get("SSH_AUTH_SOCK"):
        candidates.append(Path(environ["SSH_AUTH_SOCK"]))
    found: list[Path] = []
    for path in candidates:
        resolved = path.expanduser().resolve()
        if resolved.exists() and resolved not in found:
            found.append(resolved)
    return found


def namespace_prefix(hidden: Iterable[Path]) -> tuple[str, ...]:
    """bubblewrap's words: new user and PID namespaces with a fresh /proc, no capability, each hidden
    folder under an empty tmpfs and each hidden file under /dev/null; it ends with its child."""
    words = [
        "bwrap",
        "--die-with-parent",
        "--unshare-user",
        "--unshare-pid",
        "--cap-drop",
        "ALL",
        "--dev-bind",
        "/",
        "/",
        "--proc",
        "/proc",
    ]
    for path in hidden:
        if stat.S_ISDIR(path.stat().st_mode):
            words += ["--tmpfs", str(path)]
        else:
            words += ["--ro-bind", "/dev/null", str(path)]
    return (*words, "--")


def _namespaces_refused(prefix: tuple[str, ...]) -> str | None:
    """Why bubblewrap cannot make the sandbox here, or None when a probe ran in it."""
    if shutil.which("bwrap") is None:
        return "bubblewrap (bwrap) is not installed"
    try:
        probe = subprocess.run(
            [*prefix, "true"], capture_output=True, timeout=PROBE_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap did not start: {error}"
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap could not make user and PID namespaces: {said[-1][:200] if said else probe.returncode}"
    return None


def choose_sandbox(
    environ: Mapping[str, str], credential_files: Iterable[str] = (), *, allow_none: bool = False
) -> Sandbox:
    """The strongest sandbox this machine allows; refused when there is none and `allow_none` is off."""
    if allow_none:
        return Sandbox("none")
    prefix = namespace_prefix(hidden_paths(environ, credential_files))
    refused = _namespaces_refused(prefix)
    if refused is None:
        return Sandbox("namespaces", prefix)
    if os.geteuid() == 0 and shutil.which("setpriv") is not None:
        return Sandbox(
            "another user",
            ("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"),
        )
    raise RunRefused(
        f"COMMAND cannot be sandboxed here ({refused}); {NO_SANDBOX_COST}. Install bubblewrap, allow "
        "unprivileged user namespaces, or accept that with --no-sandbox"
    )
