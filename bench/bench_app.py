"""Benchmarks of the terminal app on a 100,000-call plan, from outside the process, in a real
terminal (tmux at 100x30) while the background checks still run: enter to the first plan rows,
pressed as soon as the proposal is listed; `d` to the drift view's differences, pressed 0.5 s after
opening the newer of two revisions. Each next to a bare Textual app's start to its text, in the same
run; then, in one process, scrolling keys and peak memory.

    python bench/bench_app.py                   # with a DataTable peer for the large plan
    python bench/bench_app.py --quick           # one run each, no DataTable peer
    python bench/bench_app.py --only terminal   # only the figures from outside, 7 runs each

Start-up and loading (against a bare Textual app and against `jq | less`) are in `bench_load.py`.

Prints figures; asserts nothing (machines here are shared and noisy).
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_load import PYTHON, Terminal, in_root, load_average, median_ms, terminal  # noqa: E402


def peak_mb() -> float:
    """This process's peak resident memory. Not `ru_maxrss`: on Linux that survives exec, so a child
    would report the parent's peak (here, the parent that generated the plans)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# --- the large plan: in one process, peak memory included ---


def write_large_plans(calls: int) -> tuple[Path, Path]:
    """A folder with one large plan, and one with it and its re-plan; generated here, in the parent,
    so their making does not count in the app's memory."""
    import msgspec
    from generate import bulk_refund_plan, replan

    single, revised = Path(tempfile.mkdtemp()), Path(tempfile.mkdtemp())
    first = msgspec.json.encode(bulk_refund_plan(calls))
    (single / "large.json").write_bytes(first)
    (revised / "large.rev1.json").write_bytes(first)
    (revised / "large.rev2.json").write_bytes(msgspec.json.encode(replan(msgspec.json.decode(first))))
    return single, revised


def child_large(folder: Path, keys: tuple[tuple[str, str], ...]) -> None:
    """Open the folder's (last) proposal once it is listed and analysed; time each key to the first
    row painted; print the whole process's peak memory."""
    from reviewer.tui.app import ReviewerApp
    from reviewer.tui.widgets.plan_view import PlanView

    painted: list[float] = []
    original = PlanView.render_line

    def render_line(self: PlanView, y: int):  # type: ignore[no-untyped-def]
        strip = original(self, y)
        if y == 1:
            painted.append(time.perf_counter())
        return strip

    PlanView.render_line = render_line  # type: ignore[method-assign]
    revisions = len(list(folder.glob("*.json")))

    async def run() -> None:
        app = ReviewerApp(folder)
        loaded_at = time.perf_counter()
        async with app.run_test(size=(100, 30)) as pilot:
            while not any(len(item.revisions) == revisions for item in app.queue_screen.items.values()):
                await asyncio.sleep(0.01)
            print(f"  listed (the scan)                   {time.perf_counter() - loaded_at:6.2f} s")
            if revisions == 1:  # opened at once, while the checks and the analysis still run
                painted.clear()
                started = time.perf_counter()
                await pilot.press("enter")
                while not painted:
                    await asyncio.sleep(0.001)
                print(f"  enter while still checking          {(painted[0] - started) * 1000:7.1f} ms")
                await pilot.press("escape")
            while not any(len(item.analysed) == revisions for item in app.queue_screen.items.values()):
                await asyncio.sleep(0.01)
            await app.workers.wait_for_complete()
            print(f"  load, check and analyse ({revisions} rev)  {time.perf_counter() - loaded_at:6.2f} s")
            for key, label in keys:
                painted.clear()
                started = time.perf_counter()
                await pilot.press(key)
                while not painted:
                    await asyncio.sleep(0.001)
                print(f"  {label:<34}{(painted[0] - started) * 1000:7.1f} ms")
                await pilot.pause()

    asyncio.run(run())
    print(f"  peak memory of the whole process    {peak_mb():6.0f} MB")


SCROLL_KEYS = (
    ("enter", "open (first rows painted)"),
    ("end", "end"),
    ("pageup", "page up"),
    ("home", "home"),
    ("down", "down"),
)
DRIFT_KEYS = (("enter", "open rev 2"), ("d", "drift against rev 1 (first rows)"))


def child_datatable(calls: int) -> None:
    from generate import bulk_refund_plan
    from textual.app import App, ComposeResult
    from textual.widgets import DataTable

    rows = [(c["seq"], c["tool"], c["effect"], str(c["args"])[:40]) for c in bulk_refund_plan(calls)["calls"]]

    class Peer(App[None]):
        def compose(self) -> ComposeResult:
            yield DataTable()

        def on_mount(self) -> None:
            self.started = time.perf_counter()
            table = self.query_one(DataTable)
            table.add_columns("#", "tool", "effect", "args")
            table.add_rows(rows)
            self.call_after_refresh(self.done)

        def done(self) -> None:
            print(f"  peer: a DataTable given every row   {time.perf_counter() - self.started:6.2f} s")
            self.exit()

    Peer().run(headless=True, size=(100, 30))
    print(f"  peer peak memory                    {peak_mb():6.0f} MB")


# --- from outside the process: keys to what the reviewer sees, while the checks run -----------------

LISTED = "late deli"
"""The large plan's title in the queue: it is listed."""
PLAN_ROW = "create_refund"
"""A plan row: the review screen shows the calls."""
BOTH_LISTED = " 2/2 "
"""The queue's revision column once both revisions are listed: enter opens the newer."""
DRIFT_ROWS = "~ changed · - removed"
"""The drift view's plan of differences, mounted once the comparison is shown."""


def open_while_checking(term: Terminal, folder: Path) -> float:
    """Seconds from enter, pressed as soon as the plan is listed, to its first rows on screen."""
    term.clear()
    term.type(in_root(PYTHON, "-m", "reviewer", "demo", str(folder)), "Enter")
    term.wait_for(LISTED)
    pressed = term.type("Enter")
    painted = term.wait_for(PLAN_ROW)
    term.stop()
    return painted - pressed


def drift_while_completing(term: Terminal, folder: Path) -> float:
    """Seconds from `d`, pressed 0.5 s after opening the newer revision, to the differences shown."""
    term.clear()
    term.type(in_root(PYTHON, "-m", "reviewer", "demo", str(folder)), "Enter")
    term.wait_for(BOTH_LISTED)
    term.type("Enter")
    term.wait_for(PLAN_ROW)
    time.sleep(0.5)
    pressed = term.type("d")
    shown = term.wait_for(DRIFT_ROWS)
    term.stop()
    return shown - pressed


def bench_in_terminal(single: Path, revised: Path, runs: int) -> None:
    bare_command = in_root(PYTHON, str(HERE / "bench_load.py"), "--child", "bare")
    bare: list[float] = []
    opened: list[float] = []
    drift: list[float] = []
    with terminal() as term:
        for _ in range(runs):  # alternating, so all three meet the same machine load
            bare.append(term.run_until(bare_command, "hello from a bare app"))
            opened.append(open_while_checking(term, single))
            drift.append(drift_while_completing(term, revised))
    print(f"in tmux at 100x30, from outside the process, median of {runs}, the checks still running")
    print(f"  ({load_average()} at the end)")
    print(f"  bare Textual app, start to its text  {median_ms(bare)}")
    for label, times, goal in (
        ("enter as soon as listed: first rows", opened, "goal <= 100 ms"),
        ("d 0.5 s after opening rev 2: drift", drift, "goal <= 200 ms"),
    ):
        ratio = statistics.median(times) / statistics.median(bare)
        print(f"  {label:<37}{median_ms(times)}   {ratio:.2f} of the bare start ({goal})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--calls", type=int, default=100_000)
    parser.add_argument("--folder", type=Path, help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("terminal",))
    options = parser.parse_args()
    children = {
        "large": lambda: child_large(options.folder, SCROLL_KEYS),
        "drift": lambda: child_large(options.folder, DRIFT_KEYS),
        "datatable": lambda: child_datatable(options.calls),
    }
    if options.child:
        children[options.child]()
        return
    single, revised = write_large_plans(options.calls)
    size = (single / "large.json").stat().st_size / 1e6
    print(f"a plan of {options.calls:,} calls, {size:.0f} MB of JSON, and a re-plan of it")
    if options.only == "terminal":
        bench_in_terminal(single, revised, 7)
        return
    bench_in_terminal(single, revised, 1 if options.quick else 5)
    print(f"\nin one process: a plan of {options.calls:,} calls (keys timed to the first row painted)")
    subprocess.run([sys.executable, __file__, "--child", "large", "--folder", str(single)], check=True)
    print("  (goal: first rows within 100 ms of the key, peak under 150 MB)")
    print(f"\ntwo revisions of {options.calls:,} calls (one inserted, one changed, one removed)")
    subprocess.run([sys.executable, __file__, "--child", "drift", "--folder", str(revised)], check=True)
    print("  (goal: drift shown within 200 ms of the key)")
    if not options.quick:
        subprocess.run(
            [sys.executable, __file__, "--child", "datatable", "--calls", str(options.calls)], check=True
        )


if __name__ == "__main__":
    main()
