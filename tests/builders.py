"""Proposal documents for tests, built one way: a valid v1 proposal around the calls a test cares about."""

from __future__ import annotations

from typing import Any


def proposal_document(
    calls: list[dict[str, Any]],
    *,
    proposal_id: str = "test-plan",
    revision: int = 1,
    via: str = "server",
    **fields: Any,
) -> dict[str, Any]:
    """The JSON document of a proposal around `calls` (a call without a seq is numbered from 1);
    `fields` replace any top-level field (`target`, `title`, `dry_run`...)."""
    rows = [dict(call) for call in calls]
    for position, row in enumerate(rows, start=1):
        row.setdefault("seq", position)
    return {
        "format": "reviewer.proposal/v1",
        "proposal_id": proposal_id,
        "revision": revision,
        "title": "a test plan",
        "agent": {"name": "test-agent"},
        "created_at": "2026-10-15T09:00:00Z",
        "target": {"api": "deskline"},
        "dry_run": {"via": via},
        "calls": rows,
        **fields,
    }
