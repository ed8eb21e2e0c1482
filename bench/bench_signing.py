"""What signing and checking a decision costs: the reviewer's side, the queue's, the executor's.

Throwaway keys and a real ssh-agent started for the run. Signing through the agent (the protocol
spoken directly) and with a key file; verification by the project's code for each key type,
against `ssh-keygen -Y verify` run once per signature (what shelling out would cost); the
executor's check of a quorum of two; and, on a real `reviewer serve --policy` on loopback, a
decision round trip signed against unsigned. Prints medians; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx

from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.signed_approvals import SignedStatement, check_signed_approvals
from reviewer.signing.sshsig import (
    AgentSigner,
    DecisionStatement,
    PublicKey,
    SshSignature,
    sign_statement,
    signer_for,
)

DIGEST = "5be1" * 16


def median_ms(action: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        action()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def make_key(folder: Path, name: str, key_type: str, bits: int | None = None) -> Path:
    path = folder / name
    command = ["ssh-keygen", "-q", "-t", key_type, "-N", "", "-f", str(path)]
    if bits:
        command += ["-b", str(bits)]
    subprocess.run(command, check=True)
    return path


def statement(
    reviewer: str = "alice", proposal_id: str = "bench-1", plan_sha256: str = DIGEST
) -> DecisionStatement:
    return DecisionStatement(proposal_id, 1, plan_sha256, "approve", reviewer, "2026-11-30T09:00:00Z")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--repeat", type=int, default=200)
    parser.add_argument("--decisions", type=int, default=40, help="decisions per kind on the real queue")
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as name:
        folder = Path(name)
        socket_path = folder / "agent.sock"
        started = subprocess.run(
            ["ssh-agent", "-s", "-a", str(socket_path)], check=True, capture_output=True, text=True
        )
        agent_pid = int(started.stdout.split("SSH_AGENT_PID=")[1].split(";")[0])
        environ = {"SSH_AUTH_SOCK": str(socket_path)}
        try:
            run(folder, environ, options)
        finally:
            os.kill(agent_pid, signal.SIGTERM)


def run(folder: Path, environ: dict[str, str], options: argparse.Namespace) -> None:
    kinds = {"ed25519": ("ed25519", None), "rsa-3072": ("rsa", 3072), "ecdsa-p256": ("ecdsa", 256)}
    keys = {label: make_key(folder, label, key_type, bits) for label, (key_type, bits) in kinds.items()}
    for path in keys.values():
        subprocess.run(
            ["ssh-add", "-q", str(path)], check=True, env={**os.environ, **environ}, capture_output=True
        )
    message = statement().to_bytes()
    print(f"{'key':<12} {'sign (agent)':>13} {'sign (file)':>12} {'verify':>10} {'ssh-keygen -Y verify':>21}")
    for label, path in keys.items():
        public = PublicKey.from_file(Path(f"{path}.pub"))
        agent = AgentSigner(public, environ)
        from_file = signer_for(path)
        signature = sign_statement(statement(), agent)
        parsed = SshSignature.parse(signature)
        allowed = folder / f"{label}.allowed"
        allowed.write_text(f"alice {public.openssh()}\n")
        signature_file = folder / f"{label}.sig"
        signature_file.write_text(signature)
        reference = [
            "ssh-keygen",
            "-Y",
            "verify",
            "-f",
            str(allowed),
            "-I",
            "alice",
            "-n",
            "reviewer-decision@v1",
            "-s",
            str(signature_file),
        ]
        agent_ms = median_ms(lambda agent=agent: sign_statement(statement(), agent), options.repeat)
        file_ms = median_ms(lambda signer=from_file: sign_statement(statement(), signer), options.repeat)
        verify_ms = median_ms(lambda parsed=parsed: parsed.verify(message), options.repeat)
        keygen_ms = median_ms(
            lambda command=reference: subprocess.run(command, input=message, capture_output=True, check=True),
            max(10, options.repeat // 10),
        )
        print(
            f"{label:<12} {agent_ms:>10.2f} ms {file_ms:>9.2f} ms "
            f"{verify_ms * 1000:>7.0f} µs {keygen_ms:>18.2f} ms"
        )

    alice, bob = signer_for(keys["ed25519"]), signer_for(keys["ecdsa-p256"])
    signers_file = AllowedSigners.parse(
        f"alice {alice.public_key.openssh()}\nbob {bob.public_key.openssh()}\n"
    )
    signed = [
        SignedStatement(statement(who).to_bytes().decode(), sign_statement(statement(who), signer))
        for who, signer in (("alice", alice), ("bob", bob))
    ]
    check_ms = median_ms(
        lambda: check_signed_approvals(signers_file, 2, "bench-1", 1, DIGEST, signed), options.repeat
    )
    print(f"executor's check of a quorum of two (ed25519 + ECDSA): {check_ms:.2f} ms")
    queue_round_trip(folder, alice, options.decisions)


def queue_round_trip(folder: Path, alice_signer: object, decisions: int) -> None:
    """Median decision round trip on a real queue: unsigned (staging) against signed (production)."""
    db = folder / "queue.sqlite3"
    policy = folder / "policy.toml"
    policy.write_text("[environments.production]\nsignatures = true\n")
    python = [sys.executable, "-m", "reviewer"]

    def mint(name: str, role: str, *extra: str) -> str:
        made = subprocess.run(
            [*python, "token", "create", "--db", str(db), "--name", name, "--role", role, *extra],
            check=True,
            capture_output=True,
            text=True,
        )
        return made.stdout.strip()

    alice_pub = folder / "ed25519.pub"
    tokens = {
        "agent": mint("agent", "agent"),
        "alice": mint("alice", "reviewer", "--ssh-key", str(alice_pub)),
    }
    port = 18470 + os.getpid() % 1000
    service = subprocess.Popen(
        [*python, "serve", "--db", str(db), "--port", str(port), "--policy", str(policy)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                httpx.get(f"{url}/openapi.json", timeout=1)
                break
            except httpx.TransportError:
                time.sleep(0.05)
        agent = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens['agent']}"})
        alice = httpx.Client(base_url=url, headers={"Authorization": f"Bearer {tokens['alice']}"})
        figures = {}
        for environment, signed in (("staging", False), ("production", True)):
            times = []
            for index in range(decisions):
                proposal_id = f"bench-{environment}-{index}"
                plan = {
                    "format": "reviewer.proposal/v1",
                    "proposal_id": proposal_id,
                    "revision": 1,
                    "title": "t",
                    "agent": {"name": "bench"},
                    "created_at": "2026-11-30T09:00:00Z",
                    "target": {"api": "bench", "environment": environment},
                    "dry_run": {"via": "record"},
                    "calls": [{"seq": 1, "tool": "t", "effect": "update", "args": {"id": index}}],
                }
                digest = agent.post("/v1/proposals", json=plan).json()["plan_sha256"]
                request = {"revision": 1, "plan_sha256": digest, "decision": "approve"}
                start = time.perf_counter()
                if signed:
                    made = statement(proposal_id=proposal_id, plan_sha256=digest)
                    request["statement"] = made.to_bytes().decode()
                    request["signature"] = sign_statement(made, alice_signer)  # type: ignore[arg-type]
                answer = alice.post(
                    f"/v1/proposals/{proposal_id}/decisions",
                    json=request,
                    headers={"Idempotency-Key": f"k-{environment}-{index}"},
                )
                times.append(time.perf_counter() - start)
                assert answer.status_code == 201, answer.text
            figures[environment] = statistics.median(times) * 1000
        print(
            f"decision round trip on a real queue (fsync included), median of {decisions}: "
            f"unsigned {figures['staging']:.1f} ms, signed and verified {figures['production']:.1f} ms"
        )
    finally:
        service.terminate()
        service.wait(10)


if __name__ == "__main__":
    main()
