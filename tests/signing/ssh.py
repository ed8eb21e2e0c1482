"""Throwaway SSH keys, a real ssh-agent's handle, and `ssh-keygen -Y` as the reference."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import pytest

from reviewer.signing.sshsig import NAMESPACE, PublicKey


@dataclass(frozen=True)
class SshKey:
    """A key made by ssh-keygen: its private file (may be deleted), its `.pub`, its parsed public key."""

    private: Path
    public_file: Path

    @property
    def public(self) -> PublicKey:
        return PublicKey.from_file(self.public_file)


def make_key(folder: Path, name: str, key_type: str = "ed25519", bits: int | None = None) -> SshKey:
    private = folder / name
    command = ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-C", f"{name}@test", "-f", str(private)]
    if bits:
        command += ["-b", str(bits)]
    subprocess.run(command, check=True)
    return SshKey(private, folder / f"{name}.pub")


@dataclass(frozen=True)
class Agent:
    socket: str
    pid: int

    @property
    def environ(self) -> dict[str, str]:
        return {"SSH_AUTH_SOCK": self.socket}

    def add(self, key: SshKey) -> None:
        subprocess.run(
            ["ssh-add", "-q", str(key.private)],
            check=True,
            env={**os.environ, **self.environ},
            capture_output=True,
        )


@contextmanager
def running_agent(socket_path: Path) -> Iterator[Agent]:
    """A real ssh-agent listening at `socket_path`, killed at the end."""
    started = subprocess.run(
        ["ssh-agent", "-s", "-a", str(socket_path)], check=True, capture_output=True, text=True
    )
    pid = int(started.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
    try:
        yield Agent(str(socket_path), pid)
    finally:
        os.kill(pid, signal.SIGTERM)


def ssh_keygen_verify(
    allowed_signers: str,
    principal: str,
    signature: str,
    message: bytes,
    folder: Path,
    namespace: str = NAMESPACE,
) -> subprocess.CompletedProcess[bytes]:
    """`ssh-keygen -Y verify`, the reference: returncode 0 when the signature is good for `principal`."""
    allowed = folder / "allowed_signers"
    allowed.write_text(allowed_signers)
    signature_file = folder / "message.sig"
    signature_file.write_text(signature)
    return subprocess.run(
        [
            "ssh-keygen",
            "-Y",
            "verify",
            "-f",
            str(allowed),
            "-I",
            principal,
            "-n",
            namespace,
            "-s",
            str(signature_file),
        ],
        input=message,
        capture_output=True,
    )


def ssh_keygen_sign(
    key_file: Path,
    message: bytes,
    folder: Path,
    namespace: str = NAMESPACE,
    environ: dict[str, str] | None = None,
) -> str:
    """`ssh-keygen -Y sign`: with a `.pub` file it signs through the agent in `environ`."""
    message_file = folder / "to-sign"
    message_file.write_bytes(message)
    subprocess.run(
        ["ssh-keygen", "-q", "-Y", "sign", "-f", str(key_file), "-n", namespace, str(message_file)],
        check=True,
        capture_output=True,
        env={**os.environ, **(environ or {})},
    )
    signature_file = folder / "to-sign.sig"
    text = signature_file.read_text()
    signature_file.unlink()
    return text


@pytest.fixture
def agent(tmp_path: Path) -> Iterator[Agent]:
    """A real ssh-agent on its own socket, killed after the test."""
    with running_agent(tmp_path / "agent.sock") as running:
        yield running
