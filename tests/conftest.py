"""Test-wide settings: snapshots in colour whatever the environment says, a state folder of the
run's own, the files longest first, and what libfaketime leaves behind removed."""

from __future__ import annotations

import gc
import os
import tempfile

import pytest

from tests.faketime_leftovers import remove_faketime_leftovers

os.environ.pop("NO_COLOR", None)
# What the queue and the executors remember (signed logs, trail checkpoints, ledgers) goes to a state
# folder of this run's, never the user's: a memory left by an earlier run must not meet a database
# of this one that happens to have the same name.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="reviewer-test-state-")

# Each worker allocates through tens of thousands of Textual frames, parsed plans and hypothesis
# examples: a collection every 700 allocations, each walking everything pytest and the app imported,
# cost about a tenth of the in-process tests' CPU. What is imported by now is never garbage; the
# rest is collected every 50,000 allocations. (The processes the tests start keep Python's defaults.)
gc.freeze()
gc.set_threshold(50_000, 50, 100)


def _settle_textual_apps_sooner() -> None:
    """A pilot's `press` and `pause` wait until the app's process looks idle: until a 20 ms sleep
    passes with under 1 ms of CPU, a window sized to outlast the wait for a screen's next frame at 60
    a second. The app's 338 tests spent most of their time in those sleeps (two of the every-key
    tests, run alone on a quiet machine: 8.7 of their 9.2 s). Here a frame is due 2 ms after a
    change, and the window is 10 ms with under 0.5 ms of CPU: the same share of idleness, over a
    window that still outlasts the frame several times. The 338 took 103 s on four workers before,
    63 s after. (At 5 ms, 49 s, but a loaded machine that held the process off its core for a whole
    window passed for idle: a resize was not yet laid out in 4 runs of 12.) What a test needs besides
    the screen (a worker's result, a queue's answer) it waits for by name, as the live tests'
    `open_proposal` waits for the digest."""
    import textual._wait
    import textual.screen

    for module, name in (
        (textual._wait, "SLEEP_GRANULARITY"),
        (textual._wait, "SLEEP_IDLE"),
        (textual.screen, "UPDATE_PERIOD"),
    ):
        if not hasattr(module, name):
            raise RuntimeError(
                f"{module.__name__}.{name} is gone: the app's tests would wait as long as before"
            )
    textual.screen.UPDATE_PERIOD = 0.002
    textual._wait.SLEEP_GRANULARITY = 0.01
    textual._wait.SLEEP_IDLE = 0.0005


_settle_textual_apps_sooner()


@pytest.fixture
def anyio_backend() -> str:
    """Async tests (marked `anyio`) run on asyncio, which Textual and the app use."""
    return "asyncio"


@pytest.fixture(autouse=True)
def toasts_stay_for_snapshots(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """A picture is taken once the keys have been answered, however long that took: a toast that
    goes after Textual's 5 s must not be in one picture and gone from the next because the machine
    was slower (a loaded machine took longer than that to open a plan and press d)."""
    if "snap_compare" in request.fixturenames:
        from textual.app import App

        monkeypatch.setattr(App, "NOTIFICATION_TIMEOUT", 3600)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """`-n auto` (the suite's default): five workers for two cores. A worker waits on the subprocesses
    it starts and on Textual's frames a good part of the time: on 2 cores, two workers kept 1.24 cores
    busy (438 s), three 1.82 (381 s). Since the app's tests settle sooner, four left 15% of the cores
    idle: in two pairs of runs back to back (in either order), five took 316 s and 323 s where four
    took 330 s and 339 s, and spent 2-3% less CPU. Six took longer than four (367 s against 350 s)."""
    return max(2, (os.cpu_count() or 1) * 5 // 2)


LONGEST_FIRST = (
    "tests/system/test_production_setup.py",
    "tests/system/test_production_replicas.py",
    "tests/system/test_documented_setups.py",
    "tests/mcp_gate/test_server.py",
    "tests/service/routes/test_fuzz.py",
    "tests/reading/test_drift.py",
    "tests/tui/test_every_key.py",
    "tests/tui/test_contrast.py",
    "tests/run/test_aws_protocols.py",
    "tests/service/store/test_database_faults.py",
    "tests/service/commands/test_command_line.py",
    "tests/tui/test_snapshots.py",
    "tests/run/test_run.py",
    "tests/tui/test_loading.py",
    "tests/service/process/test_replicas.py",
    "tests/service/web/test_review_page.py",
    "tests/service/routes/test_trail.py",
    "tests/run/test_signers.py",
    "tests/service/notifications/test_serve_notify.py",
    "tests/service/process/test_crash.py",
    "tests/service/routes/test_edge_timeouts.py",
    "tests/service/routes/test_rules.py",
    "tests/tui/test_app.py",
    "tests/service/routes/test_edge_memory.py",
    "tests/service/store/test_migrations.py",
    "tests/mcp_gate/test_recordings.py",
    "tests/tui/live/test_live.py",
)
"""The files that take longest, longest first: each worker takes whole files in this order, then
the rest in collection order, so no worker is left alone with a long file at the end (by the number
of tests, xdist's default, the 45 s fuzzing and the 20 s crash test, a test or two each, went last).
Wall seconds of a whole run, from 137 (the production set-up on SQLite, once among the last files)
down to 27; the AWS protocols, the database faults (which wait out the queue's 8 s watchdog), the
trail, the signers, the migrations and the recordings, 55 s down to 26 s each when run alone on a
loaded machine, stand where those figures put them."""


def pytest_collection_finish(session: pytest.Session) -> None:
    """What collection made (the test modules, their items and strategies) lives to the end as well:
    no collection walks it again, nor the five pytest makes at the end of a worker's session."""
    gc.freeze()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    missing = [path for path in LONGEST_FIRST if not (config.rootpath / path).is_file()]
    if missing:
        raise pytest.UsageError(f"LONGEST_FIRST in tests/conftest.py names files that are gone: {missing}")
    rank = {path: position for position, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))


def pytest_sessionstart(session: pytest.Session) -> None:
    remove_faketime_leftovers()


@pytest.hookimpl(trylast=True)  # after the test's fixtures have stopped what they started
def pytest_runtest_teardown(item: pytest.Item) -> None:
    remove_faketime_leftovers()
