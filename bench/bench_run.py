"""What `reviewer run`'s gate adds per read and per recorded write, against calling the API directly.

    python bench/bench_run.py [--requests 300]

The sample API runs in a process of its own (`reviewer sample-api`); the gate runs here, in front of
it, exactly as `reviewer run` serves it (uvicorn on loopback, the agent library's `Recording`), and one
httpx client plays the child. Each figure is the median of several rounds of sequential requests.
Every write creates a ticket in the same collection, so each one also depends (by resource) on all the
earlier ones: the dry run's bookkeeping grows with the plan, which the rounds show.

Prints figures and ratios; asserts nothing (machines here are shared and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from reviewer.agent.gate import Gate  # noqa: E402
from reviewer.queue.client import QueueClient  # noqa: E402
from reviewer.run.gate import DryMode, HttpGate  # noqa: E402
from reviewer.run.serving import serving  # noqa: E402
from tests.service.ports import free_port  # noqa: E402

ROUNDS = 5
NOTE_KB = 100
"""A write's free text, words and dashes such as a minted id could hide in: read whole by the gate."""


def start_sample_api() -> tuple[subprocess.Popen[bytes], str]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "reviewer", "sample-api", "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env={**os.environ, "PYTHONPATH": str(HERE.parent)},
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(f"{url}/v1/stats", timeout=1)
            return process, url
        except httpx.TransportError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the sample API did not start")


async def per_request(send: Callable[[], Awaitable[httpx.Response]], count: int) -> float:
    """Median over rounds of the mean seconds per request, `count` sequential requests a round."""
    await send()  # warm: connections open, code paths loaded
    rounds = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(count):
            (await send()).raise_for_status()
        rounds.append((time.perf_counter() - start) / count)
    return statistics.median(rounds)


async def measure(api_url: str, count: int) -> dict[str, float]:
    figures: dict[str, float] = {}
    body = {"title": "Printer on fire"}
    noted = {"title": "Printer on fire", "note": "see tk 4-b " * (NOTE_KB * 1024 // 11)}
    async with httpx.AsyncClient(base_url=api_url) as api, httpx.AsyncClient(base_url=api_url) as direct:
        figures["read, direct"] = await per_request(lambda: direct.get("/v1/tickets/t1"), count)
        figures["dry write, direct (dryRun=All)"] = await per_request(
            lambda: direct.post("/v1/tickets", params={"dryRun": "All"}, json=body), count
        )
        queue = QueueClient("http://127.0.0.1:9", "unused")  # the bench never submits
        for via in ("server", "record"):
            # The sample API documents dryRun=All; a server dry run is never given a guessed parameter.
            options = {"dry_run_query": {"dryRun": "All"}} if via == "server" else {}
            gate = Gate(api=api, queue=queue, backend=via, **options)
            http_gate = HttpGate(api, api_url)
            recording = gate.recorder()
            await recording.start()
            http_gate.mode = DryMode(recording)
            async with serving(http_gate) as gate_url, httpx.AsyncClient(base_url=gate_url) as child:
                if via == "server":
                    figures["read, through the gate"] = await per_request(
                        lambda: child.get("/v1/tickets/t1"), count
                    )
                figures[f"write, through the gate ({via})"] = await per_request(
                    lambda: child.post("/v1/tickets", json=body), count
                )
                if via == "server":  # each earlier create minted an id: a long string is looked through
                    figures[f"write with a {NOTE_KB} KB note, through the gate (server)"] = await per_request(
                        lambda: child.post("/v1/tickets", json=noted), max(count // 30, 3)
                    )
        figures[f"dry write with a {NOTE_KB} KB note, direct"] = await per_request(
            lambda: direct.post("/v1/tickets", params={"dryRun": "All"}, json=noted), max(count // 30, 3)
        )
        await queue.aclose()
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=300, help="sequential requests per round")
    options = parser.parse_args()
    process, url = start_sample_api()
    try:
        figures = asyncio.run(measure(url, options.requests))
    finally:
        process.terminate()
        process.wait(10)
    for name, seconds in figures.items():
        print(f"{name:<52} {seconds * 1000:8.2f} ms per request")
    read = figures["read, through the gate"] / figures["read, direct"]
    server = figures["write, through the gate (server)"] / figures["dry write, direct (dryRun=All)"]
    record = figures["write, through the gate (record)"] / figures["dry write, direct (dryRun=All)"]
    print(f"read through the gate / direct read:               {read:5.2f}x")
    print(f"server dry-run write through the gate / direct:    {server:5.2f}x")
    print(f"recorded write (nothing sent) / direct dry write:  {record:5.2f}x")
    noted = (
        figures[f"write with a {NOTE_KB} KB note, through the gate (server)"]
        / figures[f"dry write with a {NOTE_KB} KB note, direct"]
    )
    print(f"{NOTE_KB} KB note through the gate / direct:           {noted:5.2f}x")


if __name__ == "__main__":
    main()
