"""`reviewer verify`'s reading and matching on a 1,000,000-line access log, next to jq reading the same file.

Run: `.venv/bin/python bench/bench_audit.py [--lines 1000000]`. It writes a JSON access log in the
nginx format of docs/audit-logs.md (one request a second, a third of them writes, ids on every line), with a
run of 10 calls whose window is one minute somewhere in it, then in a fresh process each: reads the log with
`access-log:` and matches the run (`match_audit`), printing the time and the peak resident memory (VmHWM), at
the full size and at a tenth of it, so memory can be compared across sizes. jq is timed selecting the run's
ids from the same file (`jq -c 'select(.request_id == ...)'`), or said missing. It prints figures and asserts
nothing."""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

START = datetime(2026, 12, 1, tzinfo=UTC)
RUN_CALLS = 10
METHODS = ("GET", "GET", "POST", "GET", "PATCH", "GET")


def write_log(path: Path, lines: int) -> dict[str, object]:
    """The log, and the run to find in it: 10 writes, one a second, in the middle of the log."""
    run_at = lines // 2
    calls = []
    with path.open("w", encoding="utf-8") as log:
        for second in range(lines):
            time_text = (START + timedelta(seconds=second)).isoformat()
            if run_at <= second < run_at + RUN_CALLS:
                index = second - run_at
                request_id = f"run-{index}"
                calls.append({"seq": index + 1, "path": f"/v1/tickets/t{index}", "request_id": request_id})
                method, uri = "PATCH", f"/v1/tickets/t{index}"
            else:
                method = METHODS[second % len(METHODS)]
                uri = f"/v1/tickets/t{second % 997}" + ("?dryRun=All" if second % 7 == 0 else "")
                request_id = f"other-{second}"
            entry = {"time": time_text, "method": method, "uri": uri, "status": 200, "request_id": request_id}
            log.write(json.dumps(entry, separators=(",", ":")) + "\n")
    start = START + timedelta(seconds=run_at)
    return {"calls": calls, "start": start.isoformat(), "end": (start + timedelta(seconds=60)).isoformat()}


def read_and_match(log: Path, run_file: Path) -> None:
    """In this process: read `log`, match the run, print seconds, rows and peak memory as JSON."""
    from reviewer.audit.matching import SentCall, Window, match_audit
    from reviewer.audit.registry import audit_source

    run = json.loads(run_file.read_text())
    calls = [
        SentCall(call["seq"], "update", "PATCH", call["path"], (), 200, (call["request_id"],))
        for call in run["calls"]
    ]
    window = Window(datetime.fromisoformat(run["start"]), datetime.fromisoformat(run["end"]))
    began, began_cpu = time.perf_counter(), time.process_time()
    result = match_audit(calls, audit_source(f"access-log:{log}").rows(), window)
    seconds, cpu_seconds = time.perf_counter() - began, time.process_time() - began_cpu
    peak = next(
        int(line.split()[1]) * 1024
        for line in Path("/proc/self/status").read_text().splitlines()
        if line.startswith("VmHWM:")
    )
    print(
        json.dumps(
            {
                "seconds": seconds,
                "cpu_seconds": cpu_seconds,
                "rows": result.rows_read,
                "summary": result.summary,
                "peak_bytes": peak,
            }
        )
    )


def measure(log: Path, run_file: Path) -> dict[str, object]:
    answer = subprocess.run(
        [sys.executable, __file__, "--read", str(log), str(run_file)],
        capture_output=True,
        text=True,
        check=True,
    )
    figures: dict[str, object] = json.loads(answer.stdout)
    return figures


def time_jq(log: Path) -> str:
    """jq selecting the run's lines from the same file: wall and CPU seconds (its children's)."""
    jq = shutil.which("jq")
    if jq is None:
        return "jq is not installed: no comparison"
    began, children_before = time.perf_counter(), os.times()
    with log.open("rb") as stream:
        subprocess.run(
            [jq, "-c", 'select(.request_id | startswith("run-"))'],
            stdin=stream,
            stdout=subprocess.DEVNULL,
            check=True,
        )
    after = os.times()
    cpu = (after.children_user + after.children_system) - (
        children_before.children_user + children_before.children_system
    )
    return f"{time.perf_counter() - began:.2f} s ({cpu:.2f} s CPU)"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--lines", type=int, default=1_000_000)
    parser.add_argument("--read", nargs=2, metavar=("LOG", "RUN"), help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.read:
        read_and_match(Path(options.read[0]), Path(options.read[1]))
        return
    with tempfile.TemporaryDirectory() as folder:
        for lines in (options.lines // 10, options.lines):
            log, run_file = Path(folder) / f"access-{lines}.log", Path(folder) / f"run-{lines}.json"
            run_file.write_text(json.dumps(write_log(log, lines)))
            figures = measure(log, run_file)
            peak_mb = int(str(figures["peak_bytes"])) / 1e6
            print(
                f"{lines:>9,} lines ({log.stat().st_size / 1e6:.0f} MB): reviewer {figures['seconds']:.2f} s "
                f"({figures['cpu_seconds']:.2f} s CPU), peak {peak_mb:.0f} MB; jq {time_jq(log)}; "
                f"{figures['summary']}"
            )


if __name__ == "__main__":
    main()
