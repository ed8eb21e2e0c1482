"""A policy of 20 rules over the 100,000-call plan, against what the submission itself costs.

Run: `.venv/bin/python bench/bench_policy.py [--calls 100000]`. The submission's cost is the
queue's own check of the body (`reviewer.service.bodies.submission`: parse, limits, digest); the
policy's is `reviewer.policy.verdict.evaluate` on the parsed proposal: the environment, one pass
over the calls for the activation, the CEL conversion, and the 20 rules. Each is timed as the
median of a few runs in this process; it prints figures and asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench.generate import bulk_refund_plan
from reviewer.policy.file import parse_policy
from reviewer.policy.verdict import evaluate
from reviewer.service.bodies import submission

AGGREGATE_RULES = [
    'environment == "production" && plan.counts.delete > 0',
    'environment == "production" && plan.counts.delete > 10',
    "plan.dry_run.writes_kept > 0",
    'plan.dry_run.via != "server"',
    "plan.counts.create + plan.counts.update > 50000",
    "plan.counts.update > 0 && plan.counts.delete > 0",
    'target.api == "billing" && plan.counts.create > 1000',
    'target.base_url.startsWith("http://")',
    'target.environment != "" && environment == null',
    'environment == "staging" && plan.counts.delete == 0 && plan.counts.update < 10',
    "plan.dry_run.write_requests < plan.counts.create + plan.counts.update + plan.counts.delete",
    'environment == "production" && plan.counts.other > 0',
    '"drop_table" in plan.tools',
    '"create_refund" in plan.tools && plan.tools["create_refund"] > 50000',
    "size(plan.tools) > 5",
    'target.api == "crm" && plan.counts.delete > 100',
]
CALL_RULES = [
    'plan.calls.exists(c, c.effect == "delete")',
    'plan.calls.exists(c, c.method == "DELETE" && c.path.startsWith("/v1/customers"))',
    'plan.calls.exists(c, c.tool == "drop_table")',
    'plan.calls.all(c, c.effect != "other")',
    'plan.calls.exists(c, c.path.contains("/admin/"))',
    'plan.calls.filter(c, c.effect == "update").size() > 20000',
    'plan.calls.exists(c, c.tool == "create_refund" && c.args.amount_cents > 1000000)',
    'plan.calls.exists(c, c.args.currency == "USD")',
]


def policy_text(expressions: list[str]) -> str:
    rules = "".join(
        f'\n[[rules]]\nname = "rule {number}"\nwhen = {expression!r}\napprovals = 2\n'
        for number, expression in enumerate(expressions, start=1)
    )
    return (
        '[default]\napprovals = 1\n\n[environments.production]\nbase_urls = ["https://billing.example/*"]\n'
        + rules
    )


def median_ms(work: Callable[[], object], runs: int) -> float:
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        work()
        times.append((time.perf_counter() - start) * 1000)
    return statistics.median(times)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    document = bulk_refund_plan(args.calls)
    document["target"]["base_url"] = "https://billing.example/v1"
    raw = msgspec.json.encode(document)
    proposal = submission(raw).proposal
    assert proposal is not None
    submitted = median_ms(lambda: submission(raw), args.runs)
    print(f"plan: {args.calls:,} calls, {len(raw) / 1e6:.0f} MB")
    print(f"submission (parse, limits, digest): {submitted:,.0f} ms")
    for label, expressions in (
        ("20 rules on counts, tools, dry run and target", (AGGREGATE_RULES * 2)[:20]),
        ("16 of those + 4 walking the calls", AGGREGATE_RULES + CALL_RULES[:4]),
        ("1 rule walking the calls (plan.calls.exists)", CALL_RULES[:1]),
        ("1 rule walking the calls and their arguments", CALL_RULES[-1:]),
        ("1 rule on the screen's alarms (the plan's analysis)", ['"writes_kept" in alarms']),
    ):
        policy = parse_policy(policy_text(expressions))
        spent = median_ms(lambda policy=policy: evaluate(policy, proposal), args.runs)  # type: ignore[misc]
        print(f"policy, {label}: {spent:,.0f} ms ({spent / submitted:.1%} of the submission)")


if __name__ == "__main__":
    main()
