"""Benchmarks of loading, in a real terminal (tmux) and in one run: start to the first readable row
against a bare Textual app and against `jq -C .calls FILE | less -R` on the same file, and peak memory
(VmHWM, from the OS) against file size for ordinary and adversarial shapes.

    python bench/bench_load.py            # everything (about four minutes here)
    python bench/bench_load.py --quick    # one run each, up to 100,000 calls, two shapes

Prints figures; asserts nothing (machines here are shared and noisy). A time is from the key that
starts the command (`send-keys ... Enter` into an idle shell) to the first `capture-pane` showing the
text, polled every 5 ms, so both sides of a ratio pay the same terminal costs.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(HERE))

PYTHON = sys.executable
SIZES = (1_000, 10_000, 100_000, 200_000)
SHELL = "env -i PATH=/usr/bin:/bin TERM=xterm-256color HOME=/tmp PS1='bench$ ' bash --norc --noprofile"
"""A clean shell with a known prompt: what the programs see is the same from run to run."""
TIMEOUT = 60.0
POLL = 0.005
"""Seconds between two looks at the pane."""
FIRST_TITLE = "Refund 2,000 late"
"""The title of the demo's first proposal: the first row a reviewer can read."""


class Terminal:
    """One tmux session of a fixed size, holding an idle shell that commands are typed into."""

    def __init__(self, width: int = 100, height: int = 30) -> None:
        self.name = f"bench-load-{os.getpid()}"
        subprocess.run(
            [
                "tmux",
                "new-session",
                "-d",
                "-s",
                self.name,
                "-x",
                str(width),
                "-y",
                str(height),
                SHELL,
            ],
            check=True,
        )
        try:
            self.wait_for("bench$", timeout=10)
        except TimeoutError:
            self.close()
            raise

    def screen(self) -> str:
        return subprocess.run(
            ["tmux", "capture-pane", "-p", "-t", self.name], capture_output=True, text=True, check=True
        ).stdout

    def type(self, *keys: str) -> float:
        subprocess.run(["tmux", "send-keys", "-t", self.name, *keys], check=True)
        return time.perf_counter()

    def wait_for(self, text: str, timeout: float = TIMEOUT) -> float:
        return self.wait_until(lambda screen: text in screen, f"{text!r}", timeout)

    def wait_until(
        self, shows: Callable[[str], bool], what: str, timeout: float = TIMEOUT, poll: float = POLL
    ) -> float:
        """The moment a look at the pane (every `poll` seconds) first `shows` what is waited for."""
        deadline = time.perf_counter() + timeout
        while time.perf_counter() < deadline:
            if shows(self.screen()):
                return time.perf_counter()
            time.sleep(poll)
        raise TimeoutError(f"{what} never appeared:\n{self.screen()}")

    def run_until(self, command: str, text: str) -> float:
        """Seconds from typing `command` to `text` on screen; the program is then stopped."""
        self.clear()
        started = self.type(command, "Enter")
        seen = self.wait_for(text)
        self.stop()
        return seen - started

    def stop(self) -> None:
        self.clear()

    def clear(self) -> None:
        """Back to an empty prompt: whatever ran is gone and the screen is blank."""
        for _ in range(50):
            self.type("q")  # quits less and the app; at the prompt, C-c drops it
            self.type("C-c")
            self.type("clear", "Enter")
            time.sleep(0.05)
            lines = [line for line in self.screen().splitlines() if line.strip()]
            if len(lines) == 1 and lines[0].rstrip() == "bench$":
                return
        raise RuntimeError(f"the shell did not come back:\n{self.screen()}")

    def close(self) -> None:
        subprocess.run(["tmux", "kill-session", "-t", self.name], check=False)


@contextmanager
def terminal() -> Iterator[Terminal]:
    term = Terminal()
    try:
        yield term
    finally:
        term.close()


def in_root(*command: str) -> str:
    return f"cd {shlex.quote(str(ROOT))} && " + " ".join(shlex.quote(part) for part in command)


def median_ms(times: list[float]) -> str:
    return f"{statistics.median(times) * 1000:7.0f} ms"


def load_average() -> str:
    """The machine's 1-minute load average, printed beside each figure: on a shared machine it says
    how far a time is from a quiet one's."""
    return f"load average {os.getloadavg()[0]:.1f}"


# --- start to the first readable row, against a bare Textual app ------------------------------------


def child_bare() -> None:
    """The peer of the start-up goal: a bare Textual app, one `Static` showing one line of text."""
    from textual.app import App, ComposeResult
    from textual.widgets import Static

    class Bare(App[None]):
        BINDINGS = [("q", "quit", "Quit")]

        def compose(self) -> ComposeResult:
            yield Static("hello from a bare app")

    Bare().run()


def bench_first_row(term: Terminal, runs: int) -> tuple[float, float]:
    """The bare app and the demo, alternating run by run so both meet the same machine load; the
    medians of each, in seconds."""
    bare_command = in_root(PYTHON, str(HERE / "bench_load.py"), "--child", "bare")
    demo_command = in_root(PYTHON, "-m", "reviewer", "demo")
    bare: list[float] = []
    demo: list[float] = []
    for _ in range(runs):
        bare.append(term.run_until(bare_command, "hello from a bare app"))
        demo.append(term.run_until(demo_command, FIRST_TITLE))
    print(f"start to the first readable row, in tmux at 100x30, alternating, median of {runs}")
    print(f"  ({load_average()} at the end)")
    print(f"  bare Textual app, its text           {median_ms(bare)}")
    ratio = statistics.median(demo) / statistics.median(bare)
    print(f"  reviewer demo, first proposal title  {median_ms(demo)}   ratio {ratio:.2f} (goal <= 1.3)")
    return statistics.median(bare), statistics.median(demo)


# --- large plans, against jq | less -------------------------------------------------------------------


def write_plan(folder: Path, calls: int) -> Path:
    import msgspec
    from generate import bulk_refund_plan

    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"plan-{calls}.json"
    path.write_bytes(msgspec.json.encode(bulk_refund_plan(calls, request_body=False)))
    return path


def app_first_rows(term: Terminal, path: Path) -> tuple[float, float]:
    """Seconds to the proposal listed, and to its first plan rows (enter pressed as soon as listed)."""
    term.clear()
    started = term.type(in_root(PYTHON, "-m", "reviewer", "demo", str(path)), "Enter")
    listed = term.wait_for("late deli") - started
    term.type("Enter")
    painted = term.wait_for("create_refund") - started
    term.stop()
    return listed, painted


def bench_against_jq(term: Terminal, folder: Path, sizes: tuple[int, ...], runs: int) -> None:
    print(f"\nstart to first rows on screen, in tmux at 100x30, median of {runs} (files in the page cache)")
    print("  calls      MB   jq -C .calls | less -R   demo: listed   demo: first plan rows   ratio")
    for calls in sizes:
        path = write_plan(folder, calls)
        jq_command = f"jq -C .calls {shlex.quote(str(path))} | less -R"
        jq = [term.run_until(jq_command, '"seq"') for _ in range(runs)]
        app = [app_first_rows(term, path) for _ in range(runs)]
        listed = [first for first, _ in app]
        painted = [second for _, second in app]
        ratio = statistics.median(painted) / statistics.median(jq)
        print(
            f"  {calls:>7,}  {path.stat().st_size / 1e6:5.1f}  {median_ms(jq)}               "
            f"{median_ms(listed)}     {median_ms(painted)}             {ratio:4.2f}"
        )
    print("  (goal at 100,000 calls: first plan rows within 1.5 times jq | less)")


# --- peak memory against file size --------------------------------------------------------------------


def peak(folder: Path) -> tuple[dict[str, object], float]:
    started = time.perf_counter()
    done = subprocess.run(
        [PYTHON, str(HERE / "peak_memory.py"), str(folder), "--open"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(done.stdout.splitlines()[-1]), time.perf_counter() - started


def bench_memory(folder: Path, sizes: tuple[int, ...], shapes: tuple[str, ...]) -> None:
    import shutil

    from generate import adversarial_plan

    print("\npeak memory (VmHWM) of the demo: load everything, open the proposal, press end")
    print("  shape                        file MB  peak MB  (peak - base) / file   outcome        wall")
    base_folder = folder / "base"
    base_folder.mkdir(parents=True)
    shutil.copy(ROOT / "sample_proposals" / "deskline-merge.server.json", base_folder)
    result, wall = peak(base_folder)
    base = int(result["peak_rss_bytes"]) / 1e6  # type: ignore[call-overload]
    print(f"  {'base: a 4-call sample':<28} {0.0:7.1f}  {base:7.0f}  {'':<20}   {'shown':<13} {wall:5.1f} s")
    cases: list[tuple[str, Path]] = []
    for calls in sizes:
        cases.append((f"ordinary, {calls:,} calls", write_plan(folder / f"ordinary-{calls}", calls)))
    for shape in shapes:
        for target in (6_000_000, 60_000_000):  # within the value caps, and as large as allowed
            path = folder / f"{shape.replace(' ', '-')}-{target}" / "plan.json"
            path.parent.mkdir()
            path.write_bytes(adversarial_plan(shape, target))
            cases.append((shape, path))
    for label, path in cases:
        result, wall = peak(path.parent)
        size = path.stat().st_size / 1e6
        used = int(result["peak_rss_bytes"]) / 1e6  # type: ignore[call-overload]
        outcome = "shown" if result["opened"] else "refused"
        print(
            f"  {label:<28} {size:7.1f}  {used:7.0f}  {(used - base) / size:20.2f}   "
            f"{outcome:<13} {wall:5.1f} s"
        )
        path.unlink()
    print("  (goal: at most about 3 times the file plus a fixed base, for every shape within the limits)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--only", choices=("start", "jq", "memory"))
    options = parser.parse_args()
    if options.child == "bare":
        child_bare()
        return
    from generate import ADVERSARIAL_SHAPES

    runs = 1 if options.quick else 7
    sizes = SIZES[:3] if options.quick else SIZES
    shapes = ADVERSARIAL_SHAPES[:2] if options.quick else ADVERSARIAL_SHAPES
    with tempfile.TemporaryDirectory() as scratch, terminal() as term:
        folder = Path(scratch)
        if options.only in (None, "start"):
            bench_first_row(term, runs)
        if options.only in (None, "jq"):
            bench_against_jq(term, folder / "plans", sizes, 3 if not options.quick else 1)
        if options.only in (None, "memory"):
            bench_memory(folder / "memory", sizes, shapes)


if __name__ == "__main__":
    main()
