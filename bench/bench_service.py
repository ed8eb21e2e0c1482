"""Queue service throughput and latency: idle polls (304) and submissions on SQLite and on
PostgreSQL, next to a bare FastAPI app, in one run.

Run: `python bench/bench_service.py [--seconds 2] [--rounds 7] [--concurrency 16] [--postgres URL]`.
It starts the real `reviewer serve` (on an SQLite file, and on PostgreSQL: the URL given, or a
throwaway cluster started like the tests' one) and a bare FastAPI app on the same uvicorn, each
pinned to CPU 0 when the machine has more than one. This process, pinned to the other CPUs, drives
them on 127.0.0.1 only over keep-alive connections with requests written out in advance (an HTTP
client library would spend more CPU per request than the servers do and measure itself), the
three servers one after the other, round after round. Each figure is counted from outside the
server: its CPU seconds read from /proc before and after. It prints the median of the rounds, the
ratio to the bare app (each round's ratio, then their median) and the load average: many short
rounds, so a burst of other work on a shared machine spoils a round rather than a figure. It
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import os
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

LOOPBACK = "127.0.0.1"
ids = itertools.count()
"""Proposal ids for submissions, new across figures and rounds."""
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
    """User plus system CPU time of a process (all its threads), from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def load_average() -> str:
    return "load average " + ", ".join(f"{figure:.2f}" for figure in os.getloadavg())


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
        deadline = time.monotonic() + 60
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


def http_request(method: str, path: str, headers: dict[str, str], body: bytes = b"") -> bytes:
    """The bytes of one HTTP/1.1 request on a keep-alive connection."""
    lines = [f"{method} {path} HTTP/1.1", f"host: {LOOPBACK}"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    if body or method == "POST":
        lines.append(f"content-length: {len(body)}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body


Requests = Callable[[], bytes]
"""The bytes of a figure's next request."""


@dataclass(frozen=True)
class Figures:
    """One figure's run: requests a second, latency quantiles, and requests per CPU-second of the server."""

    rate: float
    p50_ms: float
    p99_ms: float
    per_cpu_second: float


async def load(
    port: int, requests: Requests, expect: int, seconds: float, concurrency: int
) -> tuple[float, list[float]]:
    """Keep `concurrency` requests in flight for `seconds`; the elapsed time and every latency."""
    latencies: list[float] = []
    connections = [await asyncio.open_connection(LOOPBACK, port) for _ in range(concurrency)]

    async def exchange(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(requests())
        head = await reader.readuntil(b"\r\n\r\n")
        status = int(head[9:12])
        length = 0
        for line in head.split(b"\r\n")[1:]:
            name, _, value = line.partition(b":")
            if name.strip().lower() == b"content-length":
                length = int(value)
        answer = await reader.readexactly(length) if length else b""
        if status != expect:
            raise RuntimeError(f"expected {expect}, got {status}: {answer[:200]!r}")

    for reader, writer in connections:
        await exchange(reader, writer)
    stop_at = time.perf_counter() + seconds

    async def worker(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while time.perf_counter() < stop_at:
            started = time.perf_counter()
            await exchange(reader, writer)
            latencies.append(time.perf_counter() - started)

    began = time.perf_counter()
    await asyncio.gather(*(worker(reader, writer) for reader, writer in connections))
    elapsed = time.perf_counter() - began
    for _, writer in connections:
        writer.close()
    return elapsed, latencies


def measure(pid: int, port: int, requests: Requests, expect: int, options: argparse.Namespace) -> Figures:
    """`load`, plus the server's CPU time: its capacity on one core, however fast the load generator is."""
    before = cpu_seconds(pid)
    elapsed, latencies = asyncio.run(load(port, requests, expect, options.seconds, options.concurrency))
    used = cpu_seconds(pid) - before
    count = len(latencies) + options.concurrency  # the warm-up too: the CPU time counts it
    quantiles = statistics.quantiles(latencies, n=100)
    return Figures(
        len(latencies) / elapsed,
        quantiles[49] * 1000,
        quantiles[98] * 1000,
        count / used if used else float("inf"),
    )


@dataclass
class Server:
    """A running server and the two requests measured on it (the poll's ETag read anew each time)."""

    label: str
    pid: int
    port: int
    poll: Callable[[], Requests]
    submit: Requests
    polls: list[Figures] = field(default_factory=list)
    submissions: list[Figures] = field(default_factory=list)


def start_queue(label: str, db: str, stack: ExitStack) -> Server:
    """`reviewer serve` on `db` (which it creates), two tokens minted, one proposal submitted."""
    port = free_port()
    serve = [sys.executable, "-m", "reviewer", "serve", "--db", db, "--port", str(port)]
    pid = stack.enter_context(running(serve, port))

    def mint(name: str, role: str) -> str:
        command = [sys.executable, "-m", "reviewer", "token", "create", "--db", db, "--name", name]
        created = subprocess.run([*command, "--role", role], capture_output=True, text=True, check=True)
        return created.stdout.strip()

    reviewer, agent = mint("bench-reviewer", "reviewer"), mint("bench-agent", "agent")
    base = f"http://{LOOPBACK}:{port}"
    as_agent = {"authorization": f"Bearer {agent}", "content-type": "application/json"}
    httpx.post(f"{base}/v1/proposals", content=proposal_body("seed"), headers=as_agent).raise_for_status()
    as_reviewer = {"authorization": f"Bearer {reviewer}"}

    def poll() -> Requests:
        etag = httpx.get(f"{base}/v1/proposals", headers=as_reviewer).headers["etag"]
        unchanged = http_request("GET", "/v1/proposals", {**as_reviewer, "if-none-match": etag})
        return lambda: unchanged

    return Server(
        label,
        pid,
        port,
        poll=poll,
        submit=lambda: http_request("POST", "/v1/proposals", as_agent, proposal_body(f"bench-{next(ids)}")),
    )


def start_bare(stack: ExitStack) -> Server:
    port = free_port()
    pid = stack.enter_context(running([sys.executable, "-c", BARE_APP, str(port)], port))
    unchanged = http_request("GET", "/poll", {"if-none-match": '"bare"'})
    return Server(
        "bare FastAPI",
        pid,
        port,
        poll=lambda: lambda: unchanged,
        submit=lambda: http_request("POST", "/submit", {}, proposal_body(f"bench-{next(ids)}")),
    )


def median(figures: list[Figures]) -> Figures:
    return Figures(
        statistics.median(f.rate for f in figures),
        statistics.median(f.p50_ms for f in figures),
        statistics.median(f.p99_ms for f in figures),
        statistics.median(f.per_cpu_second for f in figures),
    )


def ratio_to_bare(ours: list[Figures], bare: list[Figures]) -> tuple[float, float, float]:
    """Each round's requests per CPU-second against the bare app's in that round: median, min, max."""
    ratios = [mine.per_cpu_second / peer.per_cpu_second for mine, peer in zip(ours, bare, strict=True)]
    return statistics.median(ratios), min(ratios), max(ratios)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=2.0, help="length of one figure (default 2)")
    parser.add_argument("--rounds", type=int, default=7, help="rounds over the three servers (default 7)")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--no-submissions", action="store_true", help="measure idle polls only")
    parser.add_argument(
        "--postgres", metavar="URL", help="an empty PostgreSQL database to use (default: a throwaway cluster)"
    )
    options = parser.parse_args()
    cpus = server_cpus()
    if cpus:
        os.sched_setaffinity(0, set(os.sched_getaffinity(0)) - cpus)
    where = f"servers pinned to CPU {min(cpus)}, load from the others" if cpus else "one CPU shared"
    print(f"{where}; {options.concurrency} requests in flight; {options.seconds:g} s a figure")
    print(f"start: {load_average()}")

    with ExitStack() as stack, tempfile.TemporaryDirectory() as folder:
        servers = [start_queue("SQLite", str(Path(folder) / "bench.sqlite3"), stack)]
        if options.postgres:
            servers.append(start_queue("PostgreSQL", options.postgres, stack))
        else:
            sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
            from tests.service.postgres import start_cluster

            cluster = start_cluster()
            stack.callback(cluster.stop)
            servers.append(start_queue("PostgreSQL", cluster.fresh_database(), stack))
        servers.append(start_bare(stack))
        for round_number in range(1, options.rounds + 1):
            for server in servers:
                server.polls.append(measure(server.pid, server.port, server.poll(), 304, options))
            if not options.no_submissions:
                for server in servers:
                    server.submissions.append(measure(server.pid, server.port, server.submit, 201, options))
            polls = ", ".join(f"{s.label} {s.polls[-1].per_cpu_second:,.0f}" for s in servers)
            print(f"round {round_number}: idle polls per server CPU-second: {polls}; {load_average()}")
    print(f"end: {load_average()}")

    bare = servers[-1]
    print(f"\nmedian of {options.rounds} rounds")
    print(f"{'':32} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'req per server CPU-s':>21}")
    kinds = [("idle poll (304)", "polls")]
    if not options.no_submissions:
        kinds.append(("submission (201)", "submissions"))
    for kind, attribute in kinds:
        for server in servers:
            figures = median(getattr(server, attribute))
            print(
                f"{server.label + ': ' + kind:32} {figures.rate:8.0f} {figures.p50_ms:7.2f} "
                f"{figures.p99_ms:7.2f} {figures.per_cpu_second:21,.0f}"
            )
    for kind, attribute in kinds:
        for server in servers[:-1]:
            middle, low, high = ratio_to_bare(getattr(server, attribute), getattr(bare, attribute))
            print(
                f"{kind}, {server.label}: {middle:.2f} of the bare app's requests per CPU-second "
                f"(rounds {low:.2f}-{high:.2f})"
            )
    print(
        "goal: idle polls at least 0.5 of the bare app's and 1,000 per CPU-second of the service; "
        "submissions are durable on both (SQLite synchronous=FULL, PostgreSQL synchronous_commit on); "
        "the CPU counted is the service's, not PostgreSQL's"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
