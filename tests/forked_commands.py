"""`reviewer` commands forked from a Python that has imported the queue service already.

A test that starts `reviewer serve` pays about 0.4 CPU-seconds of interpreter start-up and imports
before the service runs a line of its own, and the suite starts it nearly two hundred times: a
quarter of its CPU. Here each pytest worker keeps one Python, started on first use, that has imported
what the service imports. A command is a child forked from it that runs `reviewer.__main__.main`
with the test's arguments, working directory, environment and standard streams: a process of its
own, which a test signals, kills and waits for as it would a `subprocess.Popen`, and which exits
as Python does (threads joined, `atexit` run).

What a fork does not reproduce is the start-up itself. `fork_or_none` forks only a command whose
environment is the one this Python started with (but for pytest's `PYTEST_CURRENT_TEST`, which the
child is given anew), so nothing read from the environment at import can differ. Anything else (a
fake clock's `LD_PRELOAD`, import profiling, a prefix or another interpreter) is started by
`subprocess.Popen` as before, and the start-up has tests of its own
(`tests/service/process/test_imports_at_start.py`, `tests/test_packaging.py`).

Run as a script, this module is that Python: it listens on a Unix socket whose path it is given, and
for each request (the arguments, the directory, the environment, and the three streams as passed
descriptors) forks, answers the child's pid, and later its exit code (`subprocess`'s: minus the
signal that ended it). It ends, killing what it forked, when the worker that started it is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import io
import json
import os
import selectors
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

PRELOADED = (
    "reviewer.service.commands.serve",
    "reviewer.service.app",
    "reviewer.service.store.sqlite",
    "uvicorn.protocols.http.h11_impl",
    "uvicorn.lifespan.on",
    "uvicorn.loops.asyncio",
)
"""What `reviewer serve` imports before it listens (`serve` imports the rest when it runs)."""

MESSAGE_LIMIT = 1 << 20
PER_TEST = "PYTEST_CURRENT_TEST"
"""Set by pytest for each test: compared without it, and given to the child as the test's."""


class ForkedProcess:
    """A forked command, with as much of `subprocess.Popen` as the tests use."""

    def __init__(self, args: Sequence[str], pid: int, channel: socket.socket) -> None:
        self.args = list(args)
        self.pid = pid
        self.returncode: int | None = None
        self._channel = channel

    def poll(self) -> int | None:
        if self.returncode is None:
            self._channel.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                self._read_exit()
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if self.returncode is None:
            self._channel.settimeout(timeout)
            try:
                self._read_exit()
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        assert self.returncode is not None
        return self.returncode

    def send_signal(self, sig: int) -> None:
        if self.poll() is None:
            os.kill(self.pid, sig)

    def terminate(self) -> None:
        self.send_signal(signal.SIGTERM)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)

    def _read_exit(self) -> None:
        answer = self._channel.recv(64)
        if not answer:
            raise RuntimeError(f"the forking Python ended before command {self.pid} did")
        self.returncode = int(answer)
        self._channel.close()


class _Forker:
    """This worker's forking Python, started on first use."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._socket_path = ""
        self.environment: dict[str, str] = {}

    def start(self, environment: Mapping[str, str]) -> None:
        with self._lock:
            if self._process is not None:
                return
            folder = tempfile.mkdtemp(prefix="reviewer-forks-")
            self._socket_path = os.path.join(folder, "socket")
            self.environment = dict(environment)
            self._process = subprocess.Popen(
                [sys.executable, __file__, self._socket_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=self.environment,
            )
            assert self._process.stdout is not None
            if self._process.stdout.readline() != b"ready\n":
                raise RuntimeError("the forking Python did not start")
            atexit.register(self._stop)

    def _stop(self) -> None:
        """Close the forking Python's input, which ends it, and reap it."""
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(10)

    def forks(self, environment: Mapping[str, str]) -> bool:
        """Whether a command with this environment may be forked: it is the forking Python's."""
        return _without_test(environment) == _without_test(self.environment)

    def fork(
        self, args: Sequence[str], stdout: int, stderr: int, environment: Mapping[str, str]
    ) -> ForkedProcess:
        request = {
            "argv": list(args),
            "cwd": os.getcwd(),
            "umask": _current_umask(),
            "env": dict(environment),
        }
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        channel.connect(self._socket_path)
        socket.send_fds(channel, [json.dumps(request).encode()], [0, stdout, stderr])
        pid = int(channel.recv(64))
        return ForkedProcess(args, pid, channel)


_forker = _Forker()


def fork_or_none(
    args: Sequence[str],
    *,
    stdout: io.BufferedWriter,
    stderr: io.BufferedWriter,
    environment: Mapping[str, str],
) -> ForkedProcess | None:
    """`reviewer *args` forked with these streams, or None where a fork could differ from a real start:
    an environment other than the one the forking Python started with (the first call's)."""
    if not hasattr(os, "pidfd_open"):
        return None
    _forker.start(environment)
    if not _forker.forks(environment):
        return None
    return _forker.fork(args, stdout.fileno(), stderr.fileno(), environment)


def _without_test(environment: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environment.items() if name != PER_TEST}


def _current_umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


# The forking Python's side.


def _serve(socket_path: str) -> None:
    sys.path[0] = os.getcwd()  # as `python -m`, not the folder of this script
    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
        from reviewer.__main__ import main

        main(["--version"])  # what every command does before it imports its own modules
    for module in PRELOADED:
        __import__(module)
    import gc

    gc.collect()
    gc.freeze()  # what was imported is shared with each child, not scanned or copied by its collections

    listener = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    listener.bind(socket_path)
    listener.listen(64)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ, None)
    selector.register(sys.stdin.buffer, selectors.EVENT_READ, None)
    children: dict[int, tuple[int, socket.socket]] = {}
    sys.stdout.write("ready\n")
    sys.stdout.flush()
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj is sys.stdin.buffer:
                    if not sys.stdin.buffer.read1(1):
                        return  # the worker is gone
                elif key.fileobj is listener:
                    channel, _ = listener.accept()
                    pid = _fork(channel)
                    pidfd = os.pidfd_open(pid)
                    children[pidfd] = (pid, channel)
                    selector.register(pidfd, selectors.EVENT_READ, None)
                    channel.sendall(str(pid).encode())
                else:
                    pidfd = key.fd
                    pid, channel = children.pop(pidfd)
                    selector.unregister(pidfd)
                    os.close(pidfd)
                    _, status = os.waitpid(pid, 0)
                    with contextlib.suppress(OSError):
                        channel.sendall(str(os.waitstatus_to_exitcode(status)).encode())
                    channel.close()
    finally:
        for pid, _ in children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _fork(channel: socket.socket) -> int:
    message, fds, _, _ = socket.recv_fds(channel, MESSAGE_LIMIT, 3)
    request: dict[str, Any] = json.loads(message)
    pid = os.fork()
    if pid == 0:
        _run_child(request, fds)
    for fd in fds:
        os.close(fd)
    return pid


def _run_child(request: dict[str, Any], fds: list[int]) -> None:
    """In the child: take the streams, the directory and the arguments, run the command, and exit as
    the interpreter would after `sys.exit(main())`. Never returns."""
    code = 1
    try:
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        for name in os.listdir("/proc/self/fd"):
            if int(name) > 2:
                with contextlib.suppress(OSError):
                    os.close(int(name))
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        sys.path[0] = request["cwd"]
        sys.argv = [str(Path(sys.modules["reviewer.__main__"].__file__ or "")), *request["argv"]]
        from reviewer.__main__ import main

        code = _exit_code(lambda: main(request["argv"]))
    except BaseException:  # the child reports every error as Python would, then exits
        import traceback

        traceback.print_exc()
    finally:
        try:
            code = _exit_code(_finish, code)
        finally:
            os._exit(code)


def _exit_code(run: Any, *args: Any) -> int:
    """What Python exits with after `sys.exit(run(*args))`."""
    try:
        result = run(*args)
    except SystemExit as exit:
        result = exit.code
    if result is None:
        return 0
    if isinstance(result, int):
        return result
    print(result, file=sys.stderr)
    return 1


def _finish(code: int) -> int:
    """Python's own ending: wait for non-daemon threads, run `atexit`, flush the streams."""
    threading._shutdown()  # type: ignore[attr-defined]
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
    return code


if __name__ == "__main__":
    _serve(sys.argv[1])
