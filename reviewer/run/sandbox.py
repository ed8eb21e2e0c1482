"""Where COMMAND runs, so that it holds nothing it was not handed.

The gate holds the API's credential and the agent token. A child that has read this module knows
where a process of the operator's user could find more: an ancestor's `/proc/PID/environ`, the
reviewer's configuration, a credential's `file:`, the operator's tmux, screen, D-Bus or agent sockets
(each runs commands or signs as the operator), the reviewer's own installation and the operator's
dotfiles (code the operator runs next). So COMMAND runs in one of these, the first the machine allows:

- `namespaces`: bubblewrap's user, PID, IPC, UTS and network namespaces. The root file system is
  read-only; `/tmp`, `/var/tmp`, `/run` and `/dev/shm` are empty and private; the operator's home is an
  empty folder; the reviewer's installation is read-only even where the working directory holds it;
  every named Unix socket the machine listens on outside those is covered by an empty file, and the
  configuration, the credential's files and the agent socket likewise. COMMAND writes its working
  directory and what `--writable` adds; `--readable` shows more read-only. Its network has only its
  own loopback, where the gate is reached (`reviewer.run.relay`), and, with `--allow-net`, a proxy to
  the hosts the operator named (`reviewer.run.egress`); it holds no capability, so it cannot undo a
  mount, and every process it starts ends with it.
- `another user`: when `reviewer run` is root and no namespace can be made, COMMAND runs as a uid
  made for this run, which owns nothing and is no other run's; every process of that uid is killed
  when the run ends.
- `none`: only with `--no-sandbox`. COMMAND runs as the operator's user and can read whatever that user
  can, above all the environment every ancestor was started with.
"""

from __future__ import annotations

import contextlib
import os
import pwd
import secrets
import shutil
import signal
import site
import stat
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Final, Literal

import reviewer
from reviewer.queue.config import config_dir, data_dir
from reviewer.run.egress import EGRESS_PORT, INNER_EGRESS_SOCKET, Allowed
from reviewer.run.errors import RunRefused

SandboxKind = Literal["namespaces", "another user", "none"]
PROBE_TIMEOUT_SECONDS: Final = 10.0
PRIVATE_FOLDERS: Final = ("/tmp", "/var/tmp", "/run", "/dev/shm")
"""Empty in the sandbox: where tmux, screen, D-Bus, ssh-agent and gpg-agent keep their sockets."""
GATE_PORT: Final = 8479
"""The gate's port on the sandbox's own loopback (nothing else listens there)."""
INNER_GATE_SOCKET: Final = "/run/reviewer-gate.sock"
RELAY: Final = str(Path(__file__).with_name("relay.py"))
FRESH_UIDS: Final = range(0x7F000000, 0x7FFF0000)
"""Where `another user` draws a run's uid from: far above any uid a system hands out."""
NO_SANDBOX_COST: Final = (
    "without a sandbox COMMAND runs as your user and can read what your user can: the environment of "
    "every process it descends from (/proc/PID/environ of the shell that exported the API's credential), "
    "the reviewer's configuration and login token, a credential's file, the agent socket, your tmux "
    "server; it can write your dotfiles and the reviewer's installation"
)


@dataclass(frozen=True)
class Sandbox:
    """How COMMAND is started: the words put before it, and what they keep from it."""

    kind: SandboxKind
    prefix: tuple[str, ...] = ()
    uid: int | None = None
    """`another user`'s uid, made for this run."""
    shared_network: bool = False
    """`--share-network`: COMMAND keeps the machine's network (its model's API), and with it the
    host's loopback and abstract sockets."""
    allowed_net: tuple[Allowed, ...] = ()
    """`--allow-net`: the HOST:PORTs COMMAND reaches through the proxy at 127.0.0.1:8480
    (`reviewer.run.egress`), its network's only way out."""

    @property
    def private_network(self) -> bool:
        """COMMAND has a network of its own, where the gate is reached through its Unix socket."""
        return self.kind == "namespaces" and not self.shared_network

    def wrap(
        self, command: Sequence[str], gate_socket: str | None = None, egress_socket: str | None = None
    ) -> list[str]:
        """The command line that starts COMMAND; in `namespaces`, behind the relay to `gate_socket`
        (and, with `--allow-net`, behind a second relay to the proxy at `egress_socket`)."""
        if self.kind != "namespaces":
            return [*self.prefix, *command]
        if self.shared_network:
            return [*self.prefix, "--", *command]
        if gate_socket is None:
            raise ValueError("a sandbox with a network of its own reaches the gate through its socket")
        binds = ["--ro-bind", gate_socket, INNER_GATE_SOCKET]
        relays = [sys.executable, "-I", "-S", RELAY, INNER_GATE_SOCKET, str(GATE_PORT)]
        if self.allowed_net:
            if egress_socket is None:
                raise ValueError("--allow-net's hosts are reached through the proxy's socket")
            binds += ["--ro-bind", egress_socket, INNER_EGRESS_SOCKET]
            relays += [sys.executable, "-I", "-S", RELAY, INNER_EGRESS_SOCKET, str(EGRESS_PORT)]
        return [*self.prefix, *binds, "--", *relays, *command]

    def describe(self) -> str:
        """One line for the start of a run: the mode, and what it keeps from COMMAND."""
        if self.kind == "namespaces":
            network = (
                "the machine's network (--share-network: the host's loopback services and abstract "
                "sockets too, and on a cloud instance its metadata address, which hands out the "
                "instance's own credentials; the gate behind a secret)"
                if self.shared_network
                else f"no network but the gate and, through a proxy (HTTPS_PROXY), {allowed}"
                if (allowed := ", ".join(str(host) for host in self.allowed_net))
                else "no network but the gate"
            )
            return (
                "sandbox: namespaces (bubblewrap): read-only root, private /tmp, /run and /dev/shm, your "
                f"home hidden, no host socket in the file system, {network}; COMMAND writes its working "
                "directory and --writable paths only"
            )
        if self.kind == "another user":
            return (
                f"sandbox: another user (uid {self.uid}, made for this run; no namespace could be made): "
                "COMMAND reads and writes only what every user may, keeps the network (on a cloud instance "
                "its metadata address and the instance's credentials too), and every process of that uid "
                "is killed when the run ends"
            )
        return f"sandbox: none (--no-sandbox): {NO_SANDBOX_COST}"

    def end_leftovers(self) -> None:
        """Kill what COMMAND left running: every process of `another user`'s uid. (In `namespaces`
        the kernel ends the PID namespace with COMMAND.)"""
        if self.kind == "another user" and self.uid is not None:
            kill_every_process_of(self.uid)


def kill_every_process_of(uid: int) -> None:
    """SIGKILL each process whose real or effective uid is `uid`, pass after pass until a pass finds
    none: a process forked between two passes is found by the next."""
    while True:
        found = 0
        for entry in Path("/proc").iterdir():
            if not entry.name.isdigit():
                continue
            try:
                status = (entry / "status").read_text()
            except OSError:
                continue
            fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
            if fields.get("State", "").split()[:1] == ["Z"]:
                continue  # already dead, waiting for its parent: it holds nothing
            if str(uid) in fields.get("Uid", "").split()[:2]:
                found += 1
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(int(entry.name), signal.SIGKILL)
        if not found:
            return


def fresh_uid() -> int:
    """A uid no account and no running process has: a run's own, no other run's."""
    while True:
        uid = FRESH_UIDS.start + secrets.randbelow(len(FRESH_UIDS))
        try:
            pwd.getpwuid(uid)
            continue
        except KeyError:
            pass
        if not any(entry.name.isdigit() and _owner(entry) == uid for entry in Path("/proc").iterdir()):
            return uid


def _owner(path: Path) -> int | None:
    try:
        return path.stat().st_uid
    except OSError:
        return None


def hidden_paths(environ: Mapping[str, str], credential_files: Iterable[str] = ()) -> list[Path]:
    """What COMMAND must not open wherever it lies: the reviewer's configuration and data folders, the
    credential's files and the agent socket; only those that exist."""
    candidates = [config_dir(), data_dir(), *(Path(name) for name in credential_files)]
    if environ.get("SSH_AUTH_SOCK"):
        candidates.append(Path(environ["SSH_AUTH_SOCK"]))
    return _existing(candidates)


def listening_sockets(net_unix: str = "/proc/net/unix") -> list[Path]:
    """The Unix sockets with a name in the file system that this machine's processes listen on
    (tmux's, screen's, D-Bus's, the agents'), as /proc/net/unix lists them."""
    try:
        lines = Path(net_unix).read_text(errors="replace").splitlines()[1:]
    except OSError:
        return []
    named = [line.split(None, 7)[7] for line in lines if len(line.split(None, 7)) == 8]
    found: list[Path] = []
    for name in named:
        if not name.startswith("/"):
            continue  # abstract sockets belong to the network namespace COMMAND does not share
        try:
            if stat.S_ISSOCK(os.lstat(name).st_mode) and Path(name) not in found:
                found.append(Path(name))
        except OSError:
            continue  # gone, or in a folder this user may not open: COMMAND cannot reach it either
    return found


def installation_paths() -> list[Path]:
    """The reviewer's installation: the interpreter's prefixes, its site-packages (where a `.pth` runs
    at the next start), every folder on the import path, and the package itself."""
    user_site = site.getusersitepackages() if site.ENABLE_USER_SITE else None
    candidates = [
        Path(sys.prefix),
        Path(sys.base_prefix),
        Path(sys.exec_prefix),
        Path(sys.base_exec_prefix),
        *(Path(folder) for folder in site.getsitepackages()),
        *([Path(user_site)] if user_site else []),
        *(Path(entry) for entry in sys.path if entry),
        Path(reviewer.__file__).parent,
    ]
    return _existing(candidates)


def homes(environ: Mapping[str, str]) -> list[Path]:
    """The operator's home, as `HOME` says and as the password database says."""
    candidates = [Path(environ["HOME"])] if environ.get("HOME") else []
    with contextlib.suppress(KeyError):
        candidates.append(Path(pwd.getpwuid(os.getuid()).pw_dir))
    return [path for path in _existing(candidates) if path != Path("/") and path.is_dir()]


def _existing(paths: Iterable[Path]) -> list[Path]:
    found: list[Path] = []
    for path in paths:
        try:
            resolved = path.expanduser().resolve()
            if resolved.exists() and resolved not in found:
                found.append(resolved)
        except OSError:
            continue
    return found


def _within(path: Path, folder: Path) -> bool:
    return path == folder or folder in path.parents


@dataclass(frozen=True)
class Reach:
    """What the operator hands COMMAND in the `namespaces` sandbox."""

    working_dir: Path
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()


def check_reach(reach: Reach, environ: Mapping[str, str]) -> Reach:
    """`reach` with its paths resolved; refused when a path is missing or would let COMMAND write the
    operator's home (its dotfiles run at the next login) or the whole file system."""
    resolved: dict[str, list[Path]] = {"writable": [], "readable": []}
    for option, paths in (("--writable", reach.writable), ("--readable", reach.readable)):
        for path in paths:
            if not path.exists():
                raise RunRefused(f"{option} {str(path)[:200]!r}: no such file or folder")
            resolved[option[2:]].append(path.resolve())
    working_dir = reach.working_dir.resolve()
    for path, said in [
        (working_dir, "the working directory"),
        *((p, "--writable") for p in resolved["writable"]),
    ]:
        for home in [Path("/"), *homes(environ)]:
            if _within(home, path):
                raise RunRefused(
                    f"{said} {str(path)[:200]!r} holds {home}: COMMAND would write your "
                    f"{'files' if home == Path('/') else 'dotfiles, which run at your next login'}. "
                    "Start reviewer run in the agent's own folder (or a folder of its own under your "
                    "home)"
                )
    return Reach(working_dir, tuple(resolved["writable"]), tuple(resolved["readable"]))


def namespace_prefix(
    reach: Reach,
    *,
    hidden: Iterable[Path] = (),
    home: Iterable[Path] = (),
    installation: Iterable[Path] = (),
    sockets: Iterable[Path] = (),
    share_network: bool = False,
) -> tuple[str, ...]:
    """bubblewrap's words up to COMMAND (without the `--`): the namespaces, the read-only root, the
    private folders, the home hidden, then the binds from the shallowest to the deepest (a deeper one
    decides for what it holds: a read-only venv inside a writable working directory), then each hidden
    folder under an empty tmpfs and each hidden file or socket under /dev/null."""
    words = [
        "bwrap",
        "--die-with-parent",
        "--new-session",
        "--unshare-user",
        "--unshare-pid",
        "--unshare-ipc",
        "--unshare-uts",
        *([] if share_network else ["--unshare-net"]),
        "--unshare-cgroup-try",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    for folder in (*PRIVATE_FOLDERS, *(str(path) for path in home)):
        words += ["--tmpfs", folder]
    binds = [(reach.working_dir, "--bind")]
    binds += [(path, "--bind") for path in reach.writable]
    binds += [(path, "--ro-bind") for path in reach.readable]
    writable = {reach.working_dir, *reach.writable}
    binds += [(path, "--ro-bind") for path in _outermost(installation, writable)]
    for path, how in sorted(binds, key=lambda bind: len(bind[0].parts)):
        words += [how, str(path), str(path)]
    shown = [path for path, _ in binds]
    covered: list[Path] = []
    for path in [*hidden, *sockets]:
        if path in covered or not _visible(path, shown, home):
            continue
        covered.append(path)
        if path.is_dir():
            words += ["--tmpfs", str(path)]
        else:
            words += ["--ro-bind", "/dev/null", str(path)]
    words += ["--chdir", str(reach.working_dir)]
    return tuple(words)


def _outermost(installation: Iterable[Path], writable: set[Path]) -> list[Path]:
    """The installation's folders to bind read-only: those no other holds without a writable folder
    between them (a writable folder is never bound read-only itself)."""
    folders = [path for path in installation if path not in writable]
    return [
        path
        for path in folders
        if not any(
            _within(path, outer)
            and path != outer
            and not any(_within(between, outer) and _within(path, between) for between in writable)
            for outer in folders
        )
    ]


def _visible(path: Path, shown: Sequence[Path], home: Iterable[Path]) -> bool:
    """Whether COMMAND would see `path` without a cover: under a bind, or outside every private folder."""
    if any(_within(path, folder) for folder in shown):
        return True
    private = [*(Path(folder) for folder in PRIVATE_FOLDERS), *home]
    return not any(_within(path, folder) for folder in private)


def _namespaces_refused(prefix: tuple[str, ...]) -> str | None:
    """Why bubblewrap cannot make the sandbox here, or None when a probe ran in it."""
    try:
        probe = subprocess.run(
            [*prefix, "--", "true"], capture_output=True, timeout=PROBE_TIMEOUT_SECONDS, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap did not start: {error}"
    if probe.returncode != 0:
        said = probe.stderr.decode("utf-8", "replace").strip().splitlines()
        return f"bwrap could not make the namespaces: {said[-1][:200] if said else probe.returncode}"
    return None


def choose_sandbox(
    environ: Mapping[str, str],
    credential_files: Iterable[str] = (),
    *,
    allow_none: bool = False,
    reach: Reach | None = None,
    share_network: bool = False,
    allowed_net: Sequence[Allowed] = (),
) -> Sandbox:
    """The strongest sandbox this machine allows; refused when there is none and `allow_none` is off.
    `allowed_net` needs the namespaces: it is refused in any other."""
    if allowed_net and (allow_none or share_network):
        raise RunRefused(
            "--allow-net opens COMMAND's own network to the hosts it names; "
            + (
                "--share-network gives it the machine's whole network instead: choose one"
                if share_network
                else "--no-sandbox gives it no network of its own"
            )
        )
    if allow_none:
        return Sandbox("none")
    reach = reach or Reach(Path.cwd())
    refused: str | None = "bubblewrap (bwrap) is not installed"
    if shutil.which("bwrap") is not None:
        reach = check_reach(reach, environ)
        prefix = namespace_prefix(
            reach,
            hidden=hidden_paths(environ, credential_files),
            home=homes(environ),
            installation=installation_paths(),
            sockets=listening_sockets(),
            share_network=share_network,
        )
        refused = _namespaces_refused(prefix)
        if refused is None:
            return Sandbox("namespaces", prefix, shared_network=share_network, allowed_net=tuple(allowed_net))
    if allowed_net:
        raise RunRefused(
            f"--allow-net needs a network namespace, and none can be made here ({refused}); as another "
            "user COMMAND keeps the machine's whole network"
        )
    if os.geteuid() == 0 and shutil.which("setpriv") is not None:
        if reach.writable:
            raise RunRefused(
                f"no namespace can be made here ({refused}), and as another user COMMAND cannot be "
                "given --writable paths; leave --writable out or make user namespaces possible"
            )
        uid = fresh_uid()
        return Sandbox(
            "another user",
            ("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"),
            uid=uid,
        )
    raise RunRefused(
        f"COMMAND cannot be sandboxed here ({refused}); {NO_SANDBOX_COST}. Install bubblewrap, allow "
        "unprivileged user namespaces, or accept that with --no-sandbox"
    )
