"""What starting `reviewer serve`, `reviewer run` and `reviewer mcp-gate` costs: CPU and wall time from
the exec to the first answer, the process stopped right after it.

Run: `python bench/bench_startup.py [--runs 7] [--tree PATH]`. `--tree` runs the commands from another
checkout's `reviewer` package (from its folder, which goes first on PYTHONPATH), to compare two
trees on one machine. The cases, each started `--runs` times, the cases alternating run by run:

- `serve`: `reviewer serve --db FILE` on a new SQLite file, to its first `200` on /healthz;
- `serve --web-origin`: the same with the review pages and passkey enrolment on;
- `run`: `reviewer run --api API --queue QUEUE -- true` to its exit: the gate started in front of the
  sample API, COMMAND sandboxed, run and ended without a write, nothing submitted;
- `mcp-gate`: `reviewer mcp-gate -- UPSTREAM` (the tests' small ticket server) to its answer to the
  host's `initialize`, read over stdio.

CPU is the user and system time of the process and everything it started and waited for, read with
`getrusage(RUSAGE_CHILDREN)` once it exited (so `run` counts bubblewrap and `true`, `mcp-gate` its
upstream server). Wall is from the exec to the first answer. Prints each case's median and the load
average; asserts nothing (the machine is shared).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
LOOPBACK = "127.0.0.1"
UPSTREAM = [sys.executable, str(ROOT / "tests" / "adapters" / "upstream_server.py")]
INITIALIZE = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "bench", "version": "1"},
    },
}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def children_cpu() -> float:
    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


def reviewer(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "reviewer", *arguments]


def answers(url: str, process: subprocess.Popen[bytes]) -> None:
    """Return once `url` answers 200; the poll sleeps 5 ms between tries."""
    with httpx.Client(timeout=2) as client:
        while True:
            if process.poll() is not None:
                raise RuntimeError(f"exited with {process.returncode} before answering {url}")
            try:
                if client.get(url).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.005)


@dataclass
class Case:
    name: str
    once: Callable[[dict[str, str]], float]
    """Start, wait for the first answer, stop: the wall seconds to that answer."""
    cpu: list[float] = field(default_factory=list)
    wall: list[float] = field(default_factory=list)


def serve_once(*options: str) -> Callable[[dict[str, str]], float]:
    def once(env: dict[str, str]) -> float:
        port = free_port()
        with tempfile.TemporaryDirectory() as folder:
            given = [option.replace("PORT", str(port)) for option in options]
            command = reviewer("serve", "--db", f"{folder}/queue.sqlite3", "--port", str(port), *given)
            started = time.perf_counter()
            process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            try:
                answers(f"http://{LOOPBACK}:{port}/healthz", process)
                return time.perf_counter() - started
            finally:
                process.terminate()
                process.wait(10)

    return once


def run_once(api: str, queue: str, token: str) -> Callable[[dict[str, str]], float]:
    def once(env: dict[str, str]) -> float:
        command = reviewer("run", "--api", api, "--queue", queue, "--", "true")
        started = time.perf_counter()
        done = subprocess.run(
            command, env={**env, "REVIEWER_AGENT_TOKEN": token}, capture_output=True, text=True
        )
        wall = time.perf_counter() - started
        if "nothing was submitted" not in done.stderr:
            raise RuntimeError(f"reviewer run: {done.stderr}")
        return wall

    return once


def mcp_gate_once(env: dict[str, str]) -> float:
    started = time.perf_counter()
    process = subprocess.Popen(
        reviewer("mcp-gate", "--", *UPSTREAM),
        env={**env, "REVIEWER_AGENT_TOKEN": "bench-token-not-used"},
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(INITIALIZE).encode() + b"\n")
    process.stdin.flush()
    answer = json.loads(process.stdout.readline())
    wall = time.perf_counter() - started
    if "result" not in answer:
        raise RuntimeError(f"mcp-gate answered {answer}")
    process.stdin.close()
    process.wait(10)
    return wall


@contextmanager
def background(command: list[str], env: dict[str, str], ready_url: str) -> Iterator[None]:
    process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        answers(ready_url, process)
        yield
    finally:
        process.terminate()
        process.wait(10)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose `reviewer` runs")
    options = parser.parse_args()
    tree = options.tree.resolve()
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tree), os.environ.get("PYTHONPATH", "")])}
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # compiled once, as an installed release is
    os.chdir(tree)  # `python -m` puts the working directory first on sys.path
    with tempfile.TemporaryDirectory() as folder, ExitStack() as stack:
        queue_port, api_port = free_port(), free_port()
        db = f"{folder}/queue.sqlite3"
        stack.enter_context(
            background(
                reviewer("serve", "--db", db, "--port", str(queue_port)),
                env,
                f"http://{LOOPBACK}:{queue_port}/healthz",
            )
        )
        stack.enter_context(
            background(
                reviewer("sample-api", "--port", str(api_port)),
                env,
                f"http://{LOOPBACK}:{api_port}/v1/tickets",
            )
        )
        token = subprocess.run(
            reviewer("token", "create", "--db", db, "--name", "bench-agent", "--role", "agent"),
            env=env,
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        cases = [
            Case("serve", serve_once()),
            Case("serve --web-origin", serve_once("--web-origin", "http://localhost:PORT")),
            Case("run", run_once(f"http://{LOOPBACK}:{api_port}", f"http://{LOOPBACK}:{queue_port}", token)),
            Case("mcp-gate", mcp_gate_once),
        ]
        for case in cases:  # one start each first: compiled files written, caches warm
            case.once(env)
        for _ in range(options.runs):
            for case in cases:
                before = children_cpu()
                case.wall.append(case.once(env))
                case.cpu.append(children_cpu() - before)
    print(f"{tree}: median of {options.runs}, load average {' '.join(f'{x:.1f}' for x in os.getloadavg())}")
    for case in cases:
        print(
            f"{case.name:20} CPU {statistics.median(case.cpu) * 1000:6.0f} ms   "
            f"wall {statistics.median(case.wall) * 1000:6.0f} ms"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
