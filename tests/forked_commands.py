"""`reviewer` commands forked from a Python that has imported what they import.

A test that starts `reviewer serve` or `reviewer run` pays 0.4 to 0.5 CPU-seconds of interpreter
start-up and imports before the command runs a line of its own, and the suite runs such commands
several hundred times. Here each pytest worker keeps a Python, started on first use, that has
imported what the service, `reviewer run`, the sample API and the queue's commands import: one for
each buffering of the standard streams (`PYTHONUNBUFFERED`: a service's log is written as it comes, a
command's output when it ends). `reviewer_process` stands in for `subprocess.Popen` of
`python -m reviewer ...`: its child is forked from that Python and runs `reviewer.__main__.main` with
the test's arguments, directory, environment and streams, a process of its own that a test pipes,
signals, kills and waits for as any other, and that exits as Python does (threads joined, `atexit`
run). `run_reviewer` stands in for `subprocess.run`. `TESTS_FORK_COMMANDS=0` turns the forks off.

What a fork does not reproduce is the start-up, and the start-up reads the environment. A command is
therefore forked only where its environment differs from the forking Python's in variables that no
module it imported read (`os.environ` is watched while they are imported) and that the interpreter,
the C library and OpenSSL do not read as they start (`READ_AT_START`: a fake clock's `LD_PRELOAD`,
import profiling, the locale). Commands under a prefix or another interpreter start afresh too.

A test reads a process's `/proc/PID/environ` and `/proc/PID/cmdline` as an attacker would, and the
kernel shows there the memory a process's environment and arguments were in when it started: a
fork's would be its forking Python's. So the child points the kernel at its own, as a started
process's would be (`prctl(PR_SET_MM, PR_SET_MM_MAP)`, which needs no privilege), and where the kernel
refuses, a command is forked only where its environment is the forking Python's (pytest's
`PYTEST_CURRENT_TEST` aside). The request, credentials and all, is read by the child alone: the
forking Python never holds a test's secret. The start-up has tests of its own
(`tests/service/process/test_imports_at_start.py`, `tests/test_packaging.py`).

Run as a script, this module is that Python: it listens on a Unix socket whose path it is given, and
for each connection forks a child that reads the request (the command, the directory, the
environment, and the three streams as passed descriptors) and answers its own pid once it stands as a
started process would; the forking Python answers its exit code later (`subprocess`'s: minus the
signal that ended it). It ends, killing what it forked, when the worker that started it is gone.
"""

from __future__ import annotations

import atexit
import contextlib
import ctypes
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
from collections.abc import Iterator, Mapping, Sequence
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
    "reviewer.queue.overview",
    "reviewer.queue.pager",
    "reviewer.run.commands",
    "reviewer.run.runner",
    "reviewer.run.gate",
    "reviewer.run.serving",
    "reviewer.run.sealed",
    "reviewer.sandbox.launcher",
    "reviewer.sample_api.server",
    "uvicorn.protocols.http.auto",
    "uvicorn.lifespan.off",
    "anyio._backends._asyncio",
    "anyio.streams.tls",
    "httpcore",
    "certifi",
    "encodings.idna",
    "pyseccomp",
    "cryptography.x509",
    "cryptography.hazmat.primitives.serialization.ssh",
    "jwt",
)
"""What `reviewer serve` imports before it listens, what `reviewer run` and the sample API import
before they serve, and the queue's own commands (`token`, `show`, `approve`...); and what most of
them import as they run (httpx's transport, `run`'s gate server and syscall filter, the keys'
cryptography). Each imports the rest itself."""

SWITCH = "TESTS_FORK_COMMANDS"
"""Set to 0 to start every command afresh: to compare the suite's time, or to rule a fork out."""
MESSAGE_LIMIT = 1 << 20
PER_TEST = "PYTEST_CURRENT_TEST"
"""Set by pytest for each test: the child is given the test's."""
READ_AT_START = (
    "PYTHON",
    "LD_",
    "GLIBC_",
    "MALLOC_",
    "LC_",
    "LANG",
    "TZ",
    "HOME",
    "OPENSSL",
    "SSL_",
    "FAKETIME",
)
"""What the interpreter, the C library (its loader, allocator and locale) and OpenSSL read as a
process starts (prefixes): a command whose environment differs there starts afresh."""
FORKED_OPTIONS = frozenset({"stdin", "stdout", "stderr", "text", "cwd", "env", "encoding", "errors"})
"""The `Popen` options a fork honours; a command given any other starts afresh."""

_PR_SET_MM, _PR_SET_MM_MAP = 35, 14
_MEMORY_MAP_FIELDS = (
    "start_code",
    "end_code",
    "start_data",
    "end_data",
    "start_brk",
    "brk",
    "start_stack",
    "arg_start",
    "arg_end",
    "env_start",
    "env_end",
)
_STAT_FIELDS = {
    "start_code": 26,
    "end_code": 27,
    "start_stack": 28,
    "start_data": 45,
    "end_data": 46,
    "start_brk": 47,
    "arg_start": 48,
    "arg_end": 49,
    "env_start": 50,
    "env_end": 51,
}
"""Where `/proc/self/stat` gives each of `struct prctl_mm_map`'s places (fields counted from 1)."""


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
            "command": [os.fsdecode(argument) for argument in args],
            "cwd": os.fspath(cwd) if cwd is not None else os.getcwd(),
            "umask": _current_umask(),
            "env": dict(os.environ if env is None else env),
        }
        self._channel = self._forker.fork(request, passed)
        started = self._channel.recv(64)
        if not started.startswith(b"pid "):
            raise RuntimeError(f"the forked command did not start ({started.decode()}): see its stderr")
        self.pid = int(started.removeprefix(b"pid "))
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
        self.returncode = int(answer.removeprefix(b"exit "))
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
        self.shows_own_start = False
        """Whether the kernel lets a child show its own arguments and environment in /proc."""
        self._read_at_import: frozenset[str] | None = None
        """The variables its imports read; None where a child cannot show its own environment or an
        import read the whole environment: then only the forking Python's own is forked."""

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
            ready = json.loads(self._process.stdout.readline() or b"null")
            if not isinstance(ready, dict):
                raise RuntimeError("the forking Python did not start")
            self.shows_own_start = ready["shows_own_start"]
            if self.shows_own_start and not ready["read_all"]:
                self._read_at_import = frozenset(ready["read"])
            atexit.register(self._stop)

    def forks(self, environment: Mapping[str, str]) -> bool:
        """Whether a command with this environment may be forked: it differs from the forking Python's
        only in variables that none of its imports read and that no start-up reads. None is started
        for a command it could not fork."""
        differing = _differing(environment, self._environment or self._environment_now())
        if any(name.startswith(READ_AT_START) for name in differing):
            return False
        self.start()
        if self._read_at_import is None:
            return not differing
        return not differing & self._read_at_import

    def _environment_now(self) -> dict[str, str]:
        """The environment this Python starts with: this process's, with its own buffering."""
        environment = {name: value for name, value in os.environ.items() if name != "PYTHONUNBUFFERED"}
        if self._unbuffered is not None:
            environment["PYTHONUNBUFFERED"] = self._unbuffered
        return environment

    @property
    def pid(self) -> int:
        assert self._process is not None
        return self._process.pid

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
    `python -m reviewer ...`, `env` allows (`_Forker.forks`), a fork honours every option
    (`FORKED_OPTIONS`) and Linux can report a forked child's exit (`pidfd_open`)."""
    environment = os.environ if env is None else env
    forkable = list(command[:3]) == [sys.executable, "-m", "reviewer"] and options.keys() <= FORKED_OPTIONS
    if forkable and _forking_on():
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


def forking_python(environment: Mapping[str, str]) -> _Forker:
    """The forking Python for this environment, started if it was not."""
    forker = _forker_for(environment)
    forker.start()
    return forker


def _forker_for(environment: Mapping[str, str]) -> _Forker:
    """The forking Python for this buffering of the standard streams (`PYTHONUNBUFFERED`, which the
    interpreter reads as it starts): the service's unbuffered log, a command's buffered output."""
    unbuffered = environment.get("PYTHONUNBUFFERED")
    with _forkers_lock:
        return _forkers.setdefault(unbuffered, _Forker(unbuffered))


def _differing(environment: Mapping[str, str], forking: Mapping[str, str]) -> set[str]:
    """The variables set differently in `environment` and the forking Python's, pytest's own aside."""
    names = environment.keys() | forking.keys()
    return {name for name in names if environment.get(name) != forking.get(name)} - {PER_TEST}


def _forking_on() -> bool:
    return os.environ.get(SWITCH) != "0" and hasattr(os, "pidfd_open")


def _current_umask() -> int:
    umask = os.umask(0o022)
    os.umask(umask)
    return umask


# The forking Python's side.


def _serve(socket_path: str) -> None:
    sys.path[0] = os.getcwd()  # as `python -m`, not the folder of this script
    with _environment_reads() as reads:
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
    sys.stdout.write(json.dumps({**reads, "shows_own_start": _shows_own_start()}) + "\n")
    sys.stdout.flush()
    try:
        while True:
            for key, _ in selector.select():
                if key.fileobj is sys.stdin.buffer:
                    if not sys.stdin.buffer.read1(1):
                        return  # the worker is gone
                elif key.fileobj is listener:
                    channel, _ = listener.accept()
                    pid = os.fork()
                    if pid == 0:
                        _run_child(channel)
                    pidfd = os.pidfd_open(pid)
                    children[pidfd] = (pid, channel)
                    selector.register(pidfd, selectors.EVENT_READ, None)
                else:
                    pidfd = key.fd
                    pid, channel = children.pop(pidfd)
                    selector.unregister(pidfd)
                    os.close(pidfd)
                    _, status = os.waitpid(pid, 0)
                    with contextlib.suppress(OSError):
                        channel.sendall(f"exit {os.waitstatus_to_exitcode(status)}".encode())
                    channel.close()
    finally:
        for pid, _ in children.values():
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


@contextlib.contextmanager
def _environment_reads() -> Iterator[dict[str, Any]]:
    """The environment's variables read in the block by an import (`read`), or whether an import read
    it whole (`read_all`: listed, copied), through `os.environ` or `os.getenv`: what a module keeps
    of the forking Python's environment. A read at run time is made again in the child, with its own."""
    reads: dict[str, Any] = {"read": set(), "read_all": False}
    environ = type(os.environ)
    getitem, iterate = environ.__getitem__, environ.__iter__

    def recorded_getitem(self: Any, name: str) -> str:
        if _read_by_an_import():
            reads["read"].add(name)
        return getitem(self, name)

    def recorded_iter(self: Any) -> Iterator[str]:
        if _read_by_an_import():
            reads["read_all"] = True
        return iterate(self)

    environ.__getitem__ = recorded_getitem  # type: ignore[method-assign]
    environ.__iter__ = recorded_iter  # type: ignore[method-assign]
    try:
        yield reads
    finally:
        environ.__getitem__ = getitem  # type: ignore[method-assign]
        environ.__iter__ = iterate  # type: ignore[method-assign]
        reads["read"] = sorted(reads["read"])


UNREAD_COPIES = {"wsgiref.handlers"}
"""Modules that copy the whole environment at import for a use no command here has: `wsgiref`'s,
for its CGI handler (imported with `prometheus_client`'s WSGI exposition)."""


def _read_by_an_import() -> bool:
    """Whether the read that called this was made by a module's body, as it was imported: the
    innermost body on the stack is not this script's (whose `_serve` runs `main`) nor one of
    `UNREAD_COPIES`."""
    frame: Any = sys._getframe(2)
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    if frame is None or frame.f_code.co_filename == __file__:
        return False
    return frame.f_globals.get("__name__") not in UNREAD_COPIES


class _MemoryMap(ctypes.Structure):
    """Linux's `struct prctl_mm_map`: where the kernel finds a process's code, data, heap, stack,
    arguments and environment (the last two are what `/proc/PID/cmdline` and `environ` show)."""

    _fields_ = [
        *((name, ctypes.c_uint64) for name in _MEMORY_MAP_FIELDS),
        ("auxv", ctypes.c_uint64),
        ("auxv_size", ctypes.c_uint32),
        ("exe_fd", ctypes.c_uint32),
    ]


def _show_started_with(command: Sequence[str], environment: Mapping[str, str]) -> None:
    """Point the kernel at `command` and `environment` laid out as `execve` lays them out, where a
    process started with them would have had them: `/proc/self/cmdline` and `environ` show them."""
    arguments = b"".join(os.fsencode(argument) + b"\0" for argument in command)
    variables = b"".join(os.fsencode(f"{name}={value}") + b"\0" for name, value in environment.items())
    global _started_with
    _started_with = ctypes.create_string_buffer(arguments + variables, len(arguments + variables))
    start = ctypes.addressof(_started_with)
    _set_memory_map(
        arg_start=start,
        arg_end=start + len(arguments),
        env_start=start + len(arguments),
        env_end=start + len(arguments) + len(variables),
    )


_started_with: ctypes.Array[ctypes.c_char] | None = None
"""The child's arguments and environment as `/proc` shows them, kept for its whole life."""


def _shows_own_start() -> bool:
    """Whether the kernel lets this process say where its arguments and environment are (it needs
    no privilege, but a kernel without checkpoint and restore lacks it): asked with the same places."""
    try:
        _set_memory_map()
    except OSError:
        return False
    return True


def _set_memory_map(**changed: int) -> None:
    stat = Path("/proc/self/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()  # from field 3 on, after the command's name
    current = {name: int(fields[number - 3]) for name, number in _STAT_FIELDS.items()}
    libc = ctypes.CDLL(None, use_errno=True)
    libc.sbrk.restype = ctypes.c_void_p
    memory_map = _MemoryMap(**{**current, "brk": libc.sbrk(0), **changed}, exe_fd=0xFFFFFFFF)
    if libc.prctl(_PR_SET_MM, _PR_SET_MM_MAP, ctypes.byref(memory_map), ctypes.sizeof(memory_map), 0):
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_MM_MAP)")


def _run_child(channel: socket.socket) -> None:
    """In the child: read the request, take the streams, the directory, the environment and the
    arguments, run the command, and exit as the interpreter would after `sys.exit(main())`. A
    connection that is no request ends it at once. Never returns."""
    code = 1
    try:
        try:
            message, fds, _, _ = socket.recv_fds(channel, MESSAGE_LIMIT, 3)
            request: dict[str, Any] = json.loads(message)
            if len(fds) != 3 or not {"command", "cwd", "umask", "env"} <= request.keys():
                raise ValueError("not a request")
        except (OSError, ValueError):
            os._exit(code)
        for target, fd in enumerate(fds):
            os.dup2(fd, target)
        os.chdir(request["cwd"])
        os.umask(request["umask"])
        os.environ.clear()
        os.environ.update(request["env"])
        with contextlib.suppress(OSError):  # where it cannot, only the forking Python's own is forked
            _show_started_with(request["command"], request["env"])
        # Started as `Popen` returns a started process: its directory, streams and /proc are its own.
        channel.sendall(f"pid {os.getpid()}".encode())
        for name in os.listdir("/proc/self/fd"):
            if int(name) > 2:
                with contextlib.suppress(OSError):
                    os.close(int(name))
        arguments = request["command"][3:]  # after `python -m reviewer`
        sys.path[0] = request["cwd"]
        sys.argv = [str(Path(sys.modules["reviewer.__main__"].__file__ or "")), *arguments]
        from reviewer.__main__ import main

        code = _exit_code(lambda: main(arguments))
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
