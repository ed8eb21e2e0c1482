"""Live review benchmarks: submission to painted row in a running app, and the queue's load from idle apps.

    python bench/bench_live.py              # 10 submissions at a 1 s poll; 50 idle apps for 10 s
    python bench/bench_live.py --apps 20 --seconds 5

Starts `reviewer serve` on a free loopback port with a temporary database. Prints figures; asserts
nothing (machines here are shared and noisy). Goal: a row within one poll interval + 100 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from reviewer.plan.proposal import parse_proposal  # noqa: E402
from reviewer.queue.client import QueueClient  # noqa: E402
from reviewer.queue.config import Secret  # noqa: E402
from reviewer.tui.app import ReviewerApp  # noqa: E402
from reviewer.tui.model.queue_source import QueueSource  # noqa: E402
from tests.queue_harness import Service, body, proposal, start_service  # noqa: E402

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of a process, from /proc (Linux)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


async def submission_to_row(service: Service, reviewer: str, agent: str, count: int, poll: float) -> None:
    """Each submission lands at a random phase of the poll cycle; the row is painted when the table
    holds it and the app has rendered a frame after that."""
    app = ReviewerApp(QueueSource(service.url, Secret(reviewer), poll_interval=poll))
    delays: list[float] = []
    client = QueueClient(service.url, agent)
    async with app.run_test(headless=True, size=(100, 30)) as pilot, client:
        while app.link.answered_at is None:
            await pilot.pause(0.02)
        for number in range(count):
            await asyncio.sleep(random.uniform(0, poll))
            proposal_id = f"bench-{os.getpid()}-{number}"
            plan = parse_proposal(body(proposal(proposal_id, calls=20)))
            await client.submit(plan)
            submitted = time.perf_counter()
            while proposal_id not in app.queue_screen.query_one("#queue").rows:
                await asyncio.sleep(0.002)
            await pilot.pause()
            delays.append(time.perf_counter() - submitted)
    delays.sort()
    print(f"submission to painted row, poll {poll:.1f} s, {count} submissions:")
    p90 = delays[int(0.9 * (count - 1))]
    print(
        f"  median {statistics.median(delays) * 1000:.0f} ms, p90 {p90 * 1000:.0f} ms,"
        f" max {delays[-1] * 1000:.0f} ms (goal: max under {(poll + 0.1) * 1000:.0f} ms)"
    )


async def idle_apps(service: Service, reviewer: str, apps: int, seconds: float, poll: float) -> None:
    """`apps` running apps polling a queue where nothing changes: each poll is a 304."""
    assert service.process is not None
    running = [
        ReviewerApp(QueueSource(service.url, Secret(reviewer), poll_interval=poll)) for _ in range(apps)
    ]

    async def run_one(app: ReviewerApp, ready: asyncio.Event, done: asyncio.Event) -> None:
        async with app.run_test(headless=True, size=(100, 30)) as pilot:
            while app.link.answered_at is None:
                await pilot.pause(0.05)
            ready.set()
            await done.wait()

    readies = [asyncio.Event() for _ in running]
    done = asyncio.Event()
    pairs = zip(running, readies, strict=True)
    tasks = [asyncio.create_task(run_one(app, ready, done)) for app, ready in pairs]
    await asyncio.wait_for(asyncio.gather(*(ready.wait() for ready in readies)), 120)
    await asyncio.sleep(poll * 2)  # past the first, full listing of every app
    polls_before = sum(app.queue.polls for app in running)
    idle_before = sum(app.queue.polls_not_modified for app in running)
    cpu_before, wall_before = cpu_seconds(service.process.pid), time.perf_counter()
    client_cpu_before = time.process_time()
    await asyncio.sleep(seconds)
    polls = sum(app.queue.polls for app in running) - polls_before
    idle = sum(app.queue.polls_not_modified for app in running) - idle_before
    wall = time.perf_counter() - wall_before
    service_cpu = cpu_seconds(service.process.pid) - cpu_before
    client_cpu = time.process_time() - client_cpu_before
    done.set()
    await asyncio.gather(*tasks)
    print(f"{apps} idle apps polling every {poll:.1f} s for {wall:.1f} s:")
    per_poll = service_cpu / max(polls, 1) * 1e6
    print(
        f"  {polls / wall:.1f} requests/s ({idle} of {polls} answered 304),"
        f" service CPU {service_cpu / wall * 100:.1f}% of one core, {per_poll:.0f} µs CPU per poll"
    )
    print(f"  (the {apps} apps together, in this one process: {client_cpu / wall * 100:.0f}% of one core)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--submissions", type=int, default=10)
    parser.add_argument("--poll", type=float, default=1.0, help="poll interval for the latency figure")
    parser.add_argument("--apps", type=int, default=50)
    parser.add_argument("--idle-poll", type=float, default=2.0, help="poll interval of the idle apps")
    parser.add_argument("--seconds", type=float, default=10.0)
    options = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        service = start_service(Path(folder))
        try:
            reviewer = service.token("bench-reviewer", "reviewer")
            agent = service.token("bench-agent", "agent")
            asyncio.run(submission_to_row(service, reviewer, agent, options.submissions, options.poll))
            asyncio.run(idle_apps(service, reviewer, options.apps, options.seconds, options.idle_poll))
        finally:
            service.stop()


if __name__ == "__main__":
    main()
