"""A policy's verdict computed where the queue keeps serving: in a child process, under a deadline.

The CEL binding holds the interpreter lock for as long as an expression runs, so an evaluation in a
thread of the service stops its event loop for as long as the plan makes it last. Here each
evaluation runs in a worker process (a small pool, started on first use and kept), which reports
every rule's outcome as it is decided. Past the deadline the worker is killed and replaced, and the
plan fails closed: every rule not yet decided fails (`EvaluationError`, so the verdict names it and
why), as a rule that raises does (`fail_closed`): it asks at least what it asks when it matches, and
an undecided `reject` rule rejects. A shutdown is no such failure: an evaluation `close` cuts short
raises `EvaluatorClosed`, and nothing is decided.

A worker's memory is bounded too: for each plan it may grow by `MEMORY_PER_PLAN_BYTE` times the
plan's JSON plus `MEMORY_HEADROOM` (its address space, `RLIMIT_AS`, never past the hard limit); a
rule that builds past that ends the worker, and the plan fails closed as past the deadline, the
reason saying so.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from multiprocessing.connection import Connection
from typing import Any, Final, NamedTuple

import msgspec

from reviewer.plan.proposal import Proposal, scan_proposal
from reviewer.policy.expressions import DEFAULT_DEADLINE, EvaluationError, Expression
from reviewer.policy.file import Policy, PolicyRule
from reviewer.policy.verdict import ChangeRequest, Verdict, evaluate

log = logging.getLogger(__name__)

DEFAULT_WORKERS: Final = 2
MEMORY_PER_PLAN_BYTE: Final = 40
"""How much a worker's memory may grow for each byte of the plan's JSON: the calls decoded, their
arguments as Python and as CEL values (a `map` of every call's arguments, the costliest rule
measured, took 24 times the JSON)."""
MEMORY_HEADROOM: Final = 256 * 1024 * 1024
"""And beside that, for any plan: the binding's and the interpreter's own allocations."""
_OUT_OF_MEMORY: Final = 3
"""The exit status of a worker that ran out of memory in Python (the binding aborts: SIGABRT)."""
WORKER_EXIT_GRACE: Final = 5.0
"""Seconds a worker whose socket closed may take to exit, for its exit status to say why."""
WORKER_START_LIMIT: Final = 60.0
"""Seconds a worker may take to start and compile the policy (not counted in a plan's deadline)."""


class EvaluatorClosed(Exception):
    """The evaluator was closed (the queue stops) before the plan was decided: there is no verdict,
    not even a fail-closed one, for a shutdown is no reason to reject or ask more of a plan."""


@dataclass(frozen=True)
class RuleOutcome:
    """What one rule gave on the plan, and what it cost; `holds` is None when it raised."""

    holds: bool | None
    error: str | None
    seconds: float


@dataclass(frozen=True)
class BoundedVerdict:
    verdict: Verdict
    outcomes: Mapping[int, RuleOutcome]
    """Each decided rule's outcome, by its index in the policy's rules."""
    seconds: float
    finished: bool
    """False when the deadline passed (or the worker died) before every rule was decided."""
    running: int | None = None
    """The rule being evaluated when the deadline passed (None: the plan's values were still
    being made, or every rule was decided)."""
    values_seconds: float | None = None
    """How long the plan's values took to make, before the first rule (None: not made in time)."""


class PolicyEvaluator:
    """Evaluates `policy` on proposals in worker processes, each evaluation within `deadline` seconds."""

    def __init__(
        self,
        policy: Policy,
        deadline: float = DEFAULT_DEADLINE,
        *,
        signing: bool = False,
        workers: int = DEFAULT_WORKERS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.policy = policy
        self.deadline = deadline
        self.clock = clock
        """Seconds, read from the plan's arrival at a worker on: the deadline bounds the whole
        evaluation, however many reports the worker sends meanwhile."""
        self.signing = signing
        self._idle: list[_Worker] = []
        self._started: dict[int, _Worker] = {}
        """Every worker not yet stopped, idle or evaluating, by process id: `close` stops them all."""
        self._closed = False
        self._warned_capped = False
        self._lock = threading.Lock()
        self._slots = threading.BoundedSemaphore(workers)
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="policy-workers")
        """Starts every worker from one thread that lives as long as this evaluator: a worker is
        killed when the thread that started it ends (`_die_with_parent`), and the threads that ask
        for verdicts come and go."""

    def verdict(
        self, body: bytes, proposal: Proposal | None = None, changes_requested: Sequence[ChangeRequest] = ()
    ) -> Verdict:
        """The verdict on the proposal whose JSON is `body` (`proposal`, when the caller parsed it,
        spares a parse on the fail-closed path), after the changes asked of its earlier revisions."""
        return self.evaluate(body, proposal, changes_requested).verdict

    def evaluate(
        self, body: bytes, proposal: Proposal | None = None, changes_requested: Sequence[ChangeRequest] = ()
    ) -> BoundedVerdict:
        with self._slots:
            outcomes: dict[int, RuleOutcome] = {}
            running = values_seconds = None
            memory: _MemoryBound | None = None
            ended = False
            why = f"not decided within the {self.deadline:g} s deadline"
            start = self.clock()
            worker = None
            try:
                worker = self._take()
                start = self.clock()
                worker.connection.send_bytes(body)
                worker.connection.send(tuple(changes_requested))
                while True:
                    remaining = self.deadline - (self.clock() - start)
                    if remaining <= 0 or not worker.connection.poll(remaining):
                        break
                    message = worker.connection.recv()
                    if message[0] == "memory":
                        memory = message[1]
                        self._warn_if_capped(memory)
                        continue
                    if message[0] == "start":
                        running = message[1]
                        if values_seconds is None:
                            values_seconds = self.clock() - start
                        continue
                    if message[0] == "rule":
                        _kind, index, holds, error, seconds = message
                        outcomes[index] = RuleOutcome(holds, error, seconds)
                        running = None
                        continue
                    self._give_back(worker)
                    spent = self.clock() - start
                    return BoundedVerdict(message[1], outcomes, spent, True, None, values_seconds)
            except (EOFError, OSError) as error:
                why = f"not decided: the evaluation stopped ({type(error).__name__})"
                ended = True
            if worker is not None:
                self._stop(worker, grace=WORKER_EXIT_GRACE if ended else 0.0)
                if memory is not None and worker.process.returncode in (-signal.SIGABRT, _OUT_OF_MEMORY):
                    capped = ", capped by the service's hard address-space limit" if memory.capped else ""
                    why = (
                        f"not decided: the evaluation passed its memory limit ({memory.allowed / 1e6:,.0f} MB"
                        f"{capped} for a plan of {len(body) / 1e6:,.1f} MB)"
                    )
            if self._closed:
                raise EvaluatorClosed("the policy evaluator stopped before the plan was decided")
            with contextlib.suppress(OSError):  # closed meanwhile
                self._give_back(self._start())
        if proposal is None:
            proposal = scan_proposal(body, "stored proposal")
        verdict = fail_closed(self.policy, proposal, outcomes, why, signing=self.signing)
        return BoundedVerdict(verdict, outcomes, self.clock() - start, False, running, values_seconds)

    def _warn_if_capped(self, memory: _MemoryBound | None) -> None:
        """Say once that the hard address-space limit, not the plan's size, bounds the workers."""
        if memory is None or not memory.capped or self._warned_capped:
            return
        self._warned_capped = True
        log.warning(
            "the hard address-space limit (ulimit -v) leaves a policy worker %.0f MB for a plan, "
            "less than it would allow; a plan that needs more is not decided and fails closed",
            memory.allowed / 1e6,
        )

    def close(self) -> None:
        """Stop every worker, those evaluating too (their evaluations raise `EvaluatorClosed`: a
        shutdown decides nothing), and start no more."""
        with self._lock:
            self._closed = True
            workers, self._idle = list(self._started.values()), []
        for worker in workers:
            self._stop(worker)
        self._starter.shutdown()

    def _start(self) -> _Worker:
        with self._lock:
            if self._closed:
                raise OSError("the queue is stopping")
            worker = self._starter.submit(_Worker.start, self.policy, self.signing).result()
            self._started[worker.process.pid] = worker
        return worker

    def _stop(self, worker: _Worker, grace: float = 0.0) -> None:
        worker.stop(grace)
        with self._lock:
            self._started.pop(worker.process.pid, None)

    def _take(self) -> _Worker:
        """An idle worker that has loaded the policy (its start is not the plan's time)."""
        worker = None
        while worker is None:
            with self._lock:
                worker = self._idle.pop() if self._idle else None
            worker = worker or self._start()
            if not worker.alive():
                self._stop(worker)
                worker = None
        try:
            ready = worker.connection.poll(WORKER_START_LIMIT) and worker.connection.recv() == "ready"
        except (EOFError, OSError):  # it ended before it was ready
            ready = False
        if not ready:
            self._stop(worker)
            raise OSError("the evaluating process did not start")
        return worker

    def _give_back(self, worker: _Worker) -> None:
        with self._lock:
            if not self._closed:
                self._idle.append(worker)
                return
        self._stop(worker)


def rule_costs(
    policy: Policy, body: bytes, deadline: float = DEFAULT_DEADLINE
) -> tuple[list[float | None], float | None]:
    """Each rule's seconds on the proposal `body` (None: it did not finish within `deadline`), and
    the seconds the plan's values took before any rule (None when they alone outlive it). A rule
    that does not finish is left out and the rules after it are evaluated again without it."""
    costs: list[float | None] = [None] * len(policy.rules)
    values: float | None = None
    left = list(range(len(policy.rules)))
    while left:
        part = dataclasses.replace(policy, rules=tuple(policy.rules[index] for index in left))
        evaluator = PolicyEvaluator(part, deadline, workers=1)
        try:
            result = evaluator.evaluate(body)
        finally:
            evaluator.close()
        values = result.values_seconds if values is None else values
        for position, outcome in result.outcomes.items():
            costs[left[position]] = outcome.seconds
        if result.finished or result.running is None:
            break  # done, or the plan's values alone outlive the deadline
        left = left[result.running + 1 :]
    return costs, values


def fail_closed(
    policy: Policy, proposal: Proposal, outcomes: Mapping[int, RuleOutcome], why: str, *, signing: bool
) -> Verdict:
    """The verdict when only the rules in `outcomes` were decided: each of the others fails with
    `why`, and the verdict treats it as every rule that fails to evaluate: it asks at least what it
    asks when it matches, and a reject rule rejects (`reviewer.policy.verdict`)."""
    decided = dataclasses.replace(
        policy,
        rules=tuple(
            dataclasses.replace(
                rule, when=_Known(**{**vars(rule.when), "outcome": outcomes.get(index), "why": why})
            )
            for index, rule in enumerate(policy.rules)
        ),
    )
    # Every rule now answers from `outcomes`, so the calls are left out: none is walked again.
    return evaluate(decided, msgspec.structs.replace(proposal, calls=[]), signing=signing)


@dataclass(frozen=True)
class _Known(Expression):
    """A rule's expression standing for its outcome already known, or for the deadline it missed."""

    outcome: RuleOutcome | None = None
    why: str = ""

    def evaluate(self, activation: Any) -> bool:
        if self.outcome is None:
            raise EvaluationError(self.why)
        if self.outcome.holds is None:
            raise EvaluationError(self.outcome.error or "the rule failed")
        return self.outcome.holds


@dataclass(frozen=True)
class _Reported(Expression):
    """A rule's expression that tells the parent its outcome as soon as it is decided."""

    report: Callable[[bool | None, str | None, float], None] | None = None
    starting: Callable[[], None] | None = None

    def evaluate(self, activation: Any) -> bool:
        assert self.report is not None and self.starting is not None
        self.starting()
        start = time.monotonic()
        try:
            holds = super().evaluate(activation)
        except EvaluationError as error:
            self.report(None, str(error), time.monotonic() - start)
            raise
        self.report(holds, None, time.monotonic() - start)
        return holds


@dataclass
class _Worker:
    process: subprocess.Popen[bytes]
    connection: Connection

    @classmethod
    def start(cls, policy: Policy, signing: bool) -> _Worker:
        # A fresh interpreter, not a fork (the service has threads whose locks a fork would copy) nor
        # multiprocessing's spawn (which imports the parent's main script again); it imports with
        # the garbage collector held, as a command starts (a fifth of its start, on the way of the
        # first plan the policy reads).
        ours, theirs = socket.socketpair()
        start = (
            "import reviewer\n"
            f"with reviewer.collection_held(): import {__name__} as m\n"
            f"m._serve_evaluations({theirs.fileno()})"
        )
        with theirs:
            process = subprocess.Popen(
                [sys.executable, "-c", start],
                pass_fds=[theirs.fileno()],
                stdin=subprocess.DEVNULL,
                env={**os.environ, "RUST_BACKTRACE": "0"},  # a rule out of memory: one line, not a trace
            )
        worker = cls(process, Connection(ours.detach()))
        try:
            worker.connection.send((policy, signing))
        except OSError:  # it ended already
            worker.stop()
            raise
        return worker

    def alive(self) -> bool:
        return self.process.poll() is None

    def stop(self, grace: float = 0.0) -> None:
        """Kill the worker unless it exits within `grace` seconds (one that ended on its own
        closes its socket before its exit status can be read)."""
        self.connection.close()
        try:
            self.process.wait(grace)
        except subprocess.TimeoutExpired:
            self.process.kill()
        self.process.wait()


def _serve_evaluations(descriptor: int) -> None:
    """The worker: the policy, then for each proposal's JSON (and the changes asked of its earlier
    revisions) each rule's outcome and the verdict, until the parent closes the socket."""
    _die_with_parent()
    connection = Connection(descriptor)
    policy, signing = connection.recv()
    try:
        while True:
            connection.send("ready")
            body = connection.recv_bytes()
            asked = connection.recv()
            connection.send(("memory", _limit_memory(len(body))))
            try:
                proposal = scan_proposal(body, "stored proposal")
                verdict = evaluate(
                    _reporting(policy, connection), proposal, signing=signing, changes_requested=asked
                )
            except MemoryError:
                os._exit(_OUT_OF_MEMORY)
            connection.send(("verdict", verdict))
    except (EOFError, OSError):
        return  # the parent closed the socket: it stopped this worker, or stops


class _MemoryBound(NamedTuple):
    allowed: int
    """The bound's bytes beyond what the worker held."""
    capped: bool
    """True when the hard limit the service was started under (`ulimit -v`) is below what the
    worker would allow: the bound is that limit, and `allowed` may be 0."""


def _limit_memory(plan_bytes: int) -> _MemoryBound | None:
    """Bound this worker's address space for one plan: what it holds now (the plan's JSON
    included), `MEMORY_PER_PLAN_BYTE` times the plan, and `MEMORY_HEADROOM`, never past the hard
    limit (None where there is no /proc to read it from: not Linux, no bound). Past it an
    allocation fails: the binding aborts, Python raises."""
    import resource

    if sys.platform != "linux":
        return None
    held = _address_space()
    wanted = held + MEMORY_PER_PLAN_BYTE * plan_bytes + MEMORY_HEADROOM
    hard = resource.getrlimit(resource.RLIMIT_AS)[1]
    capped = hard != resource.RLIM_INFINITY and wanted > hard
    bound = hard if capped else wanted
    resource.setrlimit(resource.RLIMIT_AS, (bound, hard))
    return _MemoryBound(max(bound - held, 0), capped)


def _address_space() -> int:
    """This process's virtual memory, in bytes."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[0]) * os.sysconf("SC_PAGE_SIZE")


def _reporting(policy: Policy, connection: Connection) -> Policy:
    def reporter(index: int) -> Callable[[bool | None, str | None, float], None]:
        return lambda holds, error, seconds: connection.send(("rule", index, holds, error, seconds))

    def starter(index: int) -> Callable[[], None]:
        return lambda: connection.send(("start", index))

    rules: list[PolicyRule] = []
    for index, rule in enumerate(policy.rules):
        reported = _Reported(**{**vars(rule.when), "report": reporter(index), "starting": starter(index)})
        rules.append(dataclasses.replace(rule, when=reported))
    return dataclasses.replace(policy, rules=tuple(rules))


def _die_with_parent() -> None:
    """A worker whose service was killed stops at once, not after the rule it is in: the binding
    holds the interpreter lock, so no thread of the worker could notice. (Linux sends the signal
    when the thread that started the worker ends, hence `PolicyEvaluator._starter`.)"""
    if sys.platform == "linux":
        import ctypes

        pr_set_pdeathsig = 1
        ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL)
        if os.getppid() == 1:
            os._exit(0)
