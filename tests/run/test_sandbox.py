"""`reviewer run` as a boundary, tried as an attacker who has read how the sandbox is built.

An unprivileged operator (`nobody`, switched to with `setpriv`) works in tmux: its own tmux servers
(one where tmux keeps them, one at a socket in the working directory) hold `API_TOKEN` in their
environment; a real ssh-agent with a key listens in the working directory; its home holds a reviewer's
login and `.profile`; it starts `reviewer run` under a `timeout` wrapper that was started with the
credential and the agent token. The child walks `/proc`, reads the configuration, the credential's
file and the agent socket, sends `tmux run-shell` to both servers, plants a `.pth` in the reviewer's
site-packages and a line in `~/.profile`, leaves a `setsid` process, and tries every token-like word
against the API and the queue. While it calls the gate, a second local user reads every
`/proc/*/cmdline` and `environ`, tries what it found and holds every connection it can."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import select
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reviewer.sandbox.errors import SandboxRefused
from reviewer.sandbox.modes import Reach, check_reach, namespace_prefix
from tests.forked_commands import reviewer_process
from tests.run.harness import (
    API_TOKEN,
    Queue,
    RunProcess,
    SampleApi,
    reviewer_decides,
    run_arguments,
    start_run,
)
from tests.run.hostile import agent_socket
from tests.run.other_users import (
    OPERATOR,
    SECOND_USER,
    SharedInstall,
    as_user,
    require_other_users,
    shared_install,
)

EXTRA_SECRET = "file-held-extra-secret-51d0"
AGENT_KEY_COMMENT = "operator-agent-key-9c1e"
"""The comment of the key the operator's ssh-agent holds: whoever reaches the agent reads it."""
NAMESPACES = ("user", "pid", "ipc", "uts", "net", "mnt")
PLANTED = "import os; os.system('touch /tmp/reviewer-planted')"


@pytest.fixture(scope="module", autouse=True)
def _other_users() -> None:
    require_other_users()


@pytest.fixture(scope="module")
def shared() -> Iterator[SharedInstall]:
    install = shared_install()
    yield install
    shutil.rmtree(install.folder, ignore_errors=True)


@dataclass
class Operator:
    """An unprivileged operator's home: a reviewer's login, a credential file, an agent socket, tmux."""

    home: Path
    reviewer_token: str
    agent_pid: int
    tmux_sockets: tuple[Path, ...]
    profile_before: bytes

    @property
    def work(self) -> Path:
        return self.home / "work"

    @property
    def config(self) -> Path:
        return self.home / "config" / "reviewer"

    @property
    def credential_file(self) -> Path:
        return self.home / "extra-secret"

    @property
    def agent_socket(self) -> Path:
        return self.work / "agent.sock"

    @property
    def tmux_proof(self) -> Path:
        return self.home / "tmux-ran-this"

    def environment(self, shared: SharedInstall) -> dict[str, str]:
        return {
            **shared.environment,
            "PATH": "/usr/local/bin:/usr/bin:/bin",
            "SHELL": "/bin/sh",  # nobody's own is nologin, which tmux would run panes and run-shell with
            "HOME": str(self.home),
            "XDG_CONFIG_HOME": str(self.home / "config"),
            "XDG_DATA_HOME": str(self.home / "data"),
            "TMUX_TMPDIR": str(self.tmux_sockets[0].parent.parent),
            "TMUX": f"{self.tmux_sockets[0]},1,0",
            "SSH_AUTH_SOCK": str(self.agent_socket),
        }

    def run(
        self, shared: SharedInstall, command: list[str], **more_environment: str
    ) -> subprocess.CompletedProcess[str]:
        """`command` as the operator, in its working folder; it must succeed."""
        return subprocess.run(
            [*as_user(OPERATOR), *command],
            capture_output=True,
            text=True,
            env={**self.environment(shared), **more_environment},
            cwd=self.work,
            check=True,
            timeout=60,
        )


def make_operator(queue: Queue, shared: SharedInstall) -> Iterator[Operator]:
    home = Path(tempfile.mkdtemp(prefix="reviewer-operator-"))
    tmux_root = Path(tempfile.mkdtemp(prefix="reviewer-tmux-"))
    (home / "config" / "reviewer").mkdir(parents=True)
    (home / "work").mkdir()
    reviewer_token = queue.service.token(f"operator-{home.name[-8:]}", "reviewer")
    (home / "config" / "reviewer" / "token").write_text(reviewer_token)
    (home / "extra-secret").write_text(EXTRA_SECRET)
    (home / ".profile").write_text("# the operator's own\n")
    for path in [home, *home.rglob("*"), tmux_root, *tmux_root.rglob("*")]:
        os.chown(path, OPERATOR, OPERATOR)
    home.chmod(0o700)
    tmux_root.chmod(0o700)
    sockets = (tmux_root / f"tmux-{OPERATOR}" / "default", home / "work" / "tmux.sock")
    sockets[0].parent.mkdir(mode=0o700)
    os.chown(sockets[0].parent, OPERATOR, OPERATOR)
    operator = Operator(home, reviewer_token, 0, sockets, (home / ".profile").read_bytes())
    agent_pid = 0
    try:
        for path in sockets:
            operator.run(
                shared,
                ["tmux", "-S", str(path), "new-session", "-d", "sh"],
                API_TOKEN=API_TOKEN,
            )
        started = operator.run(shared, ["ssh-agent", "-s", "-a", str(operator.agent_socket)])
        agent_pid = int(started.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
        key = home / "key"
        operator.run(
            shared, ["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", AGENT_KEY_COMMENT, "-f", str(key)]
        )
        operator.run(shared, ["ssh-add", "-q", str(key)])
        operator.agent_pid = agent_pid
        yield operator
    finally:
        for path in sockets:
            subprocess.run([*as_user(OPERATOR), "tmux", "-S", str(path), "kill-server"], capture_output=True)
        if agent_pid:
            os.kill(agent_pid, 15)
        shutil.rmtree(home, ignore_errors=True)
        shutil.rmtree(tmux_root, ignore_errors=True)


@pytest.fixture(scope="module")
def operator(queue: Queue, shared: SharedInstall) -> Iterator[Operator]:
    yield from make_operator(queue, shared)


def start_as_operator(
    queue: Queue, api: SampleApi, operator: Operator, shared: SharedInstall, *options: str, command: list[str]
) -> RunProcess:
    """`reviewer run` as the operator starts it (`python -P`: the working directory is not on the
    import path), under a `timeout` wrapper started with the credential and the agent token."""
    environment = {
        **operator.environment(shared),
        "API_TOKEN": API_TOKEN,
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "PYTHONUNBUFFERED": "1",
    }
    arguments = run_arguments(
        queue,
        api,
        "--poll-interval",
        "0.1",
        "--api-header",
        f"X-Extra: file:{operator.credential_file}",
        *options,
        command=command,
    )
    process = subprocess.Popen(
        [*as_user(OPERATOR), "timeout", "300", shared.python, "-P", "-m", "reviewer", *arguments],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        text=True,
        env=environment,
        cwd=operator.work,
    )
    return RunProcess(process)


def look_spec(queue: Queue, api: SampleApi, operator: Operator, shared: SharedInstall, **more: Any) -> str:
    return json.dumps(
        {
            "report": str(operator.work / "report.json"),
            "api": api.url,
            "queue": queue.url,
            "config": str(operator.config),
            "credential_file": str(operator.credential_file),
            "agent_socket": str(operator.agent_socket),
            "tmux_sockets": [str(path) for path in operator.tmux_sockets],
            "tmux_proof": str(operator.tmux_proof),
            **more,
        }
    )


@dataclass
class Attack:
    """What the child and the second user found and did, and how the run ended."""

    child: dict[str, Any]
    second_user: dict[str, Any]
    plan: list[tuple[str, str, Any]]
    status: int
    stderr: str
    leftover: str
    plant: list[str]


@pytest.fixture(scope="module")
def attack(queue: Queue, _sample_api_process: SampleApi, operator: Operator, shared: SharedInstall) -> Attack:
    api = _sample_api_process
    api.reset()
    ready, go = operator.work / "ready", operator.work / "go"
    for fifo in (ready, go):
        os.mkfifo(fifo)
        os.chown(fifo, OPERATOR, OPERATOR)
    leftover = f"reviewer-leftover-{secrets.token_hex(6)}"
    plant = [str(folder / "reviewer-planted.pth") for folder in shared.site_dirs]
    plant += [str(shared.project / "reviewer" / "planted.pth"), str(operator.home / ".profile")]
    spec = look_spec(
        queue,
        api,
        operator,
        shared,
        plant=plant,
        plant_line=PLANTED,
        leftover=leftover,
        ready=str(ready),
        go=str(go),
    )
    run = start_as_operator(
        queue,
        api,
        operator,
        shared,
        "--title",
        "hostile",
        command=["python3", shared.file("tests/run/hostile.py"), "look", spec],
    )
    with open(ready) as waiting:
        assert waiting.read() == "ready"  # the child has called the gate once and waits
    intruder = subprocess.Popen(
        [*as_user(SECOND_USER), shared.python, shared.file("tests/run/hostile.py"), "intrude"]
        + [json.dumps({"operator_uid": OPERATOR})],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd="/",
    )
    assert intruder.stdout is not None and intruder.stdin is not None
    assert intruder.stdout.readline() == "holding\n", intruder.stderr
    with open(go, "w") as release:  # the child calls the gate again while the second user holds on
        release.write("go")
    proposal_id, _ = run.wait_for_plan()
    second_user_out, second_user_err = intruder.communicate("", timeout=120)
    state = queue.reviewer.get(f"/v1/proposals/{proposal_id}/revisions/1").json()
    plan = [
        (call["request"]["method"], call["request"]["path"], call["request"]["body"])
        for call in state["calls"]
    ]
    reviewer_decides(queue, proposal_id, "reject", reason="a test of the sandbox")
    status, stderr = run.finish()
    child = json.loads((operator.work / "report.json").read_text())
    assert second_user_out, second_user_err
    return Attack(child, json.loads(second_user_out), plan, status, stderr, leftover, plant)


def secrets_of(queue: Queue, operator: Operator) -> list[str]:
    return [
        API_TOKEN,
        queue.agent_token,
        operator.reviewer_token,
        EXTRA_SECRET,
        AGENT_KEY_COMMENT.encode().hex(),
    ]


def test_the_run_says_its_mode_and_the_child_found_no_secret_and_its_words_open_nothing(
    attack: Attack, queue: Queue, operator: Operator, _sample_api_process: SampleApi
) -> None:
    assert attack.stderr.startswith(
        "reviewer run: sandbox: namespaces (bubblewrap): a root of the system's /usr and /etc's needed files"
    )
    assert "no Unix socket (seccomp)" in attack.stderr.splitlines()[0]
    seen = json.dumps(attack.child["seen"])
    assert [secret for secret in secrets_of(queue, operator) if secret in seen] == []
    assert attack.child["accepted"] == {"api": [], "queue": []} and attack.child["words"]
    # Not even a refusal: the host's loopback services are out of its network.
    assert attack.child["reached"] == {"api": 0, "queue": 0}
    # Its own processes only (the sandbox's init, the relay, itself); none of its ancestors.
    assert "timeout" not in seen and "-m reviewer" not in seen
    assert attack.child["seen"]["config"] == {}
    assert attack.child["seen"]["credential_file"] == "<FileNotFoundError>"
    assert _sample_api_process.audit() == []


def test_the_agent_socket_answers_outside_and_not_in_the_sandbox(attack: Attack, operator: Operator) -> None:
    """The fake is a real ssh-agent: from outside, its answer names the operator's key, so a child
    that reached it would carry the key's comment in its report."""
    answer = agent_socket(str(operator.agent_socket))  # root, outside the sandbox
    assert AGENT_KEY_COMMENT.encode().hex() in answer
    assert attack.child["seen"]["agent_socket"].startswith("<")


def test_the_operators_tmux_servers_run_nothing_for_the_child(
    attack: Attack, operator: Operator, shared: SharedInstall
) -> None:
    for path, answers in attack.child["seen"]["tmux"].items():
        assert not any(answer.startswith("0:") for answer in answers), (path, answers)
    assert not operator.tmux_proof.exists()
    # Outside the sandbox the same command runs as the operator: the servers were there to be used.
    for path in operator.tmux_sockets:
        shown = operator.run(shared, ["tmux", "-S", str(path), "show-environment", "-g", "API_TOKEN"])
        assert shown.stdout.strip() == f"API_TOKEN={API_TOKEN}"


def test_nothing_is_planted_in_the_reviewers_installation_or_the_operators_dotfiles(
    attack: Attack, operator: Operator
) -> None:
    site_dirs, profile = attack.plant[:-1], attack.plant[-1]
    for path in site_dirs:
        assert attack.child["done"]["planted"][path].startswith("<OSError: Read-only file system")
        assert not Path(path).exists()
    # `~/.profile` is an empty folder's new file in the sandbox: written there, gone with it.
    assert attack.child["done"]["planted"][profile] == "written"
    assert (operator.home / ".profile").read_bytes() == operator.profile_before
    assert not Path("/tmp/reviewer-planted").exists()


def test_a_setsid_process_the_child_left_is_gone_when_the_run_ends(attack: Attack) -> None:
    alive = [
        entry.name
        for entry in Path("/proc").iterdir()
        if entry.name.isdigit() and attack.leftover.encode() in _cmdline(entry)
    ]
    assert alive == []


def _cmdline(entry: Path) -> bytes:
    try:
        return (entry / "cmdline").read_bytes()
    except OSError:
        return b""


def test_a_second_user_gets_nothing_adds_nothing_and_cannot_fill_the_gate(
    attack: Attack, queue: Queue, operator: Operator, _sample_api_process: SampleApi
) -> None:
    found = attack.second_user
    seen = json.dumps(found["seen"])
    assert [secret for secret in secrets_of(queue, operator) if secret in seen] == []
    # It found the run's processes but none of their environments, no port and no socket of the operator.
    assert "reviewer run" in seen and "bwrap" in seen and found["urls"]
    assert found["operator_ports"] == [] and found["held"] == 0 and found["operator_sockets"] == []
    assert found["accepted"] == []
    # The child's two calls went through while it tried; the plan holds them and nothing else.
    assert attack.child["gate"] == [201, 201]
    assert attack.plan == [
        ("POST", "/v1/tickets", {"title": "child call 1"}),
        ("POST", "/v1/tickets", {"title": "child call 2"}),
    ]
    assert _sample_api_process.audit() == []


@dataclass
class Late:
    """What the child reached of what the operator made after the run started, and what the run's own
    process offers the machine outside its sandbox."""

    child: dict[str, Any]
    accepted: int
    outside: list[str]
    sockets_held: int
    late_tmux_environment: str
    status: int
    stderr: str
    folder: Path


def read_fifo(path: Path, run: RunProcess, timeout: float = 120) -> str:
    """What the child writes to the FIFO `path`, failing at once if the run ends first (held open for
    writing here too, so that no writer yet is no end of file)."""
    descriptor = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    try:
        for _ in range(int(timeout * 4)):
            if select.select([descriptor], [], [], 0.25)[0]:
                return os.read(descriptor, 4096).decode()
            if run.process.poll() is not None:
                _, rest = run.process.communicate()
                raise AssertionError(f"reviewer run ended first: {''.join(run.lines)}{rest}")
        raise AssertionError(f"nothing written to {path} in {timeout} s")
    finally:
        os.close(descriptor)


def child_of(pid: int) -> int:
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            with contextlib.suppress(OSError):
                if f"\nPPid:\t{pid}\n" in (entry / "status").read_text():
                    return int(entry.name)
    raise AssertionError(f"process {pid} has no child")


def sockets_of(pid: int) -> set[str]:
    """The inodes of the sockets process `pid` holds."""
    inodes = set()
    for descriptor in Path(f"/proc/{pid}/fd").iterdir():
        with contextlib.suppress(OSError):
            link = os.readlink(descriptor)
            if link.startswith("socket:["):
                inodes.add(link[len("socket:[") : -1])
    return inodes


def reachable_from_here(inodes: set[str]) -> list[str]:
    """Those of `inodes` another process of this machine's network could connect to: a Unix socket
    with a name or listening, a TCP port listening (as /proc/net lists them for this network)."""
    found = []
    for line in Path("/proc/net/unix").read_text().splitlines()[1:]:
        fields = line.split(None, 7)
        if fields[6] in inodes and (len(fields) == 8 or int(fields[3], 16) & 0x10000):
            found.append(f"unix {fields[7] if len(fields) == 8 else '(listening, no name)'}")
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes and fields[3] == "0A":
                found.append(f"tcp {fields[1]}")
    return found


@pytest.fixture(scope="module")
def late(
    queue: Queue, _sample_api_process: SampleApi, operator: Operator, shared: SharedInstall
) -> Iterator[Late]:
    """The operator starts the run, then, while the child waits, does what an on-call engineer does
    next: opens tmux with `TMUX_TMPDIR` in a folder of its own outside /tmp and its home, and starts a
    service listening in that folder and in the working directory. Then the child tries them all."""
    api = _sample_api_process
    api.reset()
    folder = Path(tempfile.mkdtemp(prefix="reviewer-late-", dir="/"))
    tmux_dir = folder / "tmux"
    tmux_dir.mkdir()
    for path in (folder, tmux_dir):
        os.chown(path, OPERATOR, OPERATOR)
        path.chmod(0o755)
    late_tmux = tmux_dir / f"tmux-{OPERATOR}" / "default"
    ready, go = operator.work / "late-ready", operator.work / "late-go"
    for fifo in (ready, go):
        os.mkfifo(fifo)
        os.chown(fifo, OPERATOR, OPERATOR)
    services = [str(folder / "service.sock"), str(operator.work / "late.sock")]
    spec = json.dumps(
        {
            "report": str(operator.work / "late-report.json"),
            "ready": str(ready),
            "go": str(go),
            "late_tmux": str(late_tmux),
            "late_sockets": services,
            "tmux_proof": str(operator.home / "late-tmux-ran-this"),
            "look_in": ["/", "/etc", str(folder)],
            "read": ["/etc/shadow", "/etc/ssh/ssh_host_ed25519_key", "/etc/hosts"],
        }
    )
    run = start_as_operator(
        queue,
        api,
        operator,
        shared,
        "--title",
        "later",
        command=["python3", shared.file("tests/run/hostile.py"), "later", spec],
    )
    listener = None
    try:
        assert read_fifo(ready, run) == "ready"
        # The run is under way; what the operator makes now was on no list the run made at its start.
        operator.run(
            shared,
            ["tmux", "new-session", "-d", "sh"],
            TMUX="",
            TMUX_TMPDIR=str(tmux_dir),
            API_TOKEN=API_TOKEN,
        )
        listener = subprocess.Popen(
            [*as_user(OPERATOR), shared.python, shared.file("tests/run/hostile.py"), "listen", *services],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            cwd=operator.work,
        )
        assert listener.stdout is not None and listener.stdout.readline() == "listening\n"
        gate = child_of(run.process.pid)
        held = sockets_of(gate)
        outside = reachable_from_here(held)
        with open(go, "w") as release:
            release.write("go")
        proposal_id, _ = run.wait_for_plan()
        reviewer_decides(queue, proposal_id, "reject", reason="a test of the sandbox")
        status, stderr = run.finish()
        accepted, _ = listener.communicate("", timeout=30)
        shown = operator.run(shared, ["tmux", "-S", str(late_tmux), "show-environment", "-g", "API_TOKEN"])
        child = json.loads((operator.work / "late-report.json").read_text())
        yield Late(child, int(accepted), outside, len(held), shown.stdout.strip(), status, stderr, folder)
    finally:
        if listener is not None and listener.poll() is None:
            listener.kill()
        subprocess.run([*as_user(OPERATOR), "tmux", "-S", str(late_tmux), "kill-server"], capture_output=True)
        if run.process.poll() is None:
            run.process.kill()
        shutil.rmtree(folder, ignore_errors=True)


def test_tmux_opened_after_the_run_starts_runs_nothing_for_the_child(late: Late, operator: Operator) -> None:
    """The server the operator started once the child was running holds the credential in its
    environment, and answers the operator; the child cannot even open a socket to ask it."""
    assert late.late_tmux_environment == f"API_TOKEN={API_TOKEN}"
    assert late.child["tmux"].startswith("1: ") and not (operator.home / "late-tmux-ran-this").exists()


def test_sockets_made_after_the_start_in_the_operators_folders_and_the_working_directory_are_out_of_reach(
    late: Late, operator: Operator
) -> None:
    in_folder, in_work = (str(late.folder / "service.sock"), str(operator.work / "late.sock"))
    # The folder outside /tmp and the home is not in the sandbox at all; the working directory is,
    # and its socket is there to see, but no Unix socket can be made to connect to it.
    assert late.child["listing"][str(late.folder)] == "ENOENT"
    assert late.child["connected"] == {in_folder: "EACCES", in_work: "EACCES"}
    assert late.accepted == 0
    assert late.child["gate"] == 201 and "rejected by alice" in late.stderr, late.stderr


def test_the_child_opens_no_unix_socket_by_any_call_but_keeps_socketpair_and_its_network(late: Late) -> None:
    found = late.child
    assert (found["unix_socket"], found["unix_datagram"], found["high_bits"]) == ("EACCES",) * 3
    assert found["io_uring"] == "ENOSYS"
    assert (found["socketpair"], found["inet"]) == ("ok", "ok")


def test_the_root_holds_the_system_and_the_needed_files_of_etc_only(late: Late) -> None:
    root, etc = late.child["listing"]["/"], late.child["listing"]["/etc"]
    assert late.folder.name not in root and "home" not in root and "srv" not in root and "root" not in root
    assert {"usr", "etc", "tmp", "proc", "dev"} <= set(root)
    assert {"hosts", "passwd", "ld.so.cache"} <= set(etc) and not {"shadow", "ssh", "sudoers"} & set(etc)
    assert late.child["read"]["/etc/shadow"] == late.child["read"]["/etc/ssh/ssh_host_ed25519_key"]
    assert late.child["read"]["/etc/shadow"].startswith("<FileNotFoundError")
    assert "localhost" in late.child["read"]["/etc/hosts"]


def test_the_gate_has_no_socket_any_process_outside_the_sandbox_can_connect_to(late: Late) -> None:
    """A second process of the operator's own uid finds nothing to connect to: the run's process holds
    sockets (its clients, the handover), but none with a name, none listening on this machine's
    network: the gate listens in the child's network alone."""
    assert late.sockets_held > 0
    assert late.outside == []


def test_without_the_sandbox_the_same_child_takes_what_the_operator_holds(
    queue: Queue, sample_api: SampleApi, operator: Operator, shared: SharedInstall, attack: Attack
) -> None:
    """What --no-sandbox costs, shown: the `timeout` wrapper's environment hands over the credential,
    the config folder the reviewer's login, tmux runs the child's command. The gate's own process
    shows nothing: it is not dumpable, and the secrets' entries in its initial environment were
    overwritten."""
    proof = operator.home / "tmux-ran-this-unsandboxed"
    spec = look_spec(queue, sample_api, operator, shared, tmux_proof=str(proof))
    run = start_as_operator(
        queue,
        sample_api,
        operator,
        shared,
        "--no-sandbox",
        command=["python3", shared.file("tests/run/hostile.py"), "look", spec],
    )
    status, stderr = run.finish(timeout=180)
    assert status == 0 and "COMMAND made no write" in stderr, stderr
    assert stderr.startswith("reviewer run: sandbox: none (--no-sandbox)")
    found = json.loads((operator.work / "report.json").read_text())
    assert API_TOKEN in found["accepted"]["api"]
    assert operator.reviewer_token in found["accepted"]["queue"]
    assert proof.exists() and found["reached"]["api"] == 200
    assert AGENT_KEY_COMMENT.encode().hex() in found["seen"]["agent_socket"]
    gates = [
        seen
        for seen in found["seen"]["processes"].values()
        if seen["cmdline"].startswith(f"{shared.python} -P -m reviewer run ")
    ]
    assert gates and all(seen["environ"] == "<PermissionError>" for seen in gates)


def test_the_gates_initial_environment_holds_no_secret(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """Read as root (who may read a non-dumpable process): /proc/PID/environ, the memory the gate's
    environment was started in, no longer holds the credential or the agent token."""
    go = tmp_path / "go"
    os.mkfifo(go)
    process = subprocess.Popen(
        [sys.executable, "-m", "reviewer", "run", "--api", sample_api.url, "--queue", queue.url]
        + ["--api-header", "Authorization: Bearer env:API_TOKEN", "--writable", str(tmp_path)]
        + ["--", "cat", str(go)],
        env={**os.environ, "API_TOKEN": API_TOKEN, "REVIEWER_AGENT_TOKEN": queue.agent_token},
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with open(go, "w") as release:
            # The child is waiting on the FIFO, so the gate is serving and sealed by now.
            environ = Path(f"/proc/{process.pid}/environ").read_bytes()
            cmdline = Path(f"/proc/{process.pid}/cmdline").read_bytes()
            release.write("done")
        assert b"reviewer\0run" in cmdline
        assert API_TOKEN.encode() not in environ and queue.agent_token.encode() not in environ
        assert b"API_TOKEN=" not in environ and b"REVIEWER_AGENT_TOKEN=" not in environ
    finally:
        _, stderr = process.communicate(timeout=60)
    assert process.returncode == 0, stderr


def test_unsandboxed_another_users_requests_to_the_gates_port_get_403_and_never_reach_the_api(
    queue: Queue, sample_api: SampleApi, tmp_path: Path, shared: SharedInstall
) -> None:
    """Where COMMAND shares the machine's network (--no-sandbox, another user) the gate listens on a
    loopback port, and answers only requests under the run's secret."""
    go, port_file = tmp_path / "go", tmp_path / "port"
    os.mkfifo(go)
    process = reviewer_process(
        [sys.executable, "-m", "reviewer", "run", "--api", sample_api.url, "--queue", queue.url]
        + ["--api-header", "Authorization: Bearer env:API_TOKEN", "--no-sandbox", "--"]
        + [sys.executable, shared.file("tests/run/hostile.py"), "wait", str(port_file), str(go)],
        env={**os.environ, "API_TOKEN": API_TOKEN, "REVIEWER_AGENT_TOKEN": queue.agent_token},
        stderr=subprocess.PIPE,
        text=True,
    )
    with open(go, "w") as release:
        port = port_file.read_text()
        answered = subprocess.run(
            [*as_user(SECOND_USER), shared.python, shared.file("tests/run/hostile.py"), "intrude-port"]
            + [f"http://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            cwd="/",
        )
        release.write("done")
    _, stderr = process.communicate(timeout=60)
    assert answered.stdout.split() == ["403", "403", "403"], answered.stderr
    assert process.returncode == 0 and "COMMAND made no write" in stderr
    assert sample_api.requests() == [] and sample_api.audit() == []


def test_as_root_without_namespaces_each_run_has_a_uid_of_its_own_and_leaves_nothing(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """No bubblewrap on PATH: root runs COMMAND as a uid made for the run, says so first, and kills
    every process of that uid when the run ends (a `setsid -f` one included)."""
    tools = Path(tempfile.mkdtemp(prefix="reviewer-tools-"))  # any uid may run what it links to
    tools.chmod(0o755)
    for name in ("sh", "setpriv", "setsid", "sleep", "id"):
        found = shutil.which(name)
        assert found is not None
        (tools / name).symlink_to(found)
    uids, leftovers = [], []
    for _ in range(2):
        leftover = str(7_000_000 + secrets.randbelow(1_000_000))
        ran = subprocess.run(
            [sys.executable, "-m", "reviewer", "run", "--api", sample_api.url, "--queue", queue.url, "--"]
            + ["sh", "-c", f"id -u; setsid -f sleep {leftover}"],
            env={**os.environ, "PATH": str(tools), "REVIEWER_AGENT_TOKEN": queue.agent_token},
            capture_output=True,
            text=True,
            cwd="/",
            timeout=120,
        )
        assert ran.returncode == 0, ran.stderr
        uid = int(ran.stdout.strip())
        assert ran.stderr.startswith(f"reviewer run: sandbox: another user (uid {uid}, made for this run")
        uids.append(uid)
        leftovers.append(leftover)
        assert [
            entry.name
            for entry in Path("/proc").iterdir()
            if _cmdline(entry) == f"sleep\0{leftover}\0".encode()
        ] == []
    shutil.rmtree(tools)
    assert uids[0] != uids[1] and min(uids) >= 0x7F000000


def test_the_namespace_prefix_binds_only_what_it_hands_over(tmp_path: Path) -> None:
    """The words themselves: the home an empty folder (but for a folder named readable), the working
    folder writable, an installation inside it read-only, a hidden file /dev/null, a socket covered."""
    home, work = tmp_path / "home", tmp_path / "home" / "work"
    venv, shown, secret = work / ".venv", home / "shown", home / "secret"
    config, credential = work / "config", work / "credential"
    for folder in (venv, shown, config):
        folder.mkdir(parents=True)
    secret.write_text("s3cret")
    (config / "token").write_text("t0ken")
    credential.write_text("cr3dential")
    (home / ".profile").write_text("kept")
    (shown / "file").write_text("seen\n")
    prefix = namespace_prefix(
        Reach(work, readable=(shown,)),
        hidden=[secret, config, credential],
        home=[home],
        installation=[venv],
    )
    # Made after the words were: a folder outside everything handed over, as a service's would be.
    later = Path(tempfile.mkdtemp(prefix="reviewer-made-later-", dir="/"))
    (later / "file").write_text("later")
    script = (
        f"ls -A {home}; cat {secret} {shown}/file; touch {work}/made {venv}/planted {home}/.profile-2 2>&1;"
        f" echo > {home}/.profile; find /run /dev/shm /var/tmp -mindepth 1 | wc -l;"
        f" readlink {' '.join(f'/proc/self/ns/{kind}' for kind in NAMESPACES)};"
        f" ls -A {config}; cat {credential}"
    )
    ran = subprocess.run([*prefix, "--", "sh", "-c", script], capture_output=True, text=True)
    said = ran.stdout.split("\n")
    assert said[:3] == ["shown", "work", "seen"], ran.stdout + ran.stderr
    assert "Read-only file system" in said[3] and said[4] == "0"
    outside = [os.readlink(f"/proc/self/ns/{kind}") for kind in NAMESPACES]
    inside = said[5 : 5 + len(NAMESPACES)]
    assert [
        kind for kind, here, there in zip(NAMESPACES, outside, inside, strict=True) if here == there
    ] == []
    # Hidden where the child may look: an empty folder, an empty file.
    assert said[5 + len(NAMESPACES) :] == [""]
    assert "s3cret" not in ran.stdout
    assert (work / "made").exists() and not (venv / "planted").exists()
    assert (home / ".profile").read_text() == "kept" and not (home / ".profile-2").exists()
    # The root is made of what is handed over: a folder made later elsewhere, /etc's secrets, absent.
    try:
        looked = subprocess.run(
            [
                *prefix,
                "--",
                "sh",
                "-c",
                f"for p in {later} /etc/shadow /etc/hosts; do test -e $p && echo $p; done",
            ],
            capture_output=True,
            text=True,
        )
    finally:
        shutil.rmtree(later)
    assert looked.stdout.split() == ["/etc/hosts"], looked.stderr


def test_the_working_directory_or_a_writable_path_may_not_hold_the_home_or_the_root(tmp_path: Path) -> None:
    home = tmp_path / "home"
    (home / "project").mkdir(parents=True)
    environ = {"HOME": str(home)}
    assert check_reach(Reach(home / "project"), environ).working_dir == home / "project"
    for reach in (Reach(home), Reach(home / "project", writable=(tmp_path,)), Reach(Path("/"))):
        with pytest.raises(SandboxRefused, match="COMMAND would write your"):
            check_reach(reach, environ)
    with pytest.raises(SandboxRefused, match="--readable .*: no such file or folder"):
        check_reach(Reach(home / "project", readable=(tmp_path / "absent",)), environ)


def test_with_share_network_the_child_keeps_the_network_and_the_gates_url_holds_a_secret(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """What --share-network costs: the host's loopback answers the child (without the credential), and
    the gate is a loopback port behind the run's secret; the file system stays as in the sandbox, and
    no Unix socket opens, so the machine's abstract sockets stay out of reach."""
    seen = tmp_path / "seen"
    script = (
        'printf "url = \\"%s/v1/tickets\\"\\n" "$REVIEWER_API_URL"'
        ' | curl -sS -K - -o /dev/null -w "%{http_code} ";'
        f' curl -sS -o /dev/null -w "%{{http_code}} " {sample_api.url}/v1/tickets;'
        f' echo "$REVIEWER_API_URL"; ls -A /run'
    )
    # The machine's abstract sockets share its network; the filter keeps every Unix socket closed.
    script += "; python3 -c 'import socket; socket.socket(socket.AF_UNIX)' 2>&1 | tail -n 1 >&2"
    run = start_run(
        queue, sample_api, "--share-network", writable=tmp_path, command=["sh", "-c", f"({script}) > {seen}"]
    )
    status, stderr = run.finish()
    assert status == 0 and "COMMAND made no write" in stderr, stderr
    assert "--share-network: the host's loopback services too" in stderr
    assert "no Unix socket (seccomp)" in stderr
    through_gate, direct, url, *in_run = seen.read_text().split()
    assert (through_gate, direct) == ("200", "200")
    assert len(url.rsplit("/", 1)[1]) >= 40 and url.startswith("http://127.0.0.1:")
    assert in_run == []
    assert "PermissionError: [Errno 13] Permission denied" in stderr


def test_a_program_outside_what_the_sandbox_shows_is_named_with_what_it_shows(
    queue: Queue, sample_api: SampleApi
) -> None:
    """The root holds /usr, the working directory and what is handed over: an agent installed in a
    folder of its own elsewhere is not there, and the run says so, and how to hand it over."""
    folder = Path(tempfile.mkdtemp(prefix="reviewer-agent-elsewhere-", dir="/"))
    try:
        agent = folder / "agent"
        agent.write_text("#!/bin/sh\nexit 0\n")
        agent.chmod(0o755)
        status, stderr = start_run(queue, sample_api, command=[str(agent)]).finish()
    finally:
        shutil.rmtree(folder)
    assert status != 0 and "COMMAND exited with status 127" in stderr, stderr
    assert f"cannot start '{agent}': No such file or directory (the sandbox shows the system's /usr" in stderr
    assert "--readable" in stderr
