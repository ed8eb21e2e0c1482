"""The app's first full queue from outside the process: `reviewer` against a live queue of 0, 300 and
3,000 pending, from the Enter that starts it to the first `capture-pane` showing its first page full.

Run: `python bench/bench_app_queue.py [--rounds 5]`. It starts three real `reviewer serve` on SQLite
files (as `bench_shell.py` does, the proposals written through the store: three environments, a few
calls each), one per size, and runs the app in tmux at 80x24 against each in turn, the three
alternating round by round so they meet the same load. The page is full when the status line says
the queue answered, the top line counts every proposal the app lists (the newest 500 at most), and
every line of the table shows a row (none, for the empty queue). Beside it, the CPU seconds the app
spent from its start to its exit (GNU time; `q` is pressed once the page is full). Prints the
medians, their ratios to the empty queue and the load average; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import re
import statistics
import sys
import tempfile
from contextlib import ExitStack
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
sys.path.insert(0, str(HERE))

from bench_load import PYTHON, Terminal, in_root, load_average  # noqa: E402
from bench_shell import Queue, environ_of, served  # noqa: E402

from reviewer.service.routes.proposals import DEFAULT_LIMIT  # noqa: E402
from reviewer.tui.model.queue_source import MAX_LIST_PAGES  # noqa: E402

SIZES = (0, 300, 3_000)
TIME = "/usr/bin/time"
"""GNU time: the app's CPU seconds, written to a file when it exits."""
LOOK = 0.02
"""Seconds between two looks at the pane."""
TABLE_BOTTOM = "╰"


def listed_of(pending: int) -> int:
    """How many proposals the app lists of `pending`: a poll reads at most `MAX_LIST_PAGES` pages."""
    return min(pending, MAX_LIST_PAGES * DEFAULT_LIMIT)


def full_page(screen: str, listed: int) -> bool:
    """Whether the pane shows the queue's first page whole: the queue answered, `listed` proposals
    counted, and a row on every line of the table (on none when nothing is listed)."""
    if "queue answered" not in screen or not re.search(rf"(^|\s){listed} proposals?\b", screen):
        return False
    lines = screen.splitlines()
    header = next((n for n, line in enumerate(lines) if "danger" in line and "proposal" in line), None)
    bottom = next((n for n, line in enumerate(lines) if line.lstrip().startswith(TABLE_BOTTOM)), None)
    if header is None or bottom is None:
        return False
    rows = [line.strip("│ ") for line in lines[header + 1 : bottom]]
    shown = sum(bool(row) for row in rows)
    return shown == min(listed, len(rows))


def environment_file(queue: Queue) -> Path:
    """The queue's URL and the reviewer's token in a file only its owner reads, sourced by the shell
    the app starts from (the token is never typed where the pane shows it)."""
    path = queue.db.parent / "queue.env"
    fields = {key: environ_of(queue)[key] for key in ("REVIEWER_QUEUE", "REVIEWER_TOKEN", "XDG_CONFIG_HOME")}
    path.touch(mode=0o600)
    path.write_text("".join(f"export {key}='{value}'\n" for key, value in fields.items()))
    return path


def first_full_page(term: Terminal, environment: Path, listed: int) -> tuple[float, float]:
    """Seconds from the Enter that starts the app to its first page full on screen, and the CPU
    seconds the app spent from its start to its exit (`q` as soon as the page was full: the load of
    a shared machine moves this one less)."""
    term.clear()
    cpu_file = environment.with_name("cpu")
    cpu_file.unlink(missing_ok=True)
    command = in_root(TIME, "-f", "%U %S", "-o", str(cpu_file), PYTHON, "-m", "reviewer")
    started = term.type(f". {environment} && {command}", "Enter")
    seen = term.wait_until(lambda screen: full_page(screen, listed), f"{listed} proposals", poll=LOOK)
    term.stop()
    user, system = cpu_file.read_text().split()[-2:]
    return seen - started, float(user) + float(system)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5)
    options = parser.parse_args()
    print(f"load average before: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory() as scratch, ExitStack() as stack:
        environments = {}
        for pending in SIZES:
            folder = Path(scratch) / f"queue-{pending}"
            folder.mkdir()
            queue = stack.enter_context(served(folder))
            queue.submit(pending)
            environments[pending] = environment_file(queue)
        term = Terminal(80, 24)
        stack.callback(term.close)
        times: dict[int, list[float]] = {pending: [] for pending in SIZES}
        cpu: dict[int, list[float]] = {pending: [] for pending in SIZES}
        for _round in range(options.rounds):
            for pending in SIZES:
                wall, spent = first_full_page(term, environments[pending], listed_of(pending))
                times[pending].append(wall)
                cpu[pending].append(spent)
        empty, empty_cpu = statistics.median(times[0]), statistics.median(cpu[0])
        print(f"start to the first full page, tmux at 80x24, sizes alternating, median of {options.rounds}")
        print(
            "| pending | listed | first full page | ratio to empty (goal ≤ 1.5) | the app's CPU | CPU ratio |"
        )
        print("| --- | --- | --- | --- | --- | --- |")
        for pending in SIZES:
            figure, spent = statistics.median(times[pending]), statistics.median(cpu[pending])
            print(
                f"| {pending:,} | {listed_of(pending):,} | {figure * 1000:,.0f} ms | {figure / empty:.2f} | "
                f"{spent * 1000:,.0f} ms | {spent / empty_cpu:.2f} |"
            )
        for pending in SIZES:
            rounds = ", ".join(f"{seconds * 1000:,.0f}" for seconds in times[pending])
            print(f"{pending:,} pending, each round: {rounds} ms")
    print(f"{load_average()} after")


if __name__ == "__main__":
    main()
