"""The shell commands from outside the process: `reviewer list` with 300 and 3,000 pending against an
empty queue, and `list`, `show`, `approve` and `reject` each against Python + httpx sending the same
requests, in one run.

Run: `python bench/bench_shell.py [--rounds 7]`. It starts the real `reviewer serve` on an SQLite file,
mints a reviewer's and an agent's token, and runs each command as a reviewer would (a fresh process,
the queue and token from the environment, its output into a pipe), the command and its peer
alternating round by round. Each figure is the median of the rounds: the wall time from the
process's start to its exit, and the CPU time it spent (user and system, read from the kernel, which
the other work on a shared machine moves less). Ratios are of the medians. Pending proposals are
written through the queue's store, as the service would write them (three environments, the plans a
few calls each). It prints the figures and the load average, and asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from reviewer.service.auth import Identity, hash_token  # noqa: E402
from reviewer.service.bodies import submission  # noqa: E402
from reviewer.service.store.opener import open_store  # noqa: E402
from tests.queue_harness import mint_tokens, start_service  # noqa: E402

PYTHON = sys.executable
ENVIRONMENTS = ("production", "staging", "sandbox")

PEERS = {
    "list": """
import httpx, os, sys
queue, token = os.environ["REVIEWER_QUEUE"], os.environ["REVIEWER_TOKEN"]
with httpx.Client(base_url=queue, headers={"Authorization": "Bearer " + token}) as client:
    cursor = None
    while True:
        params = {"state": "pending", "limit": sys.argv[1], "yours": "true"}
        params.update({"cursor": cursor} if cursor else {})
        page = client.get("/v1/proposals", params=params).json()
        for row in page["proposals"]:
            print(row["proposal_id"], row["title"])
        cursor = page.get("next_cursor")
        if cursor is None or sys.argv[2] == "one":
            break
""",
    "show": """
import httpx, os, sys
queue, token = os.environ["REVIEWER_QUEUE"], os.environ["REVIEWER_TOKEN"]
with httpx.Client(base_url=queue, headers={"Authorization": "Bearer " + token}) as client:
    client.get(f"/v1/proposals/{sys.argv[1]}").raise_for_status()
    record = client.get(f"/v1/proposals/{sys.argv[1]}").json()
    plan = client.get(f"/v1/proposals/{sys.argv[1]}/revisions/{record['latest']['revision']}").json()
    print(plan["title"], len(plan["calls"]))
""",
    "approve": """
import httpx, os, sys, uuid
queue, token = os.environ["REVIEWER_QUEUE"], os.environ["REVIEWER_TOKEN"]
with httpx.Client(base_url=queue, headers={"Authorization": "Bearer " + token}) as client:
    client.get(f"/v1/proposals/{sys.argv[1]}").raise_for_status()
    decision = {"revision": 1, "plan_sha256": sys.argv[2], "decision": "approve", "reason": ""}
    answer = client.post(f"/v1/proposals/{sys.argv[1]}/decisions", json=decision,
                         headers={"Idempotency-Key": str(uuid.uuid4())})
    print(answer.json()["state"])
""",
    "reject": """
import httpx, os, sys, uuid
queue, token = os.environ["REVIEWER_QUEUE"], os.environ["REVIEWER_TOKEN"]
with httpx.Client(base_url=queue, headers={"Authorization": "Bearer " + token}) as client:
    client.get(f"/v1/proposals/{sys.argv[1]}").raise_for_status()
    record = client.get(f"/v1/proposals/{sys.argv[1]}").json()
    decision = {"revision": 1, "plan_sha256": record["revisions"][0]["plan_sha256"], "decision": "reject",
                "reason": "not now"}
    answer = client.post(f"/v1/proposals/{sys.argv[1]}/decisions", json=decision,
                         headers={"Idempotency-Key": str(uuid.uuid4())})
    print(answer.json()["state"])
""",
}
"""Each command's requests, sent by Python and httpx alone: what the command must not cost much more than."""


def plan(proposal_id: str, number: int) -> bytes:
    """A small plan: two updates and a delete, in one of three environments."""
    calls = [
        {
            "seq": seq,
            "tool": tool,
            "effect": effect,
            "args": {"id": f"t{number}-{seq}"},
            "request": {"method": method, "path": f"/v1/tickets/t{number}-{seq}"},
            "outcome": {"status": "ok", "http_status": 200},
        }
        for seq, (tool, effect, method) in enumerate(
            [
                ("update_ticket", "update", "PATCH"),
                ("update_ticket", "update", "PATCH"),
                ("delete_ticket", "delete", "DELETE"),
            ],
            start=1,
        )
    ]
    document = {
        "format": "reviewer.proposal/v1",
        "proposal_id": proposal_id,
        "revision": 1,
        "title": f"Close tickets of batch {number}",
        "agent": {"name": "deskline-agent"},
        "created_at": "2026-12-01T09:00:00Z",
        "target": {"api": "deskline", "environment": ENVIRONMENTS[number % 3]},
        "dry_run": {"via": "server", "write_requests": 3, "writes_kept": 0},
        "calls": calls,
    }
    return json.dumps(document).encode()


@dataclass
class Queue:
    url: str
    db: Path
    reviewer_token: str
    agent: Identity
    submitted: int = 0

    def submit(self, count: int, prefix: str = "batch") -> list[tuple[str, str]]:
        """`count` pending proposals, written by the agent through the store; their ids and digests."""
        store = open_store(self.db, clock=time.time, pending_ttl=86400, approval_ttl=86400, create=False)
        made = []
        try:
            for _ in range(count):
                self.submitted += 1
                proposal_id = f"{prefix}-{self.submitted}"
                _created, answer = store.submit(self.agent, submission(plan(proposal_id, self.submitted)))
                made.append((proposal_id, answer.plan_sha256))
        finally:
            store.close()
        return made


@contextmanager
def served(folder: Path) -> Iterator[Queue]:
    """The real `reviewer serve` on an SQLite file in `folder`, started as the tests start it, with a
    reviewer's token and an agent's."""
    service = start_service(folder)
    try:
        tokens = mint_tokens(service.db, {"alice": "reviewer", "agent": "agent"})
        store = open_store(service.db, clock=time.time, pending_ttl=86400, approval_ttl=86400, create=False)
        try:
            agent = store.resolve_token(hash_token(tokens["agent"]))
        finally:
            store.close()
        assert agent is not None
        yield Queue(service.url, Path(service.db), tokens["alice"], agent)
    finally:
        service.stop()


@dataclass
class Figure:
    wall: float
    cpu: float


def timed(argv: list[str], environ: dict[str, str]) -> Figure:
    """One process run to its exit: its wall time and the CPU time it (and its children) spent."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    finished = subprocess.run(argv, env=environ, capture_output=True, check=False)
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if finished.returncode != 0:
        raise RuntimeError(f"{argv[:4]} failed: {finished.stderr.decode(errors='replace')[-400:]}")
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return Figure(wall, cpu)


def median(figures: list[Figure]) -> Figure:
    return Figure(statistics.median(f.wall for f in figures), statistics.median(f.cpu for f in figures))


def environ_of(queue: Queue) -> dict[str, str]:
    environ = {key: value for key, value in os.environ.items() if key not in ("PAGER", "SSH_AUTH_SOCK")}
    environ.update(
        REVIEWER_QUEUE=queue.url,
        REVIEWER_TOKEN=queue.reviewer_token,
        XDG_CONFIG_HOME=str(queue.db.parent / "no-config"),
        COLUMNS="100",
    )
    environ.pop("REVIEWER_SIGNING_KEY", None)
    return environ


def reviewer(*args: str) -> list[str]:
    return [PYTHON, "-m", "reviewer", *args]


def peer(command: str, *args: str) -> list[str]:
    return [PYTHON, "-c", PEERS[command], *args]


def side_by_side(
    rounds: int,
    first: Callable[[int], list[str]],
    second: Callable[[int], list[str]],
    environ: dict[str, str],
) -> tuple[Figure, Figure]:
    """Both commands `rounds` times, alternating (each given the round's number), their medians."""
    ones, twos = [], []
    for number in range(rounds):
        ones.append(timed(first(number), environ))
        twos.append(timed(second(number), environ))
    return median(ones), median(twos)


def row(name: str, command: Figure, baseline: Figure, goal: float) -> str:
    wall, cpu = command.wall / baseline.wall, command.cpu / baseline.cpu
    return (
        f"| {name} | {command.wall * 1000:,.0f} ms ({command.cpu * 1000:,.0f} CPU) | "
        f"{baseline.wall * 1000:,.0f} ms ({baseline.cpu * 1000:,.0f} CPU) | {wall:.2f} | {cpu:.2f} | {goal} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=7)
    options = parser.parse_args()
    rounds = options.rounds
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as folder, served(Path(folder)) as queue:
        environ = environ_of(queue)
        whole = lambda _n: reviewer("list")  # noqa: E731
        one_page = lambda _n: reviewer("list", "--limit", "50")  # noqa: E731
        empty_whole, empty_page = side_by_side(rounds, whole, one_page, environ)
        lines = [
            "| pending | `reviewer list` | ratio to empty | `reviewer list --limit 50` | ratio to empty |"
        ]
        lines.append("| --- | --- | --- | --- | --- |")
        lines.append(
            f"| 0 | {empty_whole.wall * 1000:,.0f} ms ({empty_whole.cpu * 1000:,.0f} CPU) | 1.00 | "
            f"{empty_page.wall * 1000:,.0f} ms ({empty_page.cpu * 1000:,.0f} CPU) | 1.00 |"
        )
        for pending in (300, 3000):
            queue.submit(pending - queue.submitted)
            full, page = side_by_side(rounds, whole, one_page, environ)
            lines.append(
                f"| {pending:,} | {full.wall * 1000:,.0f} ms ({full.cpu * 1000:,.0f} CPU) | "
                f"{full.wall / empty_whole.wall:.2f} (CPU {full.cpu / empty_whole.cpu:.2f}) | "
                f"{page.wall * 1000:,.0f} ms ({page.cpu * 1000:,.0f} CPU) | "
                f"{page.wall / empty_page.wall:.2f} (CPU {page.cpu / empty_page.cpu:.2f}) |"
            )
        print("\n".join(lines))
        print()
        shown = queue.submit(1, "shown")[0][0]
        approving = queue.submit(2 * rounds, "approving")
        rejecting = queue.submit(2 * rounds, "rejecting")
        table = [
            "| command (3,000 pending) | the command | Python + httpx, same requests | ratio | CPU ratio "
            "| goal |",
            "| --- | --- | --- | --- | --- | --- |",
        ]
        figures = side_by_side(rounds, one_page, lambda _n: peer("list", "50", "one"), environ)
        table.append(row("`list --limit 50`", *figures, 1.3))
        figures = side_by_side(
            rounds, lambda _n: reviewer("show", shown), lambda _n: peer("show", shown), environ
        )
        table.append(row("`show ID`", *figures, 1.3))

        def approve(number: int) -> list[str]:
            proposal_id, digest = approving[2 * number]
            return reviewer("approve", proposal_id, "--revision", "1", "--digest", digest)

        def approve_peer(number: int) -> list[str]:
            return peer("approve", *approving[2 * number + 1])

        table.append(row("`approve ID`", *side_by_side(rounds, approve, approve_peer, environ), 1.3))

        def reject(number: int) -> list[str]:
            return reviewer("reject", rejecting[2 * number][0], "--revision", "1", "--reason", "not now")

        def reject_peer(number: int) -> list[str]:
            return peer("reject", rejecting[2 * number + 1][0])

        table.append(row("`reject ID`", *side_by_side(rounds, reject, reject_peer, environ), 1.3))
        print("\n".join(table))
    print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
