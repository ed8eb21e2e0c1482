"""Audit sources made to hang a reader or eat its memory: `/dev/zero` behind a symlink, a FIFO nobody
writes, a line nested 2,000 deep, a line of 100 MB. Each read ends with a clear word, its peak memory
stays the honest log's (the benchmark in `bench/` measures each in a fresh process), `reviewer verify`
says what happened without a traceback, and Ctrl-C ends a read of an endless standard input."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.bench_hostile_audit import make_sources
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.audit.gated import gated_run
from tests.forked_commands import reviewer_process
from tests.queue_harness import reviewer_command

ROOT = Path(__file__).resolve().parents[2]
STARTUP_SECONDS = 60
MEMORY_HEADROOM = 48 * 1024 * 1024
"""Over the honest log's peak: the 1 MiB line limit and the 32 MiB one-document limit, plus slack.
A reader that held its input would be 100 MB over."""
ENDINGS = {
    ("/dev/zero", "access-log"): "is a character device, not a regular file",
    ("fifo", "access-log"): "is a FIFO, not a regular file",
    ("2,000 deep", "access-log"): "1 rows read, 1 lines could not be read (nested deeper than 64 levels)",
    ("100 MB line", "access-log"): "1 rows read, 1 lines could not be read (longer than 1,048,576 bytes)",
    ("2,000 deep", "cloudtrail"): "nested deeper than 64 levels",
    ("100 MB line", "cloudtrail"): "1 lines could not be read (larger than 33,554,432 bytes)",
}


def test_each_hostile_source_ends_with_a_clear_word_in_bounded_memory() -> None:
    done = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "bench_hostile_audit.py")],
        capture_output=True,
        text=True,
        timeout=300,
        check=True,
    )
    figures = {(entry["source"], entry["kind"]): entry for entry in map(json.loads, done.stdout.splitlines())}
    baseline = figures[("honest", "access-log")]["peak_rss_bytes"]
    assert set(figures) == {("honest", "access-log"), *ENDINGS}
    for read, word in ENDINGS.items():
        assert word in figures[read]["ended"], figures[read]
        assert figures[read]["peak_rss_bytes"] < baseline + MEMORY_HEADROOM, figures[read]


@pytest.fixture(scope="module")
def verified_run(queue: Queue, _sample_api_server: RunningSampleApi) -> Iterator[str]:
    gated_run(queue, _sample_api_server.base_url, "hostile-sources-0001")
    yield "hostile-sources-0001"


def verify(
    queue: Queue, proposal_id: str, source: str, queue_url: str | None = None, **popen: object
) -> subprocess.Popen[str]:
    """`reviewer verify` started, with a reviewer's token, against `queue` (or another `queue_url`)."""
    environment = {**os.environ, "REVIEWER_TOKEN": queue.reviewer_token}
    return reviewer_process(
        reviewer_command("verify", proposal_id, "--audit", source, "--queue", queue_url or queue.url),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        **popen,  # type: ignore[call-overload]
    )


def test_reviewer_verify_says_what_each_hostile_source_did_without_a_traceback(
    queue: Queue, verified_run: str, tmp_path: Path
) -> None:
    sources = make_sources(tmp_path)
    words = {
        "/dev/zero": "is a character device, not a regular file; give a log file",
        "fifo": "is a FIFO, not a regular file; give a log file",
        "2,000 deep": "note: 1 lines could not be read, first",
        "100 MB line": "note: 1 lines could not be read, first",
    }
    for name, word in words.items():
        process = verify(queue, verified_run, f"access-log:{sources[name]}")
        stdout, stderr = process.communicate(timeout=120)
        assert process.returncode == 1, (name, stdout, stderr)
        assert word in stdout, (name, stdout)
        assert "Traceback" not in stderr, (name, stderr)
        assert stdout.splitlines()[-1].startswith("audit: ")


def test_ctrl_c_ends_a_read_of_an_endless_standard_input(queue: Queue, verified_run: str) -> None:
    """`access-log:-` fed from /dev/zero never ends, and is never held: an interrupt once the reader
    has read 64 MB of it (the command's own start-up reads some 10 MB) ends the command with a
    sentence (exit 130), not a traceback."""
    with open("/dev/zero", "rb") as zeros:
        process = verify(queue, verified_run, "access-log:-", stdin=zeros)
    io = Path(f"/proc/{process.pid}/io")
    deadline = time.monotonic() + STARTUP_SECONDS  # a guard against hanging, not a measurement
    while process.poll() is None and _bytes_read(io) < 64 * 1024 * 1024:
        if time.monotonic() > deadline:
            process.kill()
            pytest.fail(f"reviewer verify read no 64 MB of standard input in {STARTUP_SECONDS} s")
        _wait_a_little(process)  # the queue is asked first; then the read starts
    assert "interrupted while reading access-log:-; nothing is verified" in _interrupted(process)


def test_ctrl_c_while_the_queue_is_asked_ends_the_command_before_any_read(queue: Queue) -> None:
    """A queue that takes the connection and never answers: Ctrl-C then ends `reviewer verify` with
    its sentence (exit 130), and the endless standard input behind it is never read to no end."""
    import socket

    with socket.socket() as silent, open("/dev/zero", "rb") as zeros:
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        url = f"http://127.0.0.1:{silent.getsockname()[1]}"
        process = verify(queue, "any-run", "access-log:-", url, stdin=zeros)
        connection, _ = silent.accept()  # the command is asking the queue now
        with connection:
            said = _interrupted(process)
    assert "interrupted while asking the queue; nothing is verified" in said


def _interrupted(process: subprocess.Popen[str]) -> str:
    """Ctrl-C sent to `process`: what it said on stderr, once it ended with 130 and no traceback."""
    try:
        process.send_signal(signal.SIGINT)
        stdout, stderr = process.communicate(timeout=30)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, (stdout, stderr)
    assert "Traceback" not in stderr
    return stderr


def _bytes_read(io: Path) -> int:
    """What the process has read so far (`rchar`); 0 once it is gone."""
    try:
        fields = dict(line.split(": ") for line in io.read_text().splitlines())
    except FileNotFoundError:
        return 0
    return int(fields["rchar"])


def _wait_a_little(process: subprocess.Popen[str]) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=0.02)
