"""Notification latency: from a submission's answer to the webhook's arrival, beside the poll path.

    python bench/bench_notify.py              # 20 submissions; the poll path at the app's 2 s default
    python bench/bench_notify.py --count 50 --poll 5

Starts `reviewer serve --notify` on a free loopback port with a temporary database, and a receiver on
loopback. The poll path is a client polling the list every `--poll` seconds, as `reviewer review`
does: a proposal is seen at the first poll after it arrived. Each submission lands at a random phase
of that cycle. Prints figures; asserts nothing (machines here are shared and noisy).
"""

from __future__ import annotations

import argparse
import random
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

import httpx  # noqa: E402

from tests.queue_harness import Service, body, proposal  # noqa: E402
from tests.service.notifications.receiver import Receiver  # noqa: E402


def percentile(values: list[float], fraction: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(fraction * len(ordered)))]


def report(label: str, delays: list[float]) -> None:
    print(
        f"  {label:<34} median {statistics.median(delays) * 1000:6.0f} ms   "
        f"p90 {percentile(delays, 0.9) * 1000:6.0f} ms   max {max(delays) * 1000:6.0f} ms"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--count", type=int, default=20)
    parser.add_argument(
        "--poll", type=float, default=2.0, help="the poll path's interval (the app's default: 2)"
    )
    options = parser.parse_args()

    receiver = Receiver().start()
    arrived: dict[str, float] = {}

    with tempfile.TemporaryDirectory() as folder:
        secret = Path(folder) / "secret"
        secret.write_text("bench-secret")
        secret.chmod(0o600)
        service = Service(
            db=Path(folder) / "queue.sqlite3",
            log_path=Path(folder) / "service.log",
            serve_args=("--notify", receiver.url, "--notify-secret-file", str(secret)),
        )
        service.start()
        try:
            agent = service.client(service.token("agent", "agent"))
            reviewer = service.client(service.token("alice", "reviewer"))
            seen: dict[str, float] = {}
            stop = threading.Event()

            def poll() -> None:
                """The app's poll path: list, note what is new, wait the interval, again."""
                while not stop.is_set():
                    for summary in reviewer.get("/v1/proposals").json()["proposals"]:
                        seen.setdefault(summary["proposal_id"], time.perf_counter())
                    stop.wait(options.poll)

            poller = threading.Thread(target=poll, daemon=True)
            poller.start()
            submitted: dict[str, float] = {}
            for number in range(options.count):
                time.sleep(random.uniform(0, options.poll))
                proposal_id = f"bench-notify-{number}"
                answer = agent.post("/v1/proposals", content=body(proposal(proposal_id)))
                submitted[proposal_id] = time.perf_counter()
                assert answer.status_code == 201, answer.text
                receiver.wait_for(number + 1)
                arrived[proposal_id] = time.perf_counter()
            deadline = time.monotonic() + options.poll * 3
            while len(seen) < options.count and time.monotonic() < deadline:
                time.sleep(0.05)
            stop.set()
            agent.close()
            reviewer.close()
        finally:
            service.stop()
            receiver.stop()

    print(f"submission to arrival, {options.count} submissions, SQLite, loopback:")
    report("webhook (serve --notify)", [arrived[key] - submitted[key] for key in submitted])
    report(
        f"poll path (a reviewer app, {options.poll:g} s)",
        [seen[key] - submitted[key] for key in submitted if key in seen],
    )


if __name__ == "__main__":
    try:
        main()
    except httpx.HTTPError as error:
        sys.exit(f"bench_notify: {error}")
