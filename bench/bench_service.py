"""Queue service throughput and latency: idle polls (304) and submissions on SQLite and on
PostgreSQL, next to a bare FastAPI app, in one run.

Run: `.venv/bin/python bench/bench_service.py [--seconds 5] [--concurrency 16] [--postgres URL]`.
It starts the real `reviewer serve` (on an SQLite file, then on PostgreSQL: the URL given, or a
throwaway cluster started like the tests' one) and a bare FastAPI app on the same uvicorn, each
pinned to CPU 0 when the machine has more than one, and drives them from this process (pinned to
the other CPUs) with a bounded asyncio httpx loop on 127.0.0.1 only. It prints figures; it
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx

LOOPBACK = "127.0.0.1"
BARE_APP = """
import sys, uvicorn
from fastapi import FastAPI, Request, Response
app = FastAPI()

@app.get("/poll")
async def poll() -> Response:
    return Response(status_code=304, headers={"ETag": '"bare"'})

@app.post("/submit")
async def submit(request: Request) -> Response:
    await request.body()
    return Response(b'{"state":"pending"}', status_code=201, media_type="application/json")

uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), access_log=False, log_level="warning")
"""


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind((LOOPBACK, 0))
        return int(probe.getsockname()[1])


def server_cpus() -> set[int] | None:
    cpus = sorted(os.sched_getaffinity(0))
    return {cpus[0]} if len(cpus) > 1 else None


def cpu_seconds(pid: int) -> float:
    """User plus system CPU time of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


@contextmanager
def running(command: list[str], port: int) -> Iterator[int]:
    """A server process pinned to one CPU, up once it accepts connections."""
    cpus = server_cpus()
    process = subprocess.Popen(
        command,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
    )
    try:
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            try:
                socket.create_connection((LOOPBACK, port), timeout=0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        else:
            raise RuntimeError(f"{command[:4]} did not start")
        yield process.pid
    finally:
        process.terminate()
        process.wait(10)


def proposal_body(proposal_id: str) -> bytes:
    return json.dumps(
        {
            "format": "reviewer.proposal/v1",
            "proposal_id": proposal_id,
            "revision": 1,
            "title": "bench",
            "agent": {"name": "bench"},
            "created_at": "2026-10-15T09:00:00Z",
            "target": {"api": "deskline"},
            "dry_run": {"via": "server", "write_requests": 2, "writes_kept": 0},
            "calls": [
                {"seq": 1, "tool": "create_ticket", "effect": "create", "args": {"title": "t"}},
                {"seq": 2, "tool": "delete_ticket", "effect": "delete", "args": {"id": "t3"}},
            ],
        }
    ).encode()


Figures = tuple[float, float, float, float]
"""requests/s, p50 ms, p99 ms, and requests per second of the server's own CPU time."""


def measure(
    pid: int,
    base_url: str,
    send: Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]],
    expect: int,
    options: argparse.Namespace,
) -> Figures:
    """`load`, plus the server's CPU time: its capacity on one core, however fast the load generator is."""
    before = cpu_seconds(pid)
    rate, p50, p99, count = asyncio.run(load(base_url, send, expect, options.seconds, options.concurrency))
    used = cpu_seconds(pid) - before
    return rate, p50, p99, (count / used if used else float("inf"))


async def load(
    base_url: str,
    send: Callable[[httpx.AsyncClient, int], Awaitable[httpx.Response]],
    expect: int,
    seconds: float,
    concurrency: int,
) -> tuple[float, float, float, int]:
    """requests/s, p50 ms, p99 ms and the count over `seconds`, at most `concurrency` in flight."""
    latencies: list[float] = []
    counter = iter(range(10**9))
    limits = httpx.Limits(max_connections=concurrency, max_keepalive_connections=concurrency)
    async with httpx.AsyncClient(base_url=base_url, limits=limits, timeout=30) as client:
        for warmup in range(20):
            await send(client, -1 - warmup)
        stop_at = time.perf_counter() + seconds

        async def worker() -> None:
            while time.perf_counter() < stop_at:
                started = time.perf_counter()
                response = await send(client, next(counter))
                latencies.append(time.perf_counter() - started)
                if response.status_code != expect:
                    raise RuntimeError(
                        f"expected {expect}, got {response.status_code}: {response.text[:200]}"
                    )

        began = time.perf_counter()
        await asyncio.gather(*(worker() for _ in range(concurrency)))
        elapsed = time.perf_counter() - began
    quantiles = statistics.quantiles(latencies, n=100)
    return len(latencies) / elapsed, quantiles[49] * 1000, quantiles[98] * 1000, len(latencies) + 20


def bench_queue(label: str, db: str, options: argparse.Namespace, results: dict[str, Figures]) -> None:
    """Start `reviewer serve` on `db` (which creates it), mint two tokens, measure polls and submissions."""
    port = free_port()
    serve = [sys.executable, "-m", "reviewer", "serve", "--db", db, "--port", str(port)]
    with running(serve, port) as pid:

        def mint(name: str, role: str) -> str:
            command = [sys.executable, "-m", "reviewer", "token", "create", "--db", db, "--name", name]
            created = subprocess.run([*command, "--role", role], capture_output=True, text=True, check=True)
            return created.stdout.strip()

        reviewer, agent = mint("bench-reviewer", "reviewer"), mint("bench-agent", "agent")
        base = f"http://{LOOPBACK}:{port}"
        as_agent = {"Authorization": f"Bearer {agent}", "Content-Type": "application/json"}
        httpx.post(f"{base}/v1/proposals", content=proposal_body("seed"), headers=as_agent).raise_for_status()
        as_reviewer = {"Authorization": f"Bearer {reviewer}"}
        etag = httpx.get(f"{base}/v1/proposals", headers=as_reviewer).headers["etag"]
        poll_headers = {**as_reviewer, "If-None-Match": etag}

        def poll(client: httpx.AsyncClient, _: int) -> Awaitable[httpx.Response]:
            return client.get("/v1/proposals", headers=poll_headers)

        def submit(client: httpx.AsyncClient, n: int) -> Awaitable[httpx.Response]:
            return client.post("/v1/proposals", content=proposal_body(f"bench-{n}"), headers=as_agent)

        results[f"{label}: idle poll (304)"] = measure(pid, base, poll, 304, options)
        results[f"{label}: submission (201)"] = measure(pid, base, submit, 201, options)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument(
        "--postgres", metavar="URL", help="an empty PostgreSQL database to use (default: a throwaway cluster)"
    )
    options = parser.parse_args()
    cpus = server_cpus()
    if cpus:
        os.sched_setaffinity(0, set(os.sched_getaffinity(0)) - cpus)
    where = f"servers pinned to CPU {min(cpus)}, load from the others" if cpus else "one CPU shared"
    print(f"{where}; {options.concurrency} requests in flight; {options.seconds:g} s per figure")

    results: dict[str, Figures] = {}
    with tempfile.TemporaryDirectory() as folder:
        bench_queue("SQLite", str(Path(folder) / "bench.sqlite3"), options, results)
        if options.postgres:
            bench_queue("PostgreSQL", options.postgres, options, results)
        else:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.service.postgres import start_cluster

            cluster = start_cluster()
            try:
                bench_queue("PostgreSQL", cluster.fresh_database(), options, results)
            finally:
                cluster.stop()
        port = free_port()
        with running([sys.executable, "-c", BARE_APP, str(port)], port) as pid:
            base = f"http://{LOOPBACK}:{port}"

            def bare_poll(client: httpx.AsyncClient, _: int) -> Awaitable[httpx.Response]:
                return client.get("/poll", headers={"If-None-Match": '"bare"'})

            def bare_submit(client: httpx.AsyncClient, n: int) -> Awaitable[httpx.Response]:
                return client.post("/submit", content=proposal_body(f"bench-{n}"))

            results["bare FastAPI: 304"] = measure(pid, base, bare_poll, 304, options)
            results["bare FastAPI: POST body (201)"] = measure(pid, base, bare_submit, 201, options)

    print(f"{'':32} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'req per server CPU-s':>21}")
    for name, (rate, p50, p99, capacity) in results.items():
        print(f"{name:32} {rate:8.0f} {p50:7.2f} {p99:7.2f} {capacity:21.0f}")
    for label, ours, bare in (
        ("idle poll, SQLite", "SQLite: idle poll (304)", "bare FastAPI: 304"),
        ("idle poll, PostgreSQL", "PostgreSQL: idle poll (304)", "bare FastAPI: 304"),
        ("submission, SQLite", "SQLite: submission (201)", "bare FastAPI: POST body (201)"),
        ("submission, PostgreSQL", "PostgreSQL: submission (201)", "bare FastAPI: POST body (201)"),
    ):
        print(
            f"{label}: {results[ours][0] / results[bare][0]:.2f} of the bare app's rate, "
            f"{results[ours][3] / results[bare][3]:.2f} of its requests per CPU-second"
        )
    print(
        "goal: 1,000 idle polls/s on one core (the last column); submissions are durable on both "
        "(SQLite synchronous=FULL, PostgreSQL synchronous_commit on); the last column counts the "
        "service's CPU, not PostgreSQL's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
