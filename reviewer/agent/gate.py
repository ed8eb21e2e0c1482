"""`Gate`: the whole life of a gated run in one object: dry run, submit, wait, claim, replay, report, verify.

    async with Gate(api="http://127.0.0.1:8480", queue="http://127.0.0.1:8470") as gate:
        result = await gate.run(my_task, title="Merge t1 and t2 into a new ticket")
    result.raise_for_stop()

The steps stay callable one by one (`dry_run`, `submit`, `status`, `wait`, `execute`, `verify`), because
a framework that pauses between them (a LangGraph interrupt, an MCP host that calls back later) needs
each on its own. Every step is the library's own: the gate adds no rule, it only saves the wiring.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from types import TracebackType
from typing import Any, Final

import httpx

from reviewer.agent.backends import make_backend
from reviewer.agent.errors import (
    AgentError,
    ChangesRequested,
    DryRunParameterUnknown,
    NoApproval,
    NotApproved,
    RunStopped,
    WritesKept,
)
from reviewer.agent.execution import DEFAULT_REQUEST_ID_HEADER, Approval, Execution
from reviewer.agent.feedback import Feedback, with_feedback
from reviewer.agent.queue import DEFAULT_DECISION_TIMEOUT, DEFAULT_POLL_INTERVAL, QueueAgent
from reviewer.agent.replan import Replan, until_decided
from reviewer.agent.runs import Recording, running
from reviewer.agent.sandbox_check import SandboxCheck
from reviewer.agent.tools import GatedTool, WriteTool
from reviewer.agent.waiting import Patience
from reviewer.audit.matching import AuditMatch
from reviewer.audit.registry import AuditSource, audit_source
from reviewer.plan.proposal import Agent, Proposal, Target
from reviewer.queue.client import QueueClient
from reviewer.queue.config import AGENT_TOKEN_ENV as AGENT_TOKEN_ENV  # the agent library says it too
from reviewer.queue.ids import new_proposal_id
from reviewer.queue.messages import DecisionState, SubmissionAnswer
from reviewer.reading.verification import Verification, compare_execution
from reviewer.signing.allowed_signers import AllowedSigners

log = logging.getLogger(__name__)
"""Says what a run waits for: the line that opens the plan once it is submitted, then the decision."""

"""Where the gate finds the agent's queue token when none is passed: never a command-line argument,
which other users of the machine can read."""

DEFAULT_QUEUE_URL: Final = "http://127.0.0.1:8470"

Task = Callable[[], Awaitable[Any]]
ReplanningTask = Callable[..., Awaitable[Any]]
"""A task `Gate.run` calls with no argument, or with `feedback=` when it takes that keyword."""


class MissingAgentToken(AgentError):
    """The gate has no agent token to talk to the queue with."""

    def __init__(self) -> None:
        super().__init__(
            f"no agent token: set {AGENT_TOKEN_ENV} (mint one on the queue's host with "
            "`reviewer token create --name NAME --role agent`) or pass token= to Gate"
        )


@dataclass
class GateResult:
    """How one gated run ended, step by step. `raise_for_stop()` raises unless the approved plan ran
    whole and every call succeeded."""

    recording: Recording
    proposal: Proposal
    submission: SubmissionAnswer
    approval: Approval | None = None
    refusal: NoApproval | None = None
    """Why nothing ran: rejected (with the reviewer's reason), expired, no decision in time, claimed."""
    execution: Execution | None = None
    stopped: RunStopped | None = None
    verification: Verification | None = None
    feedback: tuple[Feedback, ...] = ()
    """The changes reviewers asked for on the earlier revisions, oldest first (`max_revisions`)."""

    @property
    def dry_run_audit(self) -> AuditMatch | None:
        """The audit source read for the dry run's window: `unplanned` are writes the gate did not make."""
        return self.recording.audit_match

    @property
    def audit(self) -> AuditMatch | None:
        """The real run against the audit source, call by call by request id (`summary` is the line of
        docs/design.md, "Verifying against audit logs"); None without a source, or unread."""
        return self.execution.audit_match if self.execution is not None else None

    @property
    def ok(self) -> bool:
        return self.execution is not None and self.execution.ok

    @property
    def rejection_reason(self) -> str | None:
        """The reviewer's reason, when the plan was rejected (or changes were asked for on the last
        revision `max_revisions` allowed)."""
        return getattr(self.refusal, "reason", None)

    def raise_for_stop(self) -> None:
        """Raise why the plan did not run whole: the refusal (`ProposalRejected`, `NotApproved`,
        `DecisionTimeout`) or the stop (`RunStopped`, with `.execution`)."""
        if self.refusal is not None:
            raise self.refusal
        if self.stopped is not None:
            raise self.stopped
        if self.execution is not None:
            self.execution.raise_for_stop()


class Gate:
    """An agent's gate to one API through one queue.

    `api` is the API's base URL or an httpx client for it (reads and server dry runs go through it; a
    real run only after approval). `queue` is the queue's URL or a `QueueClient`; the agent token comes
    from `token` or `REVIEWER_AGENT_TOKEN`. `backend` is how writes are dry-run: `record` (the default:
    written down, nothing sent), `fake`, `transport`, or `server`, which sends each write with the API's
    own dry-run parameter and so needs it named (`dry_run_query={"dryRun": "All"}` for Kubernetes): an
    API that does not know the parameter drops it and writes for real, which only an `audit` log of kept
    writes (`api:`, `sample:`) shows, or a `sandbox` check: a collection on a sandbox copy of the API
    (`sandbox="https://sandbox.api.example/v1/tickets"`, or a `SandboxCheck` with the sandbox's own
    headers) is listed, sent a create with the parameter and listed again before each dry run; a kept
    create stops the dry run before it begins (`SandboxKeptWrite`), an unchanged listing is recorded
    with the plan and makes the server's oks validated. A dry run that kept writes is refused at
    submission unless `allow_kept_writes`: the reviewer would be approving writes that already happened.
    With `allowed_signers`, an approval counts only when `signatures_required` people in that file
    signed it, and `ledger` names the local file where this executor records the approvals it ran (each
    runs once). A queue that is away (restarted, upgraded) is waited for, with `patience`'s backoff, for
    as long as the decision may still come and at most `decision_timeout` seconds; nothing is sent twice.

    `audit` is the API's audit log, `"api:/v1/audit"` (served by the API, read through `api`),
    `"access-log:/var/log/nginx/api.json"` or any `KIND:LOCATION` (`reviewer.audit.registry.audit_source`):
    the dry run's window is read for what the API kept of its requests (`dry_run.writes_kept`, where the
    log can say) and for writes the gate did not make (`dry_run.writes_around`, an alarm on the review
    screen), and the real run is matched call by call by the request id each write carries in
    `request_id_header`. A log that cannot be read stops the dry run (`AuditUnavailable`).
    """

    def __init__(
        self,
        api: httpx.AsyncClient | str | None = None,
        queue: QueueClient | str = DEFAULT_QUEUE_URL,
        *,
        token: str | None = None,
        backend: str = "record",
        audit: AuditSource | str | None = None,
        sandbox: SandboxCheck | str | None = None,
        request_id_header: str = DEFAULT_REQUEST_ID_HEADER,
        agent: Agent | str = "agent",
        target: Target | None = None,
        allow_kept_writes: bool = False,
        poll_interval: float = DEFAULT_POLL_INTERVAL,
        decision_timeout: float = DEFAULT_DECISION_TIMEOUT,
        allowed_signers: AllowedSigners | None = None,
        signatures_required: int = 1,
        ledger: Path | str | None = None,
        patience: Patience | None = None,
        **backend_options: Any,
    ) -> None:
        if backend == "server" and not backend_options.get("dry_run_query"):
            raise DryRunParameterUnknown(
                "Gate(backend='server', dry_run_query={'dryRun': 'All'}) for Kubernetes, or the parameter "
                "the API documents"
            )
        if sandbox is not None and backend != "server":
            raise ValueError(
                f"a sandbox check proves a server dry run's parameter; the {backend!r} backend sends none"
            )
        self.sandbox = SandboxCheck(sandbox) if isinstance(sandbox, str) else sandbox
        self._owned: list[httpx.AsyncClient | QueueClient] = []
        if isinstance(api, str):
            api = httpx.AsyncClient(base_url=api)
            self._owned.append(api)
        self.api = api
        if isinstance(queue, str):
            token = token or os.environ.get(AGENT_TOKEN_ENV)
            if not token:
                raise MissingAgentToken()
            queue = QueueClient(queue, token)
            self._owned.append(queue)
        self.queue = QueueAgent(
            queue,
            poll_interval=poll_interval,
            allowed_signers=allowed_signers,
            signatures_required=signatures_required,
            ledger=ledger,
            patience=patience,
            outage_timeout=decision_timeout,
        )
        self.backend = backend
        self.backend_options = backend_options
        self.audit = audit_source(audit) if isinstance(audit, str) else audit
        self.request_id_header = request_id_header
        self.agent = Agent(name=agent) if isinstance(agent, str) else agent
        self.target = target or Target(
            api=api.base_url.host if api is not None else "sdk",
            base_url=str(api.base_url).rstrip("/") if api is not None else None,
        )
        self.allow_kept_writes = allow_kept_writes
        self.decision_timeout = decision_timeout

    async def __aenter__(self) -> Gate:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Close the clients the gate made from URLs; clients passed in belong to the caller."""
        for owned in reversed(self._owned):
            await owned.aclose()
        self._owned.clear()

    # the steps

    async def dry_run(self, task: Task) -> Recording:
        """Run `task` with its write tools dry, through the gate's backend, and return the record."""
        recording = self.recorder()
        async with running(recording, dry=True):
            await task()
        return recording

    def recorder(self) -> Recording:
        """A dry run for calls that arrive one by one (an MCP request, a graph step), outside any run
        scope: the caller hands each call to `Recording.perform` and calls `_finish` before proposing.

        Only a server dry run's backend sends through the API client; the record reads an `api:` log
        through it whatever the backend. A log that cannot be read stops the dry run at its start
        (`AuditUnavailable`) instead of leaving the plan and the real run silently without it."""
        backend_client = self.api if self.backend == "server" else None
        options = dict(self.backend_options)
        if self.backend == "server":  # the dry run's requests carry ids too: the log tells them apart
            options.setdefault("request_id_header", self.request_id_header)
        backend = make_backend(self.backend, backend_client, **options)
        query = self.backend_options.get("dry_run_query")
        check = partial(self.sandbox.prove, query) if self.sandbox is not None and query else None
        return Recording(backend, client=self.api, audit=self.audit, sandbox_check=check)

    def propose(
        self,
        recording: Recording,
        *,
        title: str,
        task: str | None = None,
        proposal_id: str | None = None,
        revision: int = 1,
    ) -> Proposal:
        """The record as a proposal for this gate's target; with an audit source, what it kept and the
        writes the gate did not make are on it."""
        return recording.to_proposal(
            proposal_id=proposal_id or new_proposal_id(title),
            title=title,
            task=task,
            agent=self.agent,
            target=self.target,
            revision=revision,
        )

    def audit_run(self, execution: Execution) -> AuditMatch | None:
        """The real run against the audit source, by request id, as `execute` read it before the run's
        report (which carries it); None without a source or when it could not be read (logged)."""
        if self.audit is None:
            return None
        result = execution.audit_match
        if result is None:
            reported = execution.audit_verification
            problem = (reported.get("problem") if reported is not None else None) or "it was not read"
            log.warning("%s after the run: %s", self.audit.name, problem)
            return None
        log.info("%s: %s", self.audit.name, result.summary)
        return result

    async def submit(self, proposal: Proposal) -> SubmissionAnswer:
        """Submit the proposal; a dry run that kept writes is refused here (`WritesKept`), nothing sent."""
        kept = proposal.dry_run.writes_kept
        if kept and not self.allow_kept_writes:
            raise WritesKept(kept)
        return await self.queue.submit(proposal)

    async def status(self, proposal_id: str) -> DecisionState:
        """The queue's state of the latest revision, without waiting for a decision (a queue that is
        away is waited for, as every step does)."""
        return await self.queue.state(proposal_id)

    async def wait(self, submission: SubmissionAnswer, *, timeout: float | None = None) -> Approval:
        """Wait for the decision on this submission; the approval, or the `NoApproval` that says why not."""
        return await self.queue.wait_for_decision(
            submission.proposal_id,
            submission.revision,
            plan_digest=submission.plan_sha256,
            timeout=self.decision_timeout if timeout is None else timeout,
        )

    async def approval(self, proposal_id: str) -> Approval:
        """The current approval of a proposal decided earlier (the queue is asked, never trusted from
        memory); `NoApproval` when it is not approved now."""
        state = await self.status(proposal_id)
        if state.state == "pending":
            raise NotApproved(proposal_id, state.revision, "no reviewer has decided it yet")
        return await self.queue.wait_for_decision(
            proposal_id, state.revision, plan_digest=state.plan_sha256, timeout=0
        )

    async def execute(
        self,
        approval: Approval,
        *,
        tools: Iterable[WriteTool | GatedTool] = (),
        task: Task | None = None,
        allow_any_target: bool = False,
    ) -> Execution:
        """Claim the approval, replay the approved calls once (or run `task` again, re-sampling), report
        the run; `RunStopped` unless every approved call ran and succeeded."""
        return await self.queue.execute(
            approval,
            client=self.api,
            task=task,
            tools=tools,
            audit=self.audit,
            allow_any_target=allow_any_target,
            request_id_header=self.request_id_header,
        )

    @staticmethod
    def verify(execution: Execution) -> Verification:
        """The real calls against the approved plan (the audit log's reading is `audit_run`)."""
        return compare_execution(execution.approval.proposal, execution.executed_calls())

    # the whole life

    async def run(
        self,
        task: ReplanningTask,
        *,
        title: str,
        description: str | None = None,
        proposal_id: str | None = None,
        replay: bool = True,
        max_revisions: int = 1,
    ) -> GateResult:
        """Dry-run `task`, submit the plan, wait for a reviewer, then run the approved plan once.

        The real run replays the approved calls (`replay=True`) rather than asking the model again;
        `replay=False` runs `task` again, each call checked against the plan before it is sent. A
        rejection, an expiry or no decision in time ends the run with nothing written: the result says
        why (`refusal`, `rejection_reason`), and `raise_for_stop()` raises it.

        A reviewer may ask for changes instead: up to `max_revisions` plans are made (1, the default,
        makes one). A task that takes a keyword argument `feedback` gets `None` for the first plan and
        the reviewer's `Feedback` for each re-plan, which is submitted as the next revision of the same
        proposal; the queue shows the reviewer what changed since the revision they asked to change.
        """
        replan = Replan(max_revisions)
        proposal_id = proposal_id or new_proposal_id(title)
        attempts: list[GateResult] = []

        async def attempt(replan: Replan) -> GateResult:
            planned = with_feedback(task, replan.feedback)
            recording = await self.dry_run(planned)
            proposal = self.propose(
                recording, title=title, task=description, proposal_id=proposal_id, revision=replan.revision
            )
            submission = await self.submit(proposal)
            result = GateResult(recording, proposal, submission, feedback=tuple(replan.asked))
            attempts.append(result)
            named = f"{submission.proposal_id} revision {submission.revision}"
            log.info("waiting for a reviewer: reviewer review %s (%s)", submission.proposal_id, named)
            try:
                approval = await self.wait(submission)
            except ChangesRequested as changes:
                log.info("%s: %s", named, changes)
                raise
            except NoApproval as refusal:
                log.info("%s not approved: %s", named, refusal)
                result.refusal = refusal
                return result
            return await self._run_approved(result, approval, None if replay else planned)

        try:
            return await until_decided(attempt, replan)
        except ChangesRequested as changes:
            attempts[-1].refusal = changes
            return attempts[-1]

    async def _run_approved(self, result: GateResult, approval: Approval, task: Task | None) -> GateResult:
        """`run`'s real run of an approved plan: replayed (or `task` again), reported, verified."""
        named = f"{approval.proposal_id} revision {approval.revision}"
        log.info("%s approved by %s", named, approval.approved_by)
        result.approval = approval
        try:
            result.execution = await self.execute(approval, tools=result.recording.tools.values(), task=task)
        except NoApproval as refusal:
            log.info("%s not approved: %s", named, refusal)
            result.refusal = refusal
            return result
        except RunStopped as stopped:
            result.stopped = stopped
            result.execution = stopped.execution
        if result.execution is not None:
            result.verification = self.verify(result.execution)
            self.audit_run(result.execution)
        return result
