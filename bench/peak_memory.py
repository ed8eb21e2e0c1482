"""Run `reviewer demo` on a folder headless until everything is loaded (with `--open`, open the first
proposal and press end); print what it listed and the process's peak resident memory as the OS
counts it (VmHWM), as JSON. `bench_load.py` and the adversarial-file tests run it in a fresh process,
so nothing else counts.

    python bench/peak_memory.py FOLDER [--open]
"""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def peak_rss_bytes() -> int:
    """VmHWM: the high-water mark of this process's resident memory, from /proc."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise RuntimeError("no VmHWM in /proc/self/status")


async def load(folder: Path, open_first: bool) -> dict[str, object]:
    from reviewer.tui.app import ReviewerApp
    from reviewer.tui.screens.review import ReviewScreen

    app = ReviewerApp(folder)
    async with app.run_test(size=(100, 30)) as pilot:
        await app.workers.wait_for_complete()
        await pilot.pause()
        opened = False
        if open_first and app.items:
            await pilot.press("enter")
            await app.workers.wait_for_complete()
            await pilot.press("end")
            await pilot.pause()
            opened = isinstance(app.screen, ReviewScreen)
        return {
            "listed": sorted(app.items),
            "analysed": sorted(item.proposal_id for item in app.items.values() if item.figures()),
            "broken": {broken.name: broken.problem for broken in app.queue_screen.broken},
            "opened": opened,
        }


def main() -> None:
    folder = Path(sys.argv[1])
    result = asyncio.run(load(folder, "--open" in sys.argv))
    result["peak_rss_bytes"] = peak_rss_bytes()
    print(json.dumps(result))


if __name__ == "__main__":
    main()
