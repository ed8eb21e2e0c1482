"""The forking Python that spares the suite most `python -m reviewer` start-ups
(`tests/forked_commands.py`): a forked command must look to a test as `subprocess.Popen`'s does, and
a command whose start-up would read what it is given must start afresh."""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from reviewer.service.store.opener import open_store
from tests.forked_commands import (
    PER_TEST,
    SWITCH,
    ForkedPopen,
    forking_python,
    reviewer_process,
    run_reviewer,
)
from tests.queue_harness import reviewer_command
from tests.run.other_users import as_user, require_other_users
from tests.service.ports import free_port


@pytest.fixture
def forkable(monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    """A service's environment, with the forks on even in a run that turned them off."""
    monkeypatch.delenv(SWITCH, raising=False)
    return {**os.environ, "PYTHONUNBUFFERED": "1"}


def test_a_forked_command_answers_as_a_started_one_in_its_directory_and_environment(
    tmp_path: Path, forkable: dict[str, str]
) -> None:
    started = subprocess.run(
        [sys.executable, "-m", "reviewer", "--version"], capture_output=True, text=True, env=forkable
    )
    with reviewer_process(
        reviewer_command("--version"), stdout=subprocess.PIPE, text=True, env=forkable
    ) as process:
        assert isinstance(process, ForkedPopen)
        output, _ = process.communicate(timeout=30)
    assert (process.returncode, output) == (started.returncode, started.stdout)

    open_store(
        tmp_path / "queue.sqlite3", clock=time.time, pending_ttl=60, approval_ttl=60, create=True
    ).close()
    created = run_reviewer(
        reviewer_command("token", "create", "--db", "queue.sqlite3", "--name", "ops", "--role", "agent"),
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=forkable,
    )
    assert created.returncode == 0, created.stderr
    listed = run_reviewer(
        reviewer_command("token", "list", "--db", str(tmp_path / "queue.sqlite3")),
        capture_output=True,
        text=True,
    )
    assert "ops" in listed.stdout, "the token was made in the directory the command was given"
    refused = run_reviewer(
        reviewer_command("token", "list", "--db", "none.sqlite3"),
        capture_output=True,
        text=True,
        env=forkable,
    )
    assert refused.returncode == 1 and "no queue database at none.sqlite3" in refused.stderr


def test_a_forked_service_shows_its_own_start_is_killed_waited_for_and_reports_the_signal(
    tmp_path: Path, forkable: dict[str, str]
) -> None:
    """`/proc/PID/cmdline` and `environ` show the command and environment it was given, as a
    started one's would: tests read them as an attacker would, and a fork's are its forking
    Python's unless it says otherwise. The forking Python never held the credential."""
    require_own_start(forkable)
    credential = f"credential-{secrets.token_hex(16)}"
    environment = {**forkable, "API_TOKEN": credential, PER_TEST: "a test of its own"}
    command = reviewer_command("serve", "--db", str(tmp_path / "queue.sqlite3"), "--port", str(free_port()))
    with (tmp_path / "service.log").open("wb") as log:
        process = reviewer_process(command, stdout=log, stderr=log, env=environment)
    assert isinstance(process, ForkedPopen)
    try:
        assert Path(f"/proc/{process.pid}/cmdline").read_bytes() == b"".join(
            os.fsencode(argument) + b"\0" for argument in command
        )
        assert Path(f"/proc/{process.pid}/environ").read_bytes() == b"".join(
            f"{name}={value}\0".encode() for name, value in environment.items()
        )
        assert credential.encode() not in memory_of(forking_python(environment).pid)
        assert process.poll() is None
        try:
            process.wait(0.2)
            raise AssertionError("a service does not end by itself")
        except subprocess.TimeoutExpired:
            pass
    finally:
        process.send_signal(signal.SIGKILL)
    assert process.wait(30) == -signal.SIGKILL
    assert Path(f"/proc/{process.pid}").exists() is False, "the forking Python reaped it"


def require_own_start(environment: dict[str, str]) -> None:
    """Skip saying why a fork cannot show its own start here (a kernel without checkpoint and
    restore: then only commands in the forking Python's environment are forked); under CI, fail."""
    if forking_python(environment).shows_own_start:
        return
    reason = "this kernel refuses prctl(PR_SET_MM_MAP): a fork cannot show its own /proc/PID/environ"
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


def memory_of(pid: int) -> bytes:
    """Every readable and writable mapping of process `pid`: its heap, its stacks, its data."""
    memory = b""
    with open(f"/proc/{pid}/maps") as maps, open(f"/proc/{pid}/mem", "rb") as mem:
        for line in maps:
            addresses, permissions = line.split()[:2]
            if permissions.startswith("rw"):
                start, end = (int(address, 16) for address in addresses.split("-"))
                mem.seek(start)
                with contextlib.suppress(OSError):
                    memory += mem.read(end - start)
    return memory


def test_a_command_whose_start_up_reads_a_variable_it_is_given_is_started_afresh(
    forkable: dict[str, str],
) -> None:
    """The interpreter reads these as it starts (profiling, a preloaded library, the locale), or a
    module the forking Python imported read it (pydantic's plugins): a fork would not honour them."""
    for changed in (
        {"PYTHONPROFILEIMPORTTIME": "1"},
        {"LD_PRELOAD": ""},
        {"LANG": "C"},
        {"PYDANTIC_DISABLE_PLUGINS": "1"},
    ):
        with reviewer_process(
            reviewer_command("--version"), stdout=subprocess.DEVNULL, env={**forkable, **changed}
        ) as process:
            assert not isinstance(process, ForkedPopen), changed
    require_own_start(forkable)
    with reviewer_process(
        reviewer_command("--version"), stdout=subprocess.DEVNULL, env={**forkable, "API_TOKEN": "x"}
    ) as process:
        assert isinstance(process, ForkedPopen), "a variable no start-up reads is the child's alone"
    with reviewer_process(
        reviewer_command("--version"), stdout=subprocess.DEVNULL, env=forkable, start_new_session=True
    ) as process:
        assert not isinstance(process, ForkedPopen), "an option a fork does not honour"


CONNECT = "import socket, sys; socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).connect(sys.argv[1])"


def test_another_user_cannot_ask_the_forking_python_for_a_command(forkable: dict[str, str]) -> None:
    """The forking Python runs whatever it is asked as the suite's user: only that user may connect."""
    require_other_users()
    path = forking_python(forkable).socket_path
    python = f"/usr/bin/python{sys.version_info.major}.{sys.version_info.minor}"
    assert subprocess.run([python, "-c", CONNECT, path]).returncode == 0, "the suite's own user connects"
    refused = subprocess.run([*as_user(65534), python, "-c", CONNECT, path], capture_output=True, text=True)
    assert refused.returncode != 0 and "PermissionError" in refused.stderr, refused.stderr
    with reviewer_process(reviewer_command("--version"), stdout=subprocess.DEVNULL, env=forkable) as process:
        assert isinstance(process, ForkedPopen) and process.wait(30) == 0, (
            "a connection that asked nothing harmed nothing"
        )
