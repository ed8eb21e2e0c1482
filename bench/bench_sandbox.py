"""What `reviewer run`'s sandbox costs an agent: the start of a run, and a read through the gate.

    python bench/bench_sandbox.py [--runs 7] [--reads 200]

A real queue (`reviewer serve`, SQLite) and the sample API run in processes of their own; `reviewer run`
is started as a user starts it, from outside, and timed to its end (the clock the operator meets):

- `run -- true` in the default sandbox (bubblewrap, the minimal root, the seccomp filter, the gate
  served on the listener handed out of COMMAND's network), beside `--no-sandbox` and `--share-network`;
- an agent of Python's standard library making `--reads` sequential reads through the gate, in the
  sandbox and without it (the reads are timed inside the agent, and only they).

Each figure is the median of `--runs`; ratios are against `--no-sandbox` in the same run. Prints
figures; asserts nothing (machines here are shared and noisy).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from bench.bench_run import start_sample_api  # noqa: E402
from tests.queue_harness import start_service  # noqa: E402

READER = """
import os, sys, time, urllib.request
url = os.environ["REVIEWER_API_URL"] + "/v1/tickets/t1"
opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
start = time.perf_counter()
for _ in range(int(sys.argv[1])):
    with opener.open(url) as answer:
        answer.read()
print(time.perf_counter() - start)
"""
MODES = {"sandbox (default)": [], "--share-network": ["--share-network"], "--no-sandbox": ["--no-sandbox"]}


def timed_run(arguments: list[str], environment: dict[str, str], work: Path) -> tuple[float, str]:
    start = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "reviewer", "run", *arguments],
        capture_output=True,
        text=True,
        env=environment,
        cwd=work,
        timeout=120,
    )
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"reviewer run failed: {done.stderr}")
    return elapsed, done.stdout


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per figure")
    parser.add_argument("--reads", type=int, default=200, help="sequential reads per agent")
    options = parser.parse_args()
    folder = Path(tempfile.mkdtemp(prefix="reviewer-bench-sandbox-"))
    work = folder / "work"
    work.mkdir()
    service = start_service(folder)
    api, api_url = start_sample_api()
    environment = {
        **os.environ,
        "API_TOKEN": "bench",
        "REVIEWER_AGENT_TOKEN": service.token("bench-agent", "agent"),
    }
    base = ["--api", api_url, "--queue", service.url, "--api-header", "Authorization: Bearer env:API_TOKEN"]
    starts: dict[str, float] = {}
    reads: dict[str, float] = {}
    try:
        for mode, flags in MODES.items():
            starts[mode] = statistics.median(
                timed_run([*base, *flags, "--", "true"], environment, work)[0] for _ in range(options.runs)
            )
            reader = [*base, *flags, "--", sys.executable, "-I", "-c", READER, str(options.reads)]
            reads[mode] = statistics.median(
                float(timed_run(reader, environment, work)[1]) / options.reads for _ in range(options.runs)
            )
    finally:
        api.terminate()
        api.wait(10)
        service.stop()
    print(f"{'mode':<20} {'run -- true':>14} {'one read':>12}")
    for mode in MODES:
        print(f"{mode:<20} {starts[mode] * 1000:11.1f} ms {reads[mode] * 1000:9.2f} ms")
    peer = "--no-sandbox"
    for mode in MODES:
        if mode != peer:
            start, read = starts[mode] / starts[peer], reads[mode] / reads[peer]
            print(f"{mode} / {peer}: start {start:.2f}x, read {read:.2f}x")


if __name__ == "__main__":
    main()
