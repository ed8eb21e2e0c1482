"""What a policy costs: 20 rules over a large plan against the submission itself, each kind of rule
at three sizes, and how long other requests wait while the queue evaluates the largest plan.

Run: `.venv/bin/python bench/bench_policy.py [--calls 100000] [--sizes 10000,50000,200000]`.
Three parts, in one run, each line with the load average:
- 20 rules (map, filter keeping none and keeping 90%, exists, all, aggregates) over `--calls`
  calls, in this process (`reviewer.policy.verdict.evaluate`), against the queue's own check of
  the same submission (`reviewer.service.bodies.submission`: parse, limits, digest);
- each kind of rule alone at each of `--sizes`, in a worker as the queue runs it: the plan's
  values (made once for every rule) and the rule's own time, per call, to show the growth;
- a real `reviewer serve --policy` with the 20 rules: `/v1/whoami` asked again and again while the
  largest plan is submitted and evaluated, against the same on the idle queue (p50, p99, max), and
  the same on a queue without a policy (what the submission itself costs the others).
It prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.generate import bulk_refund_plan
from reviewer.policy.bounded import PolicyEvaluator
from reviewer.policy.file import parse_policy
from reviewer.policy.verdict import evaluate
from reviewer.service.bodies import submission

KINDS = {
    "map": "plan.calls.map(c, c.tool).size() > {n}000000",
    "filter keeping none": 'plan.calls.filter(c, c.effect == "delete").size() > {n}',
    "filter keeping 90%": 'plan.calls.filter(c, c.effect == "create").size() > {n}00000',
    "exists": 'plan.calls.exists(c, c.tool == "drop_table_{n}")',
    "all": 'plan.calls.all(c, c.effect != "other{n}")',
    "map of arguments, exists": (
        'plan.calls.map(c, c.args).exists(a, "customer" in a && a.customer == "x{n}")'
    ),
    "aggregate": "plan.counts.delete > {n} || plan.tools.size() > {n}0",
}
MIX = {
    "map": 3,
    "filter keeping none": 3,
    "filter keeping 90%": 3,
    "exists": 3,
    "all": 3,
    "aggregate": 5,
}
"""The 20 rules: three of each walk and five aggregates, each with its own constant."""


def policy_text(expressions: list[str]) -> str:
    rules = "".join(
        f'\n[[rules]]\nname = "rule {number}"\nwhen = {expression!r}\napprovals = 2\n'
        for number, expression in enumerate(expressions, start=1)
    )
    return (
        '[default]\napprovals = 1\n\n[environments.billing]\nbase_urls = ["https://billing.example/*"]\n'
        + rules
    )


def twenty_rules() -> list[str]:
    return [KINDS[kind].format(n=number + 1) for kind, count in MIX.items() for number in range(count)]


def plan_body(calls: int) -> bytes:
    document = bulk_refund_plan(calls, request_body=calls <= 100_000)
    document["target"]["base_url"] = "https://billing.example/v1"
    return msgspec.json.encode(document)


def load() -> str:
    return "load " + " ".join(f"{value:.1f}" for value in os.getloadavg())


def median_seconds(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def against_the_submission(calls: int, runs: int) -> None:
    raw = plan_body(calls)
    proposal = submission(raw).proposal
    assert proposal is not None
    print(f"1. 20 rules over {calls:,} calls ({len(raw) / 1e6:.0f} MB), {load()}")
    submitted = median_seconds(lambda: submission(raw), runs)
    print(f"   the submission (parse, limits, digest): {submitted:.2f} s")
    for label, expressions in (
        (
            "20 rules: 3 map, 3 filter keeping none, 3 keeping 90%, 3 exists, 3 all, 5 aggregates",
            twenty_rules(),
        ),
        ("20 aggregates", [KINDS["aggregate"].format(n=number) for number in range(20)]),
    ):
        policy = parse_policy(policy_text(expressions))
        spent = median_seconds(lambda policy=policy: evaluate(policy, proposal), runs)  # type: ignore[misc]
        print(f"   {label}: {spent:.2f} s, {spent / submitted:.0%} of the submission ({load()})")


def growth(sizes: list[int]) -> None:
    print(f"2. each rule alone, in a worker as the queue runs it, {load()}")
    bodies = {size: plan_body(size) for size in sizes}
    for kind, expression in KINDS.items():
        policy = parse_policy(policy_text([expression.format(n=1)]))
        figures = []
        for size in sizes:
            evaluator = PolicyEvaluator(policy, 600.0, workers=1)
            try:
                result = evaluator.evaluate(bodies[size])
            finally:
                evaluator.close()
            values = result.values_seconds or 0.0
            rule = result.outcomes[0].seconds
            figures.append(
                f"{size:>7,}: values {values:6.2f} s, rule {rule * 1000:9.2f} ms = "
                f"{rule / size * 1e6:7.3f} µs/call"
            )
        print(f"   {kind}:")
        for line in figures:
            print(f"     {line}")
    print(f"   ({load()})")


def waits_while_evaluating(calls: int, asks: int, with_policy: bool) -> None:
    from tests.queue_harness import start_service

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder)
        (path / "policy.toml").write_text(policy_text(twenty_rules()))
        policy = ("--policy", str(path / "policy.toml"), "--policy-deadline", "600") if with_policy else ()
        service = start_service(path, *policy)
        try:
            agent = service.client(service.token("agent", "agent"))
            reviewer = service.client(service.token("alice", "reviewer"))
            idle = [ask(reviewer) for _ in range(asks)]
            raw = plan_body(calls)
            done = threading.Event()
            answer: list[int] = []

            def submit() -> None:
                answer.append(agent.post("/v1/proposals", content=raw, timeout=900).status_code)
                done.set()

            thread = threading.Thread(target=submit)
            start = time.perf_counter()
            thread.start()
            busy = []
            while not done.is_set():
                busy.append(ask(reviewer))
            thread.join()
            spent = time.perf_counter() - start
        finally:
            service.stop()
    what = "submitted and evaluated by the 20 rules" if with_policy else "submitted, no policy"
    print(f"3. /v1/whoami while {calls:,} calls are {what} ({spent:.1f} s, {answer}), {load()}")
    for label, waits in (("idle queue", idle), ("during the submission", busy)):
        waits.sort()
        p99 = waits[min(len(waits) - 1, int(len(waits) * 0.99))]
        print(
            f"   {label}: {len(waits)} requests, p50 {statistics.median(waits) * 1000:.1f} ms, "
            f"p99 {p99 * 1000:.1f} ms, max {waits[-1] * 1000:.1f} ms"
        )


def ask(client: object) -> float:
    start = time.perf_counter()
    response = client.get("/v1/whoami", timeout=120)  # type: ignore[attr-defined]
    assert response.status_code == 200
    return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--sizes", default="10000,50000,200000")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--asks", type=int, default=200)
    parser.add_argument("--only", choices=("submission", "growth", "waits"))
    args = parser.parse_args()
    sizes = [int(size) for size in args.sizes.split(",")]
    if args.only in (None, "submission"):
        against_the_submission(args.calls, args.runs)
    if args.only in (None, "growth"):
        growth(sizes)
    if args.only in (None, "waits"):
        waits_while_evaluating(max(sizes), args.asks, with_policy=False)
        waits_while_evaluating(max(sizes), args.asks, with_policy=True)


if __name__ == "__main__":
    main()
