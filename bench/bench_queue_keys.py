"""The queue screen at scale: a folder of 300 and 3,000 proposals listed (from the app's start to its
screen idle, every file checked and analysed), then `s` (sort by danger and back), `/` and a filter's
keys, `escape` (the whole list again), `pgdn`, and a word typed without a pause, each from the key
(the word: its first) to the screen idle again with the filter applied, in one process (Textual's
pilot at 80x24). `pgdn` only moves the cursor: it is
what any key costs here, the floor the others are read against.

    python bench/bench_queue_keys.py                 # 300 and 3,000 proposals, 5 runs each
    python bench/bench_queue_keys.py --rows 3000 --runs 3

Prints medians in milliseconds; asserts nothing (machines here are shared and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

WORD = "a word's 5 keys, to its rows"
"""Typed without a pause: every key filled the table once before the filter waited for the keys to
stop; now they fill it once, `FILTER_PAUSE` after the last."""

KEYS = (
    ("pgdn", ("pagedown",)),
    ("s (by danger)", ("s",)),
    ("s (newest)", ("s",)),
    ("/", ("slash",)),
    ("a filter's 1st key", ("1",)),
    ("its 2nd key", ("2",)),
    ("escape", ("escape",)),
    ("/ again", ("slash",)),
    (WORD, tuple("r 007")),
    ("escape again", ("escape",)),
)


LISTED = "listed (to idle)"


def write_queue(folder: Path, count: int) -> Path:
    """`count` one-call proposals: every seventh deletes, every third runs in production, every
    fifth was dry-run against a fake, so the danger column holds several grades."""
    for number in range(count):
        deletes = number % 7 == 0
        call = {
            "seq": 1,
            "tool": "delete_ticket" if deletes else "update_ticket",
            "effect": "delete" if deletes else "update",
            "args": {"id": f"t{number}"},
            "outcome": {"status": "ok"},
        }
        document = {
            "format": "reviewer.proposal/v1",
            "proposal_id": f"plan-{number:05d}",
            "revision": 1,
            "title": f"Plan number {number:05d}",
            "agent": {"name": "bench-agent"},
            "created_at": "2026-10-15T09:00:00Z",
            "target": {
                "api": "deskline",
                "base_url": "https://deskline.example",
                "environment": "production" if number % 3 == 0 else "staging",
            },
            "dry_run": {"via": "fake" if number % 5 == 0 else "server"},
            "calls": [call],
        }
        (folder / f"plan-{number:05d}.json").write_text(json.dumps(document))
    return folder


async def one_run(folder: Path, count: int) -> dict[str, float]:
    from textual.widgets import DataTable, Input

    from reviewer.tui.app import ReviewerApp
    from tests.tui.helpers import wait_until_loaded

    app = ReviewerApp(folder)
    timings: dict[str, float] = {}
    started = time.perf_counter()
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_until_loaded(pilot)
        timings[LISTED] = (time.perf_counter() - started) * 1000
        table = app.queue_screen.query_one("#queue", DataTable)
        if table.row_count != count:
            raise SystemExit(f"{table.row_count} rows listed of {count}")
        screen = app.queue_screen
        field = screen.query_one("#queue-filter", Input)
        for label, keys in KEYS:
            started = time.perf_counter()
            await pilot.press(*keys)
            while screen.filter_words != field.value.strip():  # the filter waits for the keys to stop
                await pilot.pause(0.005)
            await wait_until_loaded(pilot)
            timings[label] = (time.perf_counter() - started) * 1000
    return timings


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, nargs="*", default=[300, 3_000])
    parser.add_argument("--runs", type=int, default=5)
    arguments = parser.parse_args()
    for count in arguments.rows:
        folder = write_queue(Path(tempfile.mkdtemp()), count)
        runs = [asyncio.run(one_run(folder, count)) for _ in range(arguments.runs)]
        for label in (LISTED, *(label for label, _keys in KEYS)):
            median = statistics.median(run[label] for run in runs)
            print(f"{count:>6,} proposals  {label:<30} {median:8.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
