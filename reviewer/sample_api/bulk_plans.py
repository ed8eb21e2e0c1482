"""Large sample proposals of a bulk refund job's shape, and their next revision, at any size.

The benchmarks time them and the tests that need many calls (drift over thousands of rows) use
them, so both read the same plans.
"""

from __future__ import annotations

import copy
import random
from typing import Any


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
