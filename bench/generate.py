"""Generate large, realistic proposals for the benchmarks (and the tests that need many calls)."""

from __future__ import annotations

import argparse
import copy
import random
from pathlib import Path
from typing import Any

import msgspec


def bulk_refund_plan(
    calls: int,
    *,
    seed: int = 7,
    revision: int = 1,
    proposal_id: str = "bulk-refunds-generated",
    request_body: bool = True,
) -> dict[str, Any]:
    """A server-validated plan of `calls` refunds and ticket updates, the shape of a real bulk job.

    About 360 bytes a call; without `request_body` (the arguments again), about 250, so that the
    200,000 calls the limits allow fit in the 64 MB they allow too."""
    rng = random.Random(seed)
    rows = []
    for seq in range(1, calls + 1):
        customer = f"cus-{rng.randrange(10**6):06d}"
        if seq % 10 == 0:
            ticket = f"t{rng.randrange(10**5)}"
            args: dict[str, Any] = {"id": ticket, "status": "closed", "note": "refund issued"}
            rows.append(
                {
                    "seq": seq,
                    "tool": "update_ticket",
                    "effect": "update",
                    "args": args,
                    "request": {
                        "method": "PATCH",
                        "path": f"/v1/tickets/{ticket}",
                        "query": {"dryRun": "All"},
                        **({"body": args} if request_body else {}),
                    },
                    "outcome": {"status": "ok", "http_status": 200},
                }
            )
        else:
            args = {
                "customer": customer,
                "amount_cents": rng.randrange(500, 9000),
                "currency": "EUR",
                "reason": "late delivery",
            }
            rows.append(
                {
                    "seq": seq,
                    "tool": "create_refund",
                    "effect": "create",
                    "args": args,
                    "request": {
                        "method": "POST",
                        "path": "/v1/refunds",
                        "query": {"dryRun": "All"},
                        **({"body": args} if request_body else {}),
                    },
                    "outcome": {"status": "ok", "http_status": 201},
                }
            )
    return {
        "format": "reviewer.proposal/v1",
        "proposal_id": proposal_id,
        "revision": revision,
        "title": f"Refund {calls:,} late deliveries",
        "task": "Refund every order delivered late last week and close its ticket.",
        "agent": {"name": "billing-agent", "run_id": f"run-{seed}"},
        "created_at": "2026-10-15T09:00:00Z",
        "target": {
            "api": "billing",
            "base_url": "https://billing.internal.example",
            "environment": "production",
        },
        "dry_run": {"via": "server", "write_requests": calls, "writes_kept": 0},
        "calls": rows,
    }


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


def replan(plan: dict[str, Any]) -> dict[str, Any]:
    """The next revision of `plan`: one call inserted, one argument changed, one call removed, and
    every seq renumbered as a re-plan does."""
    calls = len(plan["calls"])
    second = copy.deepcopy(plan)
    second["revision"] = plan["revision"] + 1
    rows = second["calls"]
    inserted = copy.deepcopy(rows[calls // 3 + 1])
    inserted["args"]["customer"] = "cus-inserted"
    inserted["request"]["body"] = inserted["args"]
    rows.insert(calls // 3, inserted)
    changed = rows[calls // 2 + 1]
    changed["args"]["amount_cents"] = 1_000_000
    del rows[(calls * 4) // 5]
    for position, row in enumerate(rows, start=1):
        row["seq"] = position
    return second


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("calls", type=int)
    parser.add_argument("out", type=Path)
    parser.add_argument("--seed", type=int, default=7)
    options = parser.parse_args()
    options.out.write_bytes(msgspec.json.encode(bulk_refund_plan(options.calls, seed=options.seed)))


if __name__ == "__main__":
    main()
