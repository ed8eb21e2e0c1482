"""`reviewer` commands forked from a Python that has imported the queue service.

A test that starts `reviewer serve` pays about 0.4 CPU-seconds of interpreter start-up and imports
before the service runs a line of its own, and the suite starts it nearly two hundred times, besides
the other commands it runs. Here each pytest worker keeps a Python, started on first use, that has
imported what the service imports: one for each buffering of the standard streams
(`PYTHONUNBUFFERED`: a service's log is written as it comes, a command's output when it ends).
`reviewer_process` stands in for `subprocess.Popen` of `python -m reviewer ...`: its child is forked
from that Python and runs `reviewer.__main__.main` with the test's arguments, directory and streams,
a process of its own that a test pipes, signals, kills and waits for as any other, and that exits
as Python does (threads joined, `atexit` run). `run_reviewer` stands in for `subprocess.run`.
`TESTS_FORK_COMMANDS=0` turns the forks off.

What a fork does not reproduce is the start-up, and the start-up reads the environment: so does a
test, as an attacker would, in `/proc/PID/environ`, which shows the environment a process started
with (a fork's is its forking Python's). A command is therefore forked only where its environment is
the forking Python's, but for pytest's `PYTEST_CURRENT_TEST` (the child is given the test's). A
command given a credential in its environment (every `reviewer run`), a fake clock's `LD_PRELOAD` or
import profiling starts afresh, as do commands under a prefix or another interpreter. A fork's
`/proc/PID/cmdline` is its forking Python's too: the tests that read a command line there read the
gate's and `reviewer run`'s, never forked. The start-up has tests of its own
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
import shutil
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
    "reviewer.service.commands.tokens",
    "reviewer.queue.commands",
    "reviewer.queue.client",
)
"""What `reviewer serve` imports before it listens, and the queue's own commands (`token`, `show`,
`approve`...): each imports the rest itself."""

SWITCH = "TESTS_FORK_COMMANDS"
"""Set to 0 to start every command afresh: to compare the suite's time, or to rule a fork out."""
MESSAGE_LIMIT = 1 << 20
PER_TEST = "PYTEST_CURRENT_TEST"
"""Set by pytest for each test: the child is given the test's."""


class ForkedPopen(subprocess.Popen[Any]):
    """`subprocess.Popen` of `python -m reviewer ...` whose child is forked from a forking Python:
    pipes, text, `communicate`, `wait` and signals are `Popen`'s own; only starting the child and
    learning its exit differ. Made by `reviewer_process`, which decides whether a fork may stand in."""

    _channel: socket.socket

    def __init__(self, command: Sequence[str], *, forker: _Forker, **options: Any) -> None:
        self._forker = forker
        super().__init__(command, **options)

    def _execute_child(  # type: ignore[override]
        self,
        args: Sequence[str],
        executable: Any,
        preexec_fn: Any,
        close_fds: bool,
        pass_fds: Any,
        cwd: Any,
        env: Mapping[str, str] | None,
        startupinfo: Any,
        creationflags: Any,
        shell: bool,
        p2cread: int,
        p2cwrite: int,
        c2pread: int,
        c2pwrite: int,
        errread: int,
        errwrite: int,
        *_rest: Any,
    ) -> None:
        streams = [p2cread, c2pwrite, errwrite]
        passed = [fd if fd != -1 else default for fd, default in zip(streams, (0, 1, 2), strict=True)]
        request = {
            "argv": list(args[3:]),  # after `python -m reviewer`
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "umask": _current_umask(),
            "env": dict(os.environ if env is None else env),
        }
        self._channel = self._forker.fork(request, passed)
        self.pid = int(self._channel.recv(64))
        # What `Popen` does after its own fork: the child's ends of the pipes are the child's.
        for child_end, parent_end in ((p2cread, p2cwrite), (c2pwrite, c2pread), (errwrite, errread)):
            if child_end != -1 and parent_end != -1 and child_end != getattr(self, "_devnull", None):
                os.close(child_end)
        if hasattr(self, "_devnull"):
            os.close(self._devnull)
        self._closed_child_pipe_fds = True

    def _internal_poll(self, *_args: Any, **_kwargs: Any) -> int | None:
        if self.returncode is None:
            self._channel.setblocking(False)
            with contextlib.suppress(BlockingIOError):
                self._read_exit()
        return self.returncode

    def _wait(self, timeout: float | None) -> int:
        if self.returncode is None:
            self._channel.settimeout(timeout)
            try:
                self._read_exit()
            except TimeoutError:
                raise subprocess.TimeoutExpired(self.args, timeout or 0) from None
        assert self.returncode is not None
        return self.returncode

    def _read_exit(self) -> None:
        answer = self._channel.recv(64)
        if not answer:
            raise RuntimeError(f"the forking Python ended before command {self.pid} did")
        self.returncode = int(answer)
        self._channel.close()


class _Forker:
    """This worker's forking Python, started on first use."""

    def __init__(self, unbuffered: str | None) -> None:
        self._unbuffered = unbuffered
        self._lock = threading.Lock()
        self._process: subprocess.Popen[bytes] | None = None
        self._folder = ""
        self.socket_path = ""
        self._environment: dict[str, str] = {}

    def start(self) -> None:
        with self._lock:
            if self._process is not None:
                return
            # 0700, as mkdtemp makes it: no other user may connect and ask for a fork.
            self._folder = tempfile.mkdtemp(prefix="reviewer-forks-")
            self.socket_path = os.path.join(self._folder, "socket")
            self._environment = self._environment_now()
            self._process = subprocess.Popen(
                [sys.executable, __file__, self.socket_path],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=self._environment,
            )
            assert self._process.stdout is not None
            if self._process.stdout.readline() != b"ready\n":
                raise RuntimeError("the forking Python did not start")
            atexit.register(self._stop)

    def forks(self, environment: Mapping[str, str]) -> bool:
        """Whether a command with this environment may be forked: it is the forking Python's. None is
        started for a command it could not fork."""
        if _but_the_test(environment) != _but_the_test(self._environment or self._environment_now()):
            return False
        self.start()
        return _but_the_test(environment) == _but_the_test(self._environment)

    def _environment_now(self) -> dict[str, str]:
        """The environment this Python starts with: this process's, with its own buffering."""
        environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
        if self._unbuffered is not None:
            environment["PYTHONUNBUFFERED"] = self._unbuffered
        return environment

    def fork(self, request: dict[str, Any], fds: list[int]) -> socket.socket:
        channel = socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        channel.connect(self.socket_path)
        socket.send_fds(channel, [json.dumps(request).encode()], fds)
        return channel

    def _stop(self) -> None:
        """Close the forking Python's input, which ends it, and reap it."""
        assert self._process is not None and self._process.stdin is not None
        self._process.stdin.close()
        self._process.wait(10)
        shutil.rmtree(self._folder, ignore_errors=True)


def reviewer_process(
    command: Sequence[str], *, env: Mapping[str, str] | None = None, **options: Any
) -> subprocess.Popen[Any]:
    """`subprocess.Popen(command, env=env, **options)`, forked where `command` is this interpreter's
    `python -m reviewer ...`, `env` allows (`_Forker.forks`) and Linux can report a forked child's exit
    (`pidfd_open`)."""
    environment = os.environ if env is None else env
    if list(command[:3]) == [sys.executable, "-m", "reviewer"] and _forking_on():
        forker = _forker_for(environment)
        if forker.forks(environment):
            return ForkedPopen(command, env=env, forker=forker, **options)
    return subprocess.Popen(command, env=env, **options)


def run_reviewer(
    command: Sequence[str],
    *,
    input: str | bytes | None = None,
    capture_output: bool = False,
    timeout: float | None = None,
    check: bool = False,
    **options: Any,
) -> subprocess.CompletedProcess[Any]:
    """`subprocess.run(command, ...)` through `reviewer_process`."""
    if input is not None:
        options["stdin"] = subprocess.PIPE
    if capture_output:
        options["stdout"] = options["stderr"] = subprocess.PIPE
    with reviewer_process(command, **options) as process:
        try:
            stdout, stderr = process.communicate(input, timeout=timeout)
        except BaseException:
            process.kill()
            raise
        code = process.poll()
        assert code is not None
    if check and code:
        raise subprocess.CalledProcessError(code, process.args, stdout, stderr)
    return subprocess.CompletedProcess(process.args, code, stdout, stderr)


_forkers: dict[str | None, _Forker] = {}
_forkers_lock = threading.Lock()


def forking_socket(environment: Mapping[str, str]) -> str:
    """Where the forking Python for this environment listens (started if it was not)."""
    forker = _forker_for(environment)
    forker.start()
    return forker.socket_path


def _forker_for(environment: Mapping[str, str]) -> _Forker:
    """The forking Python for this buffering of the standard streams (`PYTHONUNBUFFERED`, which the
    interpreter reads as it starts): the service's unbuffered log, a command's buffered output."""
    unbuffered = environment.get("PYTHONUNBUFFERED")
    with _forkers_lock:
        return _forkers.setdefault(unbuffered, _Forker(unbuffered))


def _but_the_test(environment: Mapping[str, str]) -> dict[str, str]:
    return {name: value for name, value in environment.items() if name != PER_TEST}


def _forking_on() -> bool:
    return os.environ.get(SWITCH) != "0" and hasattr(os, "pidfd_open")


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
                    try:
                        pid = _fork(channel)
                    except (OSError, ValueError, KeyError):  # not a request: dropped, the others go on
                        channel.close()
                        continue
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
    try:
        request: dict[str, Any] = json.loads(message)
        if len(fds) != 3 or not {"argv", "cwd", "umask", "env"} <= request.keys():
            raise ValueError("not a request")
    except ValueError:
        for fd in fds:
            os.close(fd)
        raise
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
