"""`reviewer run` as a boundary, tried as an attacker of the operator's own user would try it: the whole
run as an unprivileged user (`setpriv` to `nobody`), the credential exported by an ancestor, a reviewer's
login in the configuration folder, an agent socket, and a child that looks everywhere and tries every
token-like word it finds against the API and the queue."""

from __future__ import annotations

import json
import os
import shutil
import site
import socket
import stat
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from reviewer.run.sandbox import namespace_prefix
from tests.run.conftest import API_TOKEN, ROOT, Queue, SampleApi, run_arguments

HOSTILE = str(Path(__file__).with_name("hostile.py"))
NOBODY = 65534
AS_NOBODY = ["setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups", "--"]
EXTRA_SECRET = "file-held-extra-secret-51d0"


def _python_for_nobody() -> tuple[str, dict[str, str]] | str:
    """An interpreter `nobody` may run with the project importable, and the environment it needs (this
    one, or the system's of the same version given this one's packages); else why there is none."""
    if os.geteuid() != 0:
        return "switching to another user needs root (setpriv)"
    if shutil.which("setpriv") is None or shutil.which("bwrap") is None:
        return "setpriv and bubblewrap are needed"
    system = shutil.which(f"python{sys.version_info.major}.{sys.version_info.minor}", path="/usr/bin")
    packages = {"PYTHONPATH": os.pathsep.join([*site.getsitepackages(), str(ROOT)])}
    for python, extra in [(sys.executable, {}), *([(system, packages)] if system else [])]:
        # Through `timeout`, as the tests run it: the interpreter is found and opened as nobody.
        probe = subprocess.run(
            [*AS_NOBODY, "env", *(f"{name}={value}" for name, value in extra.items())]
            + ["timeout", "60", python, "-c", "import reviewer.run.sandbox"],
            capture_output=True,
            cwd="/",
        )
        if probe.returncode == 0:
            return python, extra
    return f"no Python interpreter nobody may run imports the project from {ROOT}"


PYTHON_FOR_NOBODY = _python_for_nobody()
pytestmark = pytest.mark.skipif(isinstance(PYTHON_FOR_NOBODY, str), reason=str(PYTHON_FOR_NOBODY))


def nobody_python() -> tuple[str, dict[str, str]]:
    assert not isinstance(PYTHON_FOR_NOBODY, str)
    return PYTHON_FOR_NOBODY


@dataclass
class Operator:
    """An unprivileged operator's home: a reviewer's login token, an agent socket, a credential file."""

    home: Path
    reviewer_token: str
    agent_socket: Path
    credential_file: Path

    @property
    def config(self) -> Path:
        return self.home / "config" / "reviewer"


@pytest.fixture
def operator(queue: Queue) -> Iterator[Operator]:
    home = Path(tempfile.mkdtemp(prefix="reviewer-operator-"))
    config = home / "config" / "reviewer"
    config.mkdir(parents=True)
    reviewer_token = queue.service.token(f"operator-{home.name[-8:]}", "reviewer")
    (config / "token").write_text(reviewer_token)
    credential_file = home / "extra-secret"
    credential_file.write_text(EXTRA_SECRET)
    agent_socket = home / "agent.sock"
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(str(agent_socket))
    listener.listen()
    for path in [home, *home.rglob("*")]:
        os.chown(path, NOBODY, NOBODY)
    home.chmod(0o700)
    try:
        yield Operator(home, reviewer_token, agent_socket, credential_file)
    finally:
        listener.close()
        shutil.rmtree(home)


def run_as_nobody(
    queue: Queue, api: SampleApi, operator: Operator, *options: str, command: list[str]
) -> subprocess.CompletedProcess[str]:
    """`reviewer run` as the operator `nobody` starts it, under a `timeout` wrapper that was started
    with the credential and the agent token in its environment (an ancestor the child may look at)."""
    python, extra = nobody_python()
    environment = {
        **extra,
        "PATH": os.environ["PATH"],
        "HOME": str(operator.home),
        "XDG_CONFIG_HOME": str(operator.home / "config"),
        "XDG_DATA_HOME": str(operator.home / "data"),
        "SSH_AUTH_SOCK": str(operator.agent_socket),
        "API_TOKEN": API_TOKEN,
        "REVIEWER_AGENT_TOKEN": queue.agent_token,
        "PYTHONDONTWRITEBYTECODE": "1",
    }
    arguments = [*AS_NOBODY, "timeout", "120", python, "-m", "reviewer"] + run_arguments(
        queue,
        api,
        "--api-header",
        f"X-Extra: file:{operator.credential_file}",
        *options,
        command=command,
    )
    return subprocess.run(
        arguments, capture_output=True, text=True, env=environment, cwd=operator.home, timeout=180
    )


def hostile_report(queue: Queue, api: SampleApi, operator: Operator, *options: str) -> dict[str, Any]:
    report = operator.home / "report.json"
    command = [
        nobody_python()[0],
        HOSTILE,
        "look",
        str(report),
        api.url,
        queue.url,
        str(operator.config),
        str(operator.agent_socket),
        str(operator.credential_file),
    ]
    ran = run_as_nobody(queue, api, operator, *options, command=command)
    assert ran.returncode == 0, ran.stderr
    assert "COMMAND made no write" in ran.stderr
    found: dict[str, Any] = json.loads(report.read_text())
    return found


def secrets_of(queue: Queue, operator: Operator) -> list[str]:
    return [API_TOKEN, queue.agent_token, operator.reviewer_token, EXTRA_SECRET]


def test_a_hostile_child_in_the_sandbox_finds_nothing_and_writes_nothing(
    queue: Queue, sample_api: SampleApi, operator: Operator
) -> None:
    found = hostile_report(queue, sample_api, operator)
    seen = json.dumps(found["seen"])
    assert [secret for secret in secrets_of(queue, operator) if secret in seen] == []
    assert found["accepted"] == {"api": [], "queue": []}
    # It saw only its own processes, and the gate's URL names no secret it could use elsewhere.
    assert "reviewer run" not in seen and "timeout" not in seen
    assert found["seen"]["config"] == {} and found["seen"]["agent_socket"].startswith("<")
    assert found["words"] and sample_api.audit() == []


def test_without_the_sandbox_the_same_child_takes_the_credential_from_an_ancestor(
    queue: Queue, sample_api: SampleApi, operator: Operator
) -> None:
    """What --no-sandbox costs, shown: the `timeout` wrapper's environment hands over the credential
    and the config folder the reviewer's login. The gate's own process shows nothing: it is not
    dumpable, and the secrets' entries in its initial environment were overwritten."""
    found = hostile_report(queue, sample_api, operator, "--no-sandbox")
    assert API_TOKEN in found["accepted"]["api"]
    assert operator.reviewer_token in found["accepted"]["queue"]
    assert [(line["method"], line["path"]) for line in sample_api.audit()] == [("PATCH", "/v1/tickets/t3")]
    python = nobody_python()[0]
    gates = [
        seen
        for seen in found["seen"]["processes"].values()
        if seen["cmdline"].startswith(f"{python} -m reviewer run ")
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
        + ["--api-header", "Authorization: Bearer env:API_TOKEN", "--", "cat", str(go)],
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


def test_another_users_requests_to_the_gate_get_403_and_never_reach_the_api(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    go, port_file = tmp_path / "go", tmp_path / "port"
    os.mkfifo(go)
    tmp_path.chmod(0o755)
    process = subprocess.Popen(
        [sys.executable, "-m", "reviewer", "run", "--api", sample_api.url, "--queue", queue.url]
        + ["--api-header", "Authorization: Bearer env:API_TOKEN", "--"]
        + [sys.executable, HOSTILE, "wait", str(port_file), str(go)],
        env={**os.environ, "API_TOKEN": API_TOKEN, "REVIEWER_AGENT_TOKEN": queue.agent_token},
        stderr=subprocess.PIPE,
        text=True,
    )
    with open(go, "w") as release:
        port = port_file.read_text()
        answered = subprocess.run(
            [*AS_NOBODY, nobody_python()[0], HOSTILE, "intrude", f"http://127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            cwd="/",
        )
        release.write("done")
    _, stderr = process.communicate(timeout=60)
    assert answered.stdout.split() == ["403", "403", "403"], answered.stderr
    assert process.returncode == 0 and "COMMAND made no write" in stderr
    assert sample_api.requests() == [] and sample_api.audit() == []


def test_the_sandbox_hides_the_credential_file_and_config_but_keeps_the_working_folder(
    tmp_path: Path,
) -> None:
    """The namespace prefix itself: a folder becomes an empty tmpfs, a file /dev/null, the rest stays."""
    folder, secret = tmp_path / "config", tmp_path / "secret"
    folder.mkdir()
    (folder / "token").write_text("t0ken")
    secret.write_text("s3cret")
    (tmp_path / "work.txt").write_text("kept")
    shown = subprocess.run(
        [
            *namespace_prefix([folder, secret]),
            "sh",
            "-c",
            f"ls -A {folder}; cat {secret} {tmp_path}/work.txt",
        ],
        capture_output=True,
        text=True,
    )
    assert shown.stdout == "kept"
    assert stat.S_ISDIR(folder.stat().st_mode)
