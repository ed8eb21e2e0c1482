"""What the trail's Merkle log costs: appending, as a share of a submission, and verifying an export
of a million entries offline.

Appending is measured from outside the process, as a client sees it: two `reviewer serve` processes
on SQLite files of their own, one as released and one whose log append is switched off (the bench
patches it out of that process before it serves), each sent the same submissions over HTTP in
alternating rounds; the ratio is the difference of the medians over the median without the log.
Verifying writes a million-entry export (leaves shaped like the queue's, a checkpoint signed with a
throwaway key) and times `reviewer trail verify` on it, as a command, under GNU time (`/usr/bin/time`,
for its peak memory and CPU). Prints; asserts nothing.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import httpx
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

from reviewer.service.auth import hash_token, mint_token
from reviewer.service.store.opener import open_store
from reviewer.trail import checkpoint
from reviewer.trail.entries import entry_line, header_line, leaf
from reviewer.trail.merkle import CompactTree
from tests.builders import proposal_document
from tests.service.ports import free_port

SERVE = "import sys; from reviewer.__main__ import main; sys.exit(main(sys.argv[1:]))"
"""Both queues start the same way; the one without the log has its append patched out first."""
WITHOUT_LOG = "import reviewer.service.store.trail as trail; trail.append = lambda *a, **k: 0; " + SERVE


def start(folder: Path, with_log: bool) -> tuple[subprocess.Popen[bytes], str, str]:
    database = folder / "queue.sqlite3"
    port = free_port()
    entry = ["-c", SERVE if with_log else WITHOUT_LOG]
    process = subprocess.Popen(
        [sys.executable, *entry, "serve", "--db", str(database), "--port", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    url = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            httpx.get(f"{url}/healthz", timeout=2)
            break
        except httpx.TransportError:
            time.sleep(0.1)
    store = open_store(database, clock=time.time, pending_ttl=86400, approval_ttl=3600, create=False)
    token = mint_token()
    store.create_token("agent", "agent", hash_token(token))
    store.close()
    return process, url, token


def submission(proposal_id: str, calls: int) -> bytes:
    return json.dumps(
        proposal_document(
            [
                {
                    "tool": "update_ticket",
                    "effect": "update",
                    "args": {"id": f"t{seq}", "status": "closed"},
                    "outcome": {"status": "ok", "http_status": 200},
                }
                for seq in range(1, calls + 1)
            ],
            proposal_id=proposal_id,
        )
    ).encode()


def cpu_seconds(pid: int) -> float:
    """The CPU time a process has used (user and system), read from outside it in /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def timed_submissions(with_log: bool, count: int, calls: int, first: int) -> tuple[list[float], float]:
    """`count` submissions to a fresh queue, each timed by the client, and the CPU seconds the queue's
    process spent on them; the queue stopped after."""
    with tempfile.TemporaryDirectory() as folder:
        process, url, token = start(Path(folder), with_log)
        times = []
        try:
            with httpx.Client(base_url=url, headers={"Authorization": f"Bearer {token}"}) as client:
                client.get("/v1/whoami")  # the connection made, and the first request's imports done
                cpu_before = cpu_seconds(process.pid)
                for number in range(first, first + count):
                    body = submission(f"bench-{number}", calls)
                    began = time.perf_counter()
                    answer = client.post("/v1/proposals", content=body)
                    times.append(time.perf_counter() - began)
                    assert answer.status_code == 201, answer.text
                cpu = cpu_seconds(process.pid) - cpu_before
        finally:
            process.terminate()
            process.wait()
    return times, cpu


def append_ratio(rounds: int, per_round: int, calls: int) -> None:
    """One queue at a time, the two kinds alternating round by round. The figure that holds still is
    the queue process's CPU time per submission: wall time is mostly an fsync, whose time on a shared
    machine scatters by a factor of two between two queues running the same code, which would drown
    a difference of a few percent. Both are printed."""
    times: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, float] = {True: 0.0, False: 0.0}
    for round_number in range(rounds):
        for with_log in (True, False) if round_number % 2 else (False, True):
            taken, spent = timed_submissions(with_log, per_round, calls, round_number * per_round)
            times[with_log] += taken
            cpu[with_log] += spent
    count = rounds * per_round
    print(f"a submission of {calls} calls over HTTP, {count} to each queue (the queue's CPU from /proc):")
    print("                        wall, median   queue CPU, mean")
    for with_log, label in ((True, "with the trail's log"), (False, "without it")):
        print(
            f"  {label:20}  {statistics.median(times[with_log]) * 1000:8.2f} ms  "
            f"{cpu[with_log] / count * 1000:12.2f} ms"
        )
    ratio = (cpu[True] - cpu[False]) / cpu[False]
    wall = (statistics.median(times[True]) - statistics.median(times[False])) / statistics.median(
        times[False]
    )
    print(
        f"  appending costs {100 * ratio:+.1f}% of a submission's CPU (goal: at most 10%); "
        f"wall {100 * wall:+.1f}%"
    )


def write_export(path: Path, entries: int, key: Ed25519PrivateKey) -> None:
    """The entries go to a file of their own as they are made, then behind the header that holds the
    checkpoint of their root: the bench holds no million lines in memory."""
    tree = CompactTree()
    body = path.with_suffix(".entries")
    with body.open("wb") as file:
        for index in range(entries):
            content = leaf(
                index=index,
                seq=index + 1,
                at=1_780_000_000.0 + index,
                actor="alice" if index % 2 else "deploy-agent",
                event="approved" if index % 2 else "submitted",
                proposal_id=f"proposal-{index // 2}",
                revision=1,
                plan_sha256="5be1" * 16,
                reason=None,
            )
            file.write(entry_line(index, tree.append(content), content))
    signed = checkpoint.sign(key, tree.size, tree.root())
    with path.open("wb") as file, body.open("rb") as entries_file:
        file.write(header_line(0, tree.size, signed.text, []))
        shutil.copyfileobj(entries_file, file, 1 << 20)
    body.unlink()


def verify_time(entries: int) -> None:
    """`reviewer trail verify` as a command under GNU time, which reports its peak memory and CPU."""
    key = Ed25519PrivateKey.generate()
    with tempfile.TemporaryDirectory() as folder:
        export = Path(folder) / "trail.jsonl"
        public = Path(folder) / "trail_key.pub"
        public.write_text(checkpoint.openssh_public(key.public_key()) + "\n")
        write_export(export, entries, key)
        size = export.stat().st_size
        measured = Path(folder) / "time"
        command = [sys.executable, "-m", "reviewer", "trail", "verify", str(export), "--key", str(public)]
        began = time.perf_counter()
        result = subprocess.run(
            ["/usr/bin/time", "-o", str(measured), "-f", "%M %U %S", *command],
            capture_output=True,
            text=True,
            env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)},
        )
        took = time.perf_counter() - began
        peak_kb, user, system = measured.read_text().split()[-3:]
    print(
        f"`reviewer trail verify` of {entries:,} entries ({size / 1e6:,.0f} MB): {took:.2f} s wall, "
        f"{float(user) + float(system):.2f} s CPU (goal: at most 10 s), "
        f"peak memory {int(peak_kb) / 1024:.0f} MB"
    )
    print(f"  exit {result.returncode}: {(result.stdout or result.stderr).strip()[:160]}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-round", type=int, default=50)
    parser.add_argument("--calls", type=int, default=10)
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--only", choices=("append", "verify"))
    options = parser.parse_args()
    if options.only != "append":
        verify_time(options.entries)
    if options.only != "verify":
        append_ratio(options.rounds, options.per_round, options.calls)


if __name__ == "__main__":
    main()
