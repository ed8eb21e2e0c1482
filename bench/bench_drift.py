"""Drift between two revisions of a 100,000-call plan, against difflib.SequenceMatcher as the baseline.

Two scenarios. *replan*: the second revision inserts one call, changes one argument and removes one
call (renumbering every seq after the insertion, as a re-plan does). *scattered*: a heavy rewrite,
the case a sloppy or hostile agent can make at will: `--changes` arguments changed at random calls
spread evenly through the plan (2,000 by default), plus a few calls inserted and removed, every seq
renumbered. Both sides are parsed proposals, as the app holds them
(each call a slice of the JSON, see `CallList`); the same revisions decoded into lists of structs,
as a proposal built in code carries them, are timed too. The baseline is what a generic differ
would do: one row hash per call (its JSON without seq and outcome), then `SequenceMatcher` over the
two hash lists; it only finds the matching rows, no fields. Memory is traced apart from the timing
(tracing slows Python down): what the two parsed revisions hold, and the peak each computation adds
on top. Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import copy
import difflib
import gc
import random
import statistics
import sys
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

import msgspec

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reviewer.plan.proposal import Proposal, parse_proposal
from reviewer.reading.drift import diff_revisions
from reviewer.sample_api.bulk_plans import bulk_refund_plan, replan


def revision_texts(calls: int) -> tuple[bytes, bytes]:
    """The JSON of revision 1, and of revision 2 with one call inserted, one changed and one removed."""
    first = bulk_refund_plan(calls, revision=1)
    return msgspec.json.encode(first), msgspec.json.encode(replan(first))


def scattered_texts(calls: int, changes: int, *, seed: int = 11) -> tuple[bytes, bytes]:
    """The JSON of revision 1, and of revision 2 with `changes` amounts changed at calls spread evenly
    through the plan (difflib's worst case: many equally long runs), five calls inserted and five
    removed at random, and every seq renumbered."""
    first = bulk_refund_plan(calls, revision=1)
    second = copy.deepcopy(first)
    second["revision"] = 2
    rows = second["calls"]
    rng = random.Random(seed)
    for row in rows[calls // changes // 2 :: calls // changes][:changes]:
        row["args"] = dict(row["args"], amount_cents=row["args"].get("amount_cents", 0) + 1, changed=True)
        row["request"]["body"] = row["args"]
    for at in sorted(rng.sample(range(calls), 5), reverse=True):
        inserted = copy.deepcopy(rows[at])
        inserted["args"] = dict(inserted["args"], customer="cus-inserted")
        inserted["request"]["body"] = inserted["args"]
        rows.insert(at, inserted)
    for at in sorted(rng.sample(range(len(rows)), 5), reverse=True):
        del rows[at]
    for position, row in enumerate(rows, start=1):
        row["seq"] = position
    return msgspec.json.encode(first), msgspec.json.encode(second)


def sequence_matcher_baseline(old: Proposal, new: Proposal) -> list[Any]:
    def row_hashes(proposal: Proposal) -> list[int]:
        encode = msgspec.json.encode
        return [hash(encode((call.tool, call.effect, call.args, call.request))) for call in proposal.calls]

    return difflib.SequenceMatcher(None, row_hashes(old), row_hashes(new), autojunk=False).get_opcodes()


def best_of(repeats: int, work: Callable[[], Any]) -> tuple[float, float, Any]:
    """(best, median) wall time in ms, and the last result; gc is left as the caller's code finds it."""
    times = []
    result = None
    for _ in range(repeats):
        gc.collect()
        start = time.perf_counter()
        result = work()
        times.append((time.perf_counter() - start) * 1000)
    return min(times), statistics.median(times), result


def traced(work: Callable[[], Any]) -> tuple[float, Any]:
    """The peak memory (MB) `work` allocates beyond what is already held, and its result."""
    gc.collect()
    tracemalloc.start()
    try:
        result = work()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak / 1e6, result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--scenario", choices=["replan", "scattered", "both"], default="both")
    parser.add_argument("--changes", type=int, default=2_000, help="scattered changes (scenario scattered)")
    parser.add_argument(
        "--baseline", action="store_true", help="time the SequenceMatcher baseline for scattered too (slow)"
    )
    options = parser.parse_args()
    if options.scenario in ("replan", "both"):
        print(f"plan: {options.calls:,} calls; revision 2: one inserted, one changed, one removed")
        run(*revision_texts(options.calls), repeats=options.repeats, baseline=True)
    if options.scenario in ("scattered", "both"):
        if options.scenario == "both":
            print()
        print(
            f"plan: {options.calls:,} calls; revision 2: {options.changes:,} scattered changes,"
            " 5 inserted, 5 removed, renumbered"
        )
        run(
            *scattered_texts(options.calls, options.changes),
            repeats=max(1, options.repeats // 2),
            baseline=options.baseline,
        )


def run(old_text: bytes, new_text: bytes, *, repeats: int, baseline: bool) -> None:
    held, (old, new) = traced(lambda: (parse_proposal(old_text), parse_proposal(new_text)))
    old_built = msgspec.json.decode(old_text, type=Proposal)
    new_built = msgspec.json.decode(new_text, type=Proposal)

    drift_best, drift_median, drift = best_of(repeats, lambda: diff_revisions(old, new))
    built_best, built_median, _ = best_of(repeats, lambda: diff_revisions(old_built, new_built))
    drift_peak, _ = traced(lambda: diff_revisions(old, new))

    print(f"parsed revisions: {len(old_text) / 1e6:.1f} MB of JSON each, and {held:.1f} MB more for both")
    print(f"drift:     {drift.summary}; {drift.unchanged:,} unchanged")
    for pair in drift.changed[:3]:
        print(f"           call {pair.old_seq} -> {pair.new_seq}: {', '.join(f.path for f in pair.fields)}")
    if len(drift.changed) > 3:
        print(f"           ... and {len(drift.changed) - 3:,} more changed calls")
    print(
        f"diff_revisions (parsed) best {drift_best:7.1f} ms   median {drift_median:7.1f} ms"
        f"   peak +{drift_peak:.1f} MB"
    )
    print(f"diff_revisions (built)  best {built_best:7.1f} ms   median {built_median:7.1f} ms")
    if not baseline:
        return
    base_best, base_median, opcodes = best_of(
        max(1, repeats // 2), lambda: sequence_matcher_baseline(old, new)
    )
    base_peak, _ = traced(lambda: sequence_matcher_baseline(old, new))
    edits = sum(1 for tag, *_ in opcodes if tag != "equal")
    print(
        f"SequenceMatcher (rows)  best {base_best:7.1f} ms   median {base_median:7.1f} ms"
        f"   peak +{base_peak:.1f} MB   ({edits} opcodes)"
    )
    print(f"ratio baseline/drift (best): {base_best / drift_best:.1f}x")


if __name__ == "__main__":
    main()
