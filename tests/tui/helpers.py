"""Helpers for the terminal app's tests: where the samples are, how to wait for the loader, and the
merge plan's run as its runner reports it after reading an audit source."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from reviewer.tui.screens.review import ReviewScreen

SAMPLES = Path(__file__).resolve().parents[2] / "sample_proposals"
LOG = "/var/log/nginx/deskline.json"
AUDITED: dict[str, Any] = {
    "source": f"access-log:{LOG}",
    "complete": True,
    "calls": [
        {"seq": 1, "verdict": "matched", "where": f"{LOG}:812", "matched_by": "request id"},
        {"seq": 2, "verdict": "matched", "where": f"{LOG}:813", "matched_by": "request id"},
        {
            "seq": 3,
            "verdict": "differs",
            "where": f"{LOG}:815",
            "matched_by": "request id",
            "differences": ["status: run 200, log 500"],
        },
        {"seq": 4, "verdict": "missing"},
    ],
    "unplanned": [
        {
            "method": "DELETE",
            "path": "/v1/tickets/t7",
            "status": 204,
            "actor": "ci-bot\x1b[31m\u202e",
            "time": "2026-12-02T01:00:03+00:00",
            "request_id": "other-1",
            "where": f"{LOG}:814",
        },
        {
            "method": "POST",
            "path": "/v1/tickets?notify=all",
            "status": 201,
            "actor": "10.0.0.9",
            "time": "2026-12-02T01:00:04+00:00",
            "where": f"{LOG}:816",
        },
    ],
    "unplanned_count": 2,
}
"""Calls 1-2 matched by request id, 3 differs in status, 4 missing; two writes nobody approved, the
first by an actor whose name holds an escape sequence and a bidi override, raw, as a runner that did
not escape them would send them."""


def audited_merge_run(folder: Path, audit: dict[str, Any] | None = None) -> Path:
    """The merge plan and its run's report in `folder`, the report carrying `audit` (`AUDITED`)
    instead of the demo's own."""
    record = json.loads((SAMPLES / "deskline-merge.server.execution.json").read_text())
    record["audit"] = AUDITED if audit is None else audit
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "deskline-merge.server.json").write_text((SAMPLES / "deskline-merge.server.json").read_text())
    (folder / "deskline-merge.server.execution.json").write_text(json.dumps(record))
    return folder


async def wait_until_loaded(pilot) -> None:  # type: ignore[no-untyped-def]
    """Let the loader (and any pane worker) finish, then let the screen repaint."""
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()
    await pilot.app.workers.wait_for_complete()
    await pilot.pause()


async def open_review(pilot) -> ReviewScreen:  # type: ignore[no-untyped-def]
    """Once the queue is loaded, open the proposal under the cursor and wait for its review."""
    await wait_until_loaded(pilot)
    await pilot.press("enter")
    await wait_until_loaded(pilot)
    screen = pilot.app.screen
    assert isinstance(screen, ReviewScreen)
    return screen
