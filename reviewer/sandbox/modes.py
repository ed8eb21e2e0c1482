"""Where COMMAND runs, so that it holds nothing it was not handed.

The gate holds the API's credential and the agent token. A child that has read this module knows
where a process of the operator's user could find more: an ancestor's `/proc/PID/environ`, the
reviewer's configuration, a credential's `file:`, the operator's tmux, screen, D-Bus or agent sockets
(each runs commands or signs as the operator), the reviewer's own installation and the operator's
dotfiles (code the operator runs next). So COMMAND runs in one of these, the first the machine allows:

- `namespaces`: bubblewrap's user, PID, IPC, UTS and network namespaces, built from nothing: the root
  holds the system's `/usr` (and its `/bin`, `/lib` links) and the files of `/etc` programs need, all
  read-only; `/tmp`, `/var/tmp`, `/run` and `/dev/shm` are empty and private; the operator's home is
  an empty folder; the reviewer's installation is read-only even where the working directory holds
  it; the configuration, the credential's files and the agent socket are covered where a bind would
  show them. Nothing else of the machine is there, whenever it was made: a folder the operator writes
  outside these is absent. COMMAND writes its working directory and what `--writable` adds;
  `--readable` shows more read-only. A seccomp filter (`reviewer.sandbox.syscall_filter`) refuses it any
  Unix socket, so no socket in the file system, made before the run or during it, nor any abstract
  one, can be reached. Its network has only its own loopback, where the gate is served on listeners
  the relay hands out (`reviewer.sandbox.relay`), and, with `--allow-net`, a proxy to the hosts the
  operator named (`reviewer.sandbox.egress`); it holds no capability, so it cannot undo a mount, and every
  process it starts ends with it.
- `another user`: when `reviewer run` is root and no namespace can be made, COMMAND runs as a uid
  made for this run, which owns nothing and is no other run's; every process of that uid is killed
  when the run ends.
- `none`: only with `--no-sandbox`. COMMAND runs as the operator's user and can read whatever that user
  can, above all the environment every ancestor was started with.
"""

from __future__ import annotations

import base64
import contextlib
import os
import pwd
import secrets
import shutil
import signal
import site
import socket
import stat
import subprocess
import sys
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, Literal

import reviewer
from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.config import config_dir, data_dir, token_file
from reviewer.sandbox.egress import Allowed
from reviewer.sandbox.errors import SandboxRefused
from reviewer.sandbox.launcher import HANDOVER_WORD
from reviewer.sandbox.syscall_filter import FilterUnavailable, no_unix_sockets

SandboxKind = Literal["namespaces", "another user", "none"]
Role = Literal["agent", "upstream"]
PROBE_TIMEOUT_SECONDS: Final = 10.0
MAX_REASON_CHARS: Final = 200
"""Characters of bubblewrap's own reason kept in a line: enough for its sentence, never a screenful."""
PRIVATE_FOLDERS: Final = ("/tmp", "/var/tmp", "/run", "/dev/shm")
"""Empty in the sandbox: where tmux, screen, D-Bus, ssh-agent and gpg-agent keep their sockets."""
SYSTEM_FOLDERS: Final = ("/usr", "/nix/store", "/gnu/store")
"""The system's programs and libraries, shown read-only (the stores where a system keeps them there)."""
USR_LINKS: Final = ("/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
"""Links into /usr on a merged system, folders of their own on an older one: shown as the host has them."""
ETC_NEEDED: Final = (
    "alternatives",
    "ca-certificates",
    "ca-certificates.conf",
    "crypto-policies",
    "debian_version",
    "gai.conf",
    "group",
    "host.conf",
    "hostname",
    "hosts",
    "ld.so.cache",
    "ld.so.conf",
    "ld.so.conf.d",
    "locale.alias",
    "locale.conf",
    "localtime",
    "mime.types",
    "nsswitch.conf",
    "os-release",
    "passwd",
    "pki/ca-trust",
    "pki/tls/certs",
    "protocols",
    "resolv.conf",
    "services",
    "ssl/certs",
    "ssl/openssl.cnf",
    "timezone",
)
"""What programs read of /etc: the dynamic linker's cache, users and groups by name, names and
services, time zone, locale, the certificate authorities. Nothing else of /etc is there: not the
host's keys (`ssh/`, `ssl/private/`), not `shadow`, not a service's configuration."""
GATE_PORT: Final = 8479
"""The gate's port on the sandbox's own loopback (nothing else listens there)."""
RELAY: Final = str(Path(__file__).with_name("relay.py"))
LAUNCHER: Final = str(Path(__file__).with_name("launcher.py"))
FRESH_UIDS: Final = range(0x7F000000, 0x7FFF0000)
"""Where `another user` draws a run's uid from: far above any uid a system hands out."""
NO_SANDBOX_COST: Final = (
    "without a sandbox COMMAND runs as your user and can read what your user can: the environment of "
    "every process it descends from (/proc/PID/environ of the shell that exported the API's credential), "
    "the reviewer's configuration and login token, a credential's file, the agent socket, your tmux "
    "server; it can write your dotfiles and the reviewer's installation"
)
NO_FILTER_COST: Final = (
    "COMMAND can open a Unix socket: one made after the run starts in the working directory or a "
    "--writable or --readable folder (a tmux server, a service) is in its reach, and with "
    "--share-network so is every abstract socket of the machine"
)


@dataclass
class Launch:
    """How one COMMAND is started: its command line, the descriptors it inherits, and, where it has a
    network of its own, the socket its relay hands the listeners of its loopback out through."""

    argv: list[str]
    pass_fds: tuple[int, ...] = ()
    handover: socket.socket | None = None

    def __post_init__(self) -> None:
        self._still_open = list(self.pass_fds)

    def started(self) -> None:
        """Close this process's copies of what COMMAND inherited, once it has started (or failed to):
        a relay that ends without handing its listeners out is then seen to, by the handover's end."""
        while self._still_open:
            _close_quietly(self._still_open.pop())


@dataclass(frozen=True)
class Sandbox:
    """How COMMAND is started: the words put before it, and what they keep from it."""

    kind: SandboxKind
    prefix: tuple[str, ...] = ()
    uid: int | None = None
    """`another user`'s uid, made for this run."""
    shared_network: bool = False
    """`--share-network`: COMMAND keeps the machine's network (its model's API), and with it the
    host's loopback."""
    allowed_net: tuple[Allowed, ...] = ()
    """`--allow-net`: the HOST:PORTs COMMAND reaches through the proxy at 127.0.0.1:8480
    (`reviewer.sandbox.egress`), its network's only way out."""
    syscall_filter: bytes | None = field(default=None, repr=False)
    """The seccomp program bubblewrap loads before COMMAND (`reviewer.sandbox.syscall_filter`); None in
    `namespaces` only with --allow-weaker-sandbox, where none could be loaded."""
    weaker: str | None = None
    """Why the filter is missing, said at the start of the run."""
    fallback: str | None = None
    """`another user`: why no namespace could be made (bubblewrap's own words), said at the start."""
    role: Role = "agent"
    """`agent`: `reviewer run`'s COMMAND, which writes the folder it was started in and reaches the
    gate; `upstream`: mcp-gate's server, which has neither."""

    @property
    def private_network(self) -> bool:
        """COMMAND has a network of its own, where the gate is served on listeners its relay hands out."""
        return self.kind == "namespaces" and not self.shared_network

    def words(self, connect: str | None = None) -> list[str]:
        """The words before COMMAND's `--`: bubblewrap's, behind the launcher (`reviewer.sandbox.launcher`)
        where it needs a descriptor made for it (the seccomp filter; with `connect`, a connection to
        the gate's handover point); the prefix alone in the other modes."""
        if self.kind != "namespaces" or (self.syscall_filter is None and connect is None):
            return list(self.prefix)
        options = (
            ["--seccomp", base64.b64encode(self.syscall_filter).decode("ascii")]
            if self.syscall_filter
            else []
        )
        options += ["--connect", connect] if connect is not None else []
        return [sys.executable, "-I", "-S", LAUNCHER, *options, "--", *self.prefix]

    def command_line(
        self, command: Sequence[str], inner_ports: Sequence[int] = (), handover_at: str | None = None
    ) -> list[str]:
        """The command line that starts COMMAND, which any spawner can start: where it has a network of
        its own with services on `inner_ports`, the relay hands their listeners out through a
        connection the launcher makes to the handover point at `handover_at`."""
        if self.kind != "namespaces":
            return [*self.words(), *command]
        if not (self.private_network and inner_ports and handover_at):
            return [*self.words(), "--", *command]
        return [*self.words(connect=handover_at), "--", *relay_words(HANDOVER_WORD, inner_ports), *command]

    @contextlib.contextmanager
    def launch(self, command: Sequence[str], inner_ports: Sequence[int] = ()) -> Iterator[Launch]:
        """The command line that starts COMMAND, and the descriptor it inherits where it has a network
        of its own with services on `inner_ports`: the relay's end of the socket it hands their
        listeners out through (no socket anyone could connect to). Closed when the block ends."""
        if not (self.private_network and inner_ports):
            yield Launch(self.command_line(command))
            return
        ours, theirs = socket.socketpair()
        relay_end = theirs.detach()
        launch = Launch(
            [*self.words(), "--", *relay_words(str(relay_end), inner_ports), *command], (relay_end,), ours
        )
        try:
            yield launch
        finally:
            launch.started()
            ours.close()

    def describe(self) -> str:
        """One line for the start of a run: the mode, and what it keeps from COMMAND."""
        if self.kind == "namespaces":
            gate = "the gate and, " if self.role == "agent" else ""
            network = (
                "the machine's network (--share-network: the host's loopback services too, and on a "
                "cloud instance its metadata address, which hands out the instance's own credentials"
                f"{'; the gate behind a secret' if self.role == 'agent' else ''})"
                if self.shared_network
                else f"no network but {gate}through a proxy (HTTPS_PROXY), {allowed}"
                if (allowed := ", ".join(str(host) for host in self.allowed_net))
                else f"no network{' but the gate' if self.role == 'agent' else ''}"
            )
            sockets = (
                "no Unix socket (seccomp)"
                if self.syscall_filter is not None
                else f"Unix sockets NOT refused (--allow-weaker-sandbox: {self.weaker}; {NO_FILTER_COST})"
            )
            return (
                "sandbox: namespaces (bubblewrap): a root of the system's /usr and /etc's needed files, "
                f"read-only, private /tmp, /run and /dev/shm, your home hidden, {sockets}, {network}; "
                f"COMMAND writes {'its working directory and ' if self.role == 'agent' else ''}"
                "--writable paths only"
            )
        if self.kind == "another user":
            return (
                f"sandbox: another user (uid {self.uid}, made for this run; no namespace could be made: "
                f"{self.fallback or 'unknown'}): "
                "COMMAND reads and writes only what every user may, keeps the network (on a cloud instance "
                "its metadata address and the instance's credentials too), and every process of that uid "
                "is killed when the run ends"
            )
        return f"sandbox: none (--no-sandbox): {NO_SANDBOX_COST}"

    def network_note(self) -> str:
        """Said when COMMAND fails where its network is its own: what it could reach, since a client
        that ignores the proxy variables meets only a missing route, which nothing outside sees."""
        if not self.private_network:
            return ""
        through = ", ".join(str(host) for host in self.allowed_net)
        reach = f"{'the gate' if self.role == 'agent' else 'nothing'}" + (
            f" and, through the proxy in HTTPS_PROXY, {through}" if through else ""
        )
        return (
            f" (its network holds {reach}: a connection elsewhere, or by a client that ignores the proxy "
            "variables, finds no route and no name)"
        )

    def end_leftovers(self) -> None:
        """Kill what COMMAND left running: every process of `another user`'s uid. (In `namespaces`
        the kernel ends the PID namespace with COMMAND.)"""
        if self.kind == "another user" and self.uid is not None:
            kill_every_process_of(self.uid)


def relay_words(handover: str, inner_ports: Sequence[int]) -> list[str]:
    """The relay (`reviewer.sandbox.relay`) before COMMAND: the descriptor it hands its listeners out
    through, the ports it listens on."""
    return [sys.executable, "-I", "-S", RELAY, handover, *map(str, inner_ports), "--"]


def _close_quietly(descriptor: int) -> None:
    with contextlib.suppress(OSError):
        os.close(descriptor)


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
    """What the operator hands COMMAND in the `namespaces` sandbox: the folder it writes and starts in
    (`reviewer run`'s working directory; none for mcp-gate's upstream, which then starts in `start_in`
    where the sandbox shows it, else in /), and what `--writable` and `--readable` add."""

    working_dir: Path | None
    writable: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    start_in: Path | None = None


def check_reach(reach: Reach, environ: Mapping[str, str]) -> Reach:
    """`reach` with its paths resolved; refused when a path is missing or would let COMMAND write the
    operator's home (its dotfiles run at the next login) or the whole file system."""
    resolved: dict[str, list[Path]] = {"writable": [], "readable": []}
    for option, paths in (("--writable", reach.writable), ("--readable", reach.readable)):
        for path in paths:
            if not path.exists():
                raise SandboxRefused(f"{option} {str(path)[:200]!r}: no such file or folder")
            resolved[option[2:]].append(path.resolve())
    working_dir = reach.working_dir.resolve() if reach.working_dir is not None else None
    for path, said in [
        *([(working_dir, "the working directory")] if working_dir is not None else []),
        *((p, "--writable") for p in resolved["writable"]),
    ]:
        for home in [Path("/"), *homes(environ)]:
            if _within(home, path):
                raise SandboxRefused(
                    f"{said} {str(path)[:200]!r} holds {home}: COMMAND would write your "
                    f"{'files' if home == Path('/') else 'dotfiles, which run at your next login'}. "
                    "Start it in the agent's own folder (or a folder of its own under your home)"
                )
    start_in = reach.start_in.resolve() if reach.start_in is not None else None
    return Reach(working_dir, tuple(resolved["writable"]), tuple(resolved["readable"]), start_in)


def namespace_prefix(
    reach: Reach,
    *,
    hidden: Iterable[Path] = (),
    home: Iterable[Path] = (),
    installation: Iterable[Path] = (),
    share_network: bool = False,
) -> tuple[str, ...]:
    """bubblewrap's words up to COMMAND (without the `--`): the namespaces, a root of the system's
    folders (`system_binds`), the private folders, the home hidden, then the binds from the shallowest
    to the deepest (a deeper one decides for what it holds: a read-only venv inside a writable working
    directory), then each hidden folder under an empty tmpfs and each hidden file under /dev/null."""
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
        *system_binds(),
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]
    for folder in (*PRIVATE_FOLDERS, *(str(path) for path in home)):
        words += ["--tmpfs", folder]
    binds = [(reach.working_dir, "--bind")] if reach.working_dir is not None else []
    binds += [(path, "--bind") for path in reach.writable]
    binds += [(path, "--ro-bind") for path in reach.readable]
    writable = {*written_folders(reach)}
    binds += [(path, "--ro-bind") for path in _outermost(installation, writable)]
    for path, how in sorted(binds, key=lambda bind: len(bind[0].parts)):
        words += [how, str(path), str(path)]
    bound = [path for path, _ in binds]
    covered: list[Path] = []
    for path in hidden:
        if path in covered or not _visible(path, bound):
            continue
        covered.append(path)
        if path.is_dir():
            words += ["--tmpfs", str(path)]
        else:
            words += ["--ro-bind", "/dev/null", str(path)]
    words += ["--chdir", str(_start_folder(reach, bound))]
    return tuple(words)


def written_folders(reach: Reach) -> list[Path]:
    """The folders COMMAND writes: its working directory, if any, and `--writable`'s."""
    return [*([reach.working_dir] if reach.working_dir is not None else []), *reach.writable]


def _start_folder(reach: Reach, bound: Sequence[Path]) -> Path:
    """Where COMMAND starts: its working directory, else `start_in` where the sandbox shows it, else /."""
    if reach.working_dir is not None:
        return reach.working_dir
    if reach.start_in is not None and _visible(reach.start_in, bound):
        return reach.start_in
    return Path("/")


def system_binds(root: Path = Path("/")) -> list[str]:
    """bubblewrap's words for the root's system part, read-only: `SYSTEM_FOLDERS` that exist, the
    /usr links as the host has them (a link, or a folder), and `ETC_NEEDED`'s files. A link in /etc
    into /usr stays a link (a program that reads where /etc/localtime points finds its zone's name);
    one elsewhere (/etc/resolv.conf into /run) is shown as the file it names."""
    words: list[str] = []
    for name in (*SYSTEM_FOLDERS, *USR_LINKS):
        path = root / name.lstrip("/")
        if path.is_symlink():
            words += ["--symlink", os.readlink(path), name]
        elif path.is_dir():
            words += ["--ro-bind", str(path), name]
    for name in ETC_NEEDED:
        path, inside = root / "etc" / name, f"/etc/{name}"
        try:
            target = path.resolve(strict=True)
        except (OSError, RuntimeError):
            continue  # absent, or a link to nothing
        if path.is_symlink() and _within(target, root / "usr"):
            words += ["--symlink", os.readlink(path), inside]
        else:
            words += ["--ro-bind", str(target), inside]
    return words


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


def _visible(path: Path, bound: Sequence[Path]) -> bool:
    """Whether COMMAND would see `path` without a cover: under a bind, or in the system's part of the
    root."""
    system = [*(Path(folder) for folder in SYSTEM_FOLDERS), *(Path("/etc") / name for name in ETC_NEEDED)]
    return any(_within(path, folder) for folder in [*bound, *system])


def _namespaces_refused(prefix: Sequence[str], syscall_filter: bytes | None = None) -> str | None:
    """Why bubblewrap cannot make the sandbox here (with `syscall_filter` loaded), or None when a
    probe ran in it."""
    probe_sandbox = Sandbox("namespaces", tuple(prefix), shared_network=True, syscall_filter=syscall_filter)
    try:
        probe = subprocess.run(
            [*probe_sandbox.words(), "--", "true"],
            capture_output=True,
            timeout=PROBE_TIMEOUT_SECONDS,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        return f"bwrap did not start: {clip(safe_text(str(error)), MAX_REASON_CHARS)}"
    if probe.returncode != 0:
        return f"bwrap could not make the namespaces: {bwrap_reason(probe.stderr, probe.returncode)}"
    return None


def bwrap_reason(stderr: bytes, returncode: int) -> str:
    """bubblewrap's own reason for failing, as one line a terminal shows as written: its last line
    (where it says what failed), control characters escaped, at most `MAX_REASON_CHARS`; its exit
    status when it said nothing."""
    lines = [line for line in stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    if not lines:
        return f"it exited with status {returncode} and said nothing"
    return clip(safe_text(lines[-1].strip()), MAX_REASON_CHARS)


def _filter_for(prefix: Sequence[str]) -> tuple[bytes | None, str | None]:
    """The seccomp filter COMMAND runs under, or why there is none: libseccomp missing, or a kernel
    or bubblewrap that will not load it."""
    try:
        program = no_unix_sockets()
    except FilterUnavailable as error:
        return None, str(error)
    refused = _namespaces_refused(prefix, program)
    return (program, None) if refused is None else (None, f"the seccomp filter was refused: {refused}")


def stranger_may_open(path: Path) -> bool:
    """Whether a uid that owns nothing and is in no group could open `path`: read a file, connect to
    a socket, list a folder; every folder above it must let it pass. (Access lists are not read: the
    owner's mode bits are the promise.)"""
    try:
        resolved = path.resolve(strict=True)
        mode = resolved.stat().st_mode
    except (OSError, RuntimeError):
        return False
    for folder in resolved.parents:
        try:
            if not folder.stat().st_mode & stat.S_IXOTH:
                return False
        except OSError:
            return False
    return bool(mode & (stat.S_IWOTH if stat.S_ISSOCK(mode) else stat.S_IROTH))


def _open_to_strangers(environ: Mapping[str, str], credential_files: Iterable[str]) -> list[str]:
    """The secrets `another user` could open: the credential's files, the reviewer's login and the
    agent socket, where their modes let any uid in."""
    candidates = [*credential_files, str(token_file())]
    if environ.get("SSH_AUTH_SOCK"):
        candidates.append(environ["SSH_AUTH_SOCK"])
    return [name for name in dict.fromkeys(candidates) if stranger_may_open(Path(name))]


def choose_sandbox(
    environ: Mapping[str, str],
    credential_files: Iterable[str] = (),
    *,
    allow_none: bool = False,
    reach: Reach | None = None,
    share_network: bool = False,
    allowed_net: Sequence[Allowed] = (),
    allow_weaker: bool = False,
    role: Role = "agent",
) -> Sandbox:
    """The strongest sandbox this machine allows; refused when there is none and `allow_none` is off,
    and when its seccomp filter cannot be loaded and `allow_weaker` is off. `allowed_net` needs the
    namespaces: it is refused in any other. `another user` is refused a secret any uid may open."""
    if allowed_net and (allow_none or share_network):
        raise SandboxRefused(
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
            share_network=share_network,
        )
        refused = _namespaces_refused(prefix)
        if refused is None:
            program, weaker = _filter_for(prefix)
            if program is None and not allow_weaker:
                raise SandboxRefused(
                    f"COMMAND's sandbox cannot refuse it Unix sockets here ({weaker}): {NO_FILTER_COST}. "
                    "Install libseccomp, or accept that with --allow-weaker-sandbox"
                )
            return Sandbox(
                "namespaces",
                prefix,
                shared_network=share_network,
                allowed_net=tuple(allowed_net),
                syscall_filter=program,
                weaker=weaker,
                role=role,
            )
    if allowed_net:
        raise SandboxRefused(
            f"--allow-net needs a network namespace, and none can be made here ({refused}); as another "
            "user COMMAND keeps the machine's whole network"
        )
    if os.geteuid() == 0 and shutil.which("setpriv") is not None:
        if reach.writable:
            raise SandboxRefused(
                f"no namespace can be made here ({refused}), and as another user COMMAND cannot be "
                "given --writable paths; leave --writable out or make user namespaces possible"
            )
        if open_files := _open_to_strangers(environ, credential_files):
            raise SandboxRefused(
                f"no namespace can be made here ({refused}), and as another user COMMAND could open "
                f"{', '.join(repr(name[:200]) for name in open_files)}, which any user may: make each "
                "readable by you alone (chmod 600, or its folder 700)"
            )
        uid = fresh_uid()
        return Sandbox(
            "another user",
            ("setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--"),
            uid=uid,
            fallback=refused,
        )
    raise SandboxRefused(
        f"COMMAND cannot be sandboxed here ({refused}); {NO_SANDBOX_COST}. Install bubblewrap, allow "
        "unprivileged user namespaces, or accept that with --no-sandbox"
    )
