"""Generate large proposals for the benchmarks: bulk refund plans, and shapes that probe memory."""

from __future__ import annotations

import argparse
from pathlib import Path

import msgspec

from reviewer.sample_api.bulk_plans import bulk_refund_plan, replan

__all__ = ["ADVERSARIAL_SHAPES", "adversarial_plan", "bulk_refund_plan", "main", "replan"]


ADVERSARIAL_SHAPES = ("empty arrays", "numbers", "distinct keys", "long strings", "deep nesting")


def adversarial_plan(shape: str, target_bytes: int) -> bytes:
    """A proposal of about `target_bytes` whose calls' arguments are all one cheap-to-write,
    costly-to-hold shape, as an agent probing the reviewer's memory would write it. Each call keeps
    under the 250,000 values a call may hold, so only the whole-proposal caps can refuse it."""
    per_call = 200_000
    if shape == "empty arrays":
        args = b'{"x": [' + b",".join([b"[]"] * per_call) + b"]}"
    elif shape == "numbers":
        args = b'{"x": [' + b",".join([b"1"] * per_call) + b"]}"
    elif shape == "distinct keys":
        args = b"{" + b",".join(b'"k%d": 1' % index for index in range(per_call)) + b"}"
    elif shape == "long strings":
        args = b'{"x": "' + b"a" * 1_000_000 + b'"}'
    elif shape == "deep nesting":
        args = b'{"x": [' + b",".join([b"[" * 60 + b"1" + b"]" * 60] * 4_000) + b"]}"
    else:
        raise ValueError(f"no such shape: {shape}")
    header = bulk_refund_plan(1)
    header.pop("calls")
    one = b'{"seq": %d, "tool": "t", "effect": "other", "args": ' + args + b"}"
    calls = max(1, target_bytes // len(one))
    body = msgspec.json.encode(header)[:-1] + b',"calls":['
    return body + b",".join(one % (seq + 1) for seq in range(calls)) + b"]}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("calls", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    options.out.write_bytes(msgspec.json.encode(bulk_refund_plan(options.calls, seed=options.seed)))


if __name__ == "__main__":
    main()
