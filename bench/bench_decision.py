"""From a reviewer's approval to the first real write `reviewer run` sends, measured from outside.

    python bench/bench_decision.py [--rounds 20] [--tree PATH] [--poll-interval 2]

A `reviewer serve` on a fresh SQLite file and a small recording API run on loopback; each round starts
`reviewer run --via record` with a child that makes one POST, waits for the line that says the plan
waits, approves it through the queue's HTTP API as the app would, and notes when the API receives
the real POST. Both moments are taken in this process, which imports nothing of the queue's: the
figure is what a person at the API would see. `--tree` runs the queue and `reviewer run` from another
checkout (a release before the long poll, for the figures side by side).

Prints the median and spread of the rounds; asserts nothing (machines here are shared and noisy).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx

HERE = Path(__file__).resolve().parent
WAITS = re.compile(r"plan (\S+) revision (\d+) .* waits at ")
CHILD = (
    "import os, urllib.request\n"
    "request = urllib.request.Request(os.environ['REVIEWER_API_URL'] + '/v1/things', data=b'{\"n\": 1}',\n"
    "    headers={'Content-Type': 'application/json'}, method='POST')\n"
    "urllib.request.urlopen(request).read()\n"
)


class RecordingApi:
    """An API on loopback that answers every request and notes when each real write arrives."""

    def __init__(self) -> None:
        self.writes: list[float] = []
        self.written = threading.Event()
        api = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                self.answer(200)

            def do_POST(self) -> None:
                api.writes.append(time.perf_counter())
                api.written.set()
                self.rfile.read(int(self.headers.get("content-length") or 0))
                self.answer(201)

            def answer(self, status: int) -> None:
                body = json.dumps({"id": f"thing-{len(api.writes)}"}).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: object) -> None:
                """Quiet."""

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()


def reviewer(*arguments: str) -> list[str]:
    return [sys.executable, "-m", "reviewer", *arguments]


def environment(tree: Path, **extra: str) -> dict[str, str]:
    """The tree's code first: `python -m` puts the working directory (the tree) first on the path too."""
    return {**os.environ, "PYTHONPATH": str(tree), "PYTHONUNBUFFERED": "1", **extra}


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def start_queue(tree: Path, folder: Path) -> tuple[subprocess.Popen[bytes], str, dict[str, str]]:
    """`reviewer serve` from `tree` on a fresh SQLite file, and a reviewer's and an agent's tokens."""
    port = free_port()
    db = folder / "queue.sqlite3"
    log = (folder / "serve.log").open("ab")
    process = subprocess.Popen(
        reviewer("serve", "--db", str(db), "--port", str(port)),
        stdout=log,
        stderr=log,
        env=environment(tree),
        cwd=tree,
    )
    url = f"http://127.0.0.1:{port}"
    for _ in range(600):
        try:
            httpx.get(f"{url}/healthz", timeout=1)
            break
        except httpx.TransportError:
            time.sleep(0.05)
    else:
        process.kill()
        raise SystemExit("the queue did not start")
    tokens = {}
    for name, role in (("bench-reviewer", "reviewer"), ("bench-agent", "agent")):
        minted = subprocess.run(
            reviewer("token", "create", "--db", str(db), "--name", name, "--role", role),
            capture_output=True,
            text=True,
            check=True,
            env=environment(tree),
            cwd=tree,
        )
        tokens[role] = minted.stdout.strip()
    return process, url, tokens


def one_round(
    tree: Path, queue_url: str, tokens: dict[str, str], api: RecordingApi, poll: float
) -> tuple[float, float]:
    """Seconds to the API receiving the run's first real write from sending the approval, and from
    the queue's answer that it is stored."""
    api.written.clear()
    run = subprocess.Popen(
        reviewer(
            "run",
            "--api",
            api.url,
            "--queue",
            queue_url,
            "--poll-interval",
            str(poll),
            "--",
            sys.executable,
            "-c",
            CHILD,
        ),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment(tree, REVIEWER_AGENT_TOKEN=tokens["agent"]),
        cwd=tree,
    )
    assert run.stderr is not None
    lines = []
    for line in run.stderr:
        lines.append(line)
        found = WAITS.search(line)
        if found:
            proposal_id = found.group(1)
            break
    else:
        raise SystemExit("reviewer run did not submit:\n" + "".join(lines))
    as_reviewer = {"Authorization": f"Bearer {tokens['reviewer']}"}
    with httpx.Client(base_url=queue_url, headers=as_reviewer) as client:
        state = client.get(f"/v1/proposals/{proposal_id}/decision").json()
        decision = {"revision": state["revision"], "plan_sha256": state["plan_sha256"], "decision": "approve"}
        time.sleep(0.5)  # the run is waiting by now, as it would be for a reviewer reading the plan
        sent_at = time.perf_counter()
        answer = client.post(
            f"/v1/proposals/{proposal_id}/decisions",
            json=decision,
            headers={"Idempotency-Key": str(uuid.uuid4())},
        )
        answered_at = time.perf_counter()
        answer.raise_for_status()
    if not api.written.wait(60):
        run.kill()
        raise SystemExit("the approved write never arrived")
    written_at = api.writes[-1]
    _, rest = run.communicate(timeout=60)
    if run.returncode != 0:
        raise SystemExit(f"reviewer run failed ({run.returncode}):\n" + "".join(lines) + rest)
    return written_at - sent_at, written_at - answered_at


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--tree", type=Path, default=HERE.parent, help="the checkout to run (default: this)")
    parser.add_argument("--poll-interval", type=float, default=2.0, help="reviewer run's (default 2)")
    options = parser.parse_args()
    api = RecordingApi()
    with tempfile.TemporaryDirectory() as folder:
        queue, queue_url, tokens = start_queue(options.tree, Path(folder))
        try:
            figures = [
                one_round(options.tree, queue_url, tokens, api, options.poll_interval)
                for _ in range(options.rounds)
            ]
        finally:
            queue.terminate()
            queue.wait(10)
    print(f"tree: {options.tree}  rounds: {options.rounds}  poll interval: {options.poll_interval:g} s")
    for index, since in enumerate(("sending the approval", "the approval stored (its 201)")):
        milliseconds = sorted(pair[index] * 1000 for pair in figures)
        print(
            f"from {since} to the first real write: median {statistics.median(milliseconds):.1f} ms, "
            f"min {milliseconds[0]:.1f} ms, max {milliseconds[-1]:.1f} ms"
        )
    print("goal: at most 100 ms (median)")


if __name__ == "__main__":
    main()
