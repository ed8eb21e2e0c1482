"""`reviewer run`'s whole life: check, dry run behind the gate, submit, wait, then the real run by the
library's executor (a replay of the approved calls, or COMMAND again with `--rerun`), verify, summarise.

Every step after the dry run is the agent library's own (`reviewer.agent.Gate`): the claim, one send
per call, the base-URL check, no redirects, the report in every ending, the verification. This module
only wires the gate and the child to it and says, in one line each, what happened.
"""

from __future__ import annotations

import os
import sys
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from reviewer.agent.audit import AuditUnavailable, require_readable
from reviewer.agent.errors import (
    ChangesRequested,
    NoApproval,
    ProposalRejected,
    RunStopped,
    SandboxCheckFailed,
    SandboxKeptWrite,
    WritesKept,
)
from reviewer.agent.execution import DEFAULT_REQUEST_ID_HEADER, Execution
from reviewer.agent.feedback import Feedback
from reviewer.agent.gate import Gate
from reviewer.agent.ledger import LedgerError
from reviewer.agent.replan import Replan, until_decided
from reviewer.agent.sandbox_check import SandboxCheck
from reviewer.agent.signer_options import ApprovalTrust
from reviewer.agent.tools import ACTIVE_RUN
from reviewer.agent.waiting import Patience
from reviewer.audit.checks import alarm_line
from reviewer.audit.commands import unplanned_text
from reviewer.audit.registry import AuditSource
from reviewer.plan.proposal import Agent, Proposal, ProposalError, Target, dumps, scan_proposal
from reviewer.plan.sanitize import safe_text
from reviewer.queue.client import QueueClient
from reviewer.queue.ids import new_proposal_id
from reviewer.queue.refusals import QueueError
from reviewer.run.aws_protocols import aws_api_of
from reviewer.run.child import ChildExit, child_environment, run_child
from reviewer.run.errors import ChildFailed, DryRunSpoiled, RunRefused
from reviewer.run.gate import DryMode, HttpGate, RealMode
from reviewer.run.openapi import ApiDocument
from reviewer.run.options import Credentials
from reviewer.run.replan import FEEDBACK_ENV, with_feedback_env
from reviewer.run.serving import gate_service, serving
from reviewer.sandbox.egress import EGRESS_PORT, EgressProxy, proxy_environment, serving_egress
from reviewer.sandbox.handover import InnerService
from reviewer.sandbox.modes import GATE_PORT, Sandbox
from reviewer.trail.memory import TrailRefused

REACHABILITY_TIMEOUT = 10.0


@dataclass
class RunSettings:
    """Everything `reviewer run` was told, already checked (`reviewer.run.commands` builds it)."""

    api: str
    command: Sequence[str]
    agent_token: str
    queue: str
    credentials: Credentials = field(default_factory=Credentials)
    withheld: Credentials | None = None
    """Every secret COMMAND must not hold (`every_secret` of the API's and the sandbox check's); the
    API's credentials when None."""
    sandbox: Sandbox = field(default_factory=lambda: Sandbox("none"))
    via: str = "record"
    dry_run_query: dict[str, str] | None = None
    document: ApiDocument | None = None
    audit: AuditSource | None = None
    """`--audit KIND:LOCATION`: the API's audit log (`api:/v1/audit` is read through the API itself)."""
    sandbox_api: SandboxCheck | None = None
    """`--sandbox-api`: the check run against a sandbox copy of the API before each server dry run."""
    request_id_header: str = DEFAULT_REQUEST_ID_HEADER
    title: str | None = None
    environment: str | None = None
    rerun: bool = False
    timeout: float = 900.0
    decision_timeout: float = 15 * 60.0
    poll_interval: float = 2.0
    max_revisions: int = 1
    """Plans COMMAND may make when reviewers ask for changes (`--max-revisions`); 1 ends the run."""
    trust: ApprovalTrust = field(default_factory=ApprovalTrust)
    """`--allowed-signers`, `--signatures`, `--ledger`: what an approval holds before it runs."""
    environ: Mapping[str, str] = field(default_factory=lambda: dict(os.environ))


def say(text: str) -> None:
    print(f"reviewer run: {text}", file=sys.stderr, flush=True)


def resolve_dry_run_query(settings: RunSettings) -> dict[str, str] | None:
    """The dry-run parameter of a server dry run: `--dry-run-param`, else what the document declares
    (with its value, or the value `--dry-run-param` would give). Never guessed: an API that does not
    know a parameter drops it and performs the write, so without one a server dry run is refused."""
    if settings.via != "server":
        return None
    if settings.dry_run_query:
        return settings.dry_run_query
    declared = settings.document.dry_run_query() if settings.document is not None else None
    if declared is None:
        where = "its OpenAPI document declares none" if settings.document is not None else "no --openapi"
        raise RunRefused(
            f"--via server needs the API's own dry-run parameter, and none is named ({where}); nothing "
            "was sent. Name the one the API documents with --dry-run-param NAME=VALUE (Kubernetes: "
            "--dry-run-param dryRun=All), or give its OpenAPI document with --openapi. An API without a "
            "dry run is dry-run with --via record (the default): its writes are only recorded"
        )
    name, value = next(iter(declared.items()))
    if value is None:
        raise RunRefused(
            f"the OpenAPI document declares the dry-run parameter {name} without its value; "
            f"give it with --dry-run-param {name}=VALUE"
        )
    return {name: value}


async def check_before_start(api: httpx.AsyncClient, queue: QueueClient, settings: RunSettings) -> None:
    """Refuse, before COMMAND starts, an API that does not answer and a queue that refuses the token."""
    try:
        await api.get("", timeout=REACHABILITY_TIMEOUT)
    except httpx.HTTPError as error:
        raise RunRefused(f"--api {settings.api} is not reachable ({type(error).__name__}: {error})") from None
    if settings.audit is not None:
        try:  # its first row only: a missing file or a refused URL is said now, not after the dry run
            await require_readable(settings.audit, api)
        except AuditUnavailable as unreadable:
            raise RunRefused(f"--audit: {unreadable}") from None
    try:
        whoami = await queue.whoami()
    except QueueError as error:
        raise RunRefused(f"the queue at {settings.queue} refuses this run: {error}") from None
    if whoami.role != "agent":
        raise RunRefused(
            f"REVIEWER_AGENT_TOKEN is a {whoami.role} token ({whoami.name}); "
            "a run proposes with an agent token"
        )


async def run(settings: RunSettings) -> int:
    """The command; its exit status. Each ending prints one line that says what happened."""
    try:
        return await _run(settings)
    except AuditUnavailable as unreadable:
        say(f"{unreadable}; the dry run was stopped and nothing was submitted")
        return 1
    except (SandboxKeptWrite, SandboxCheckFailed) as unproven:
        say(f"{unproven}; COMMAND did not start and nothing was submitted")
        return 1
    except (RunRefused, DryRunSpoiled, ChildFailed) as problem:
        say(f"{problem}; nothing was submitted" if not isinstance(problem, RunRefused) else str(problem))
        return 2 if isinstance(problem, RunRefused) else 1
    except WritesKept as kept:
        say(
            f"the dry run kept {kept.writes_kept} write(s): the API ignored the dry-run parameter and wrote "
            "for real; nothing was submitted. Check --dry-run-param, or use --via record"
        )
        return 1
    except QueueError as error:
        say(f"the queue failed: {error}")
        return 1


async def _run(settings: RunSettings) -> int:
    dry_run_query = resolve_dry_run_query(settings)
    api = httpx.AsyncClient(
        base_url=settings.api,
        headers=settings.credentials.headers,
        auth=settings.credentials.auth,
        follow_redirects=False,
        timeout=60.0,
    )
    queue = QueueClient(settings.queue, settings.agent_token)
    async with api, queue:
        await check_before_start(api, queue, settings)
        command_name = Path(settings.command[0]).name
        title = settings.title or " ".join(settings.command)[:200]
        backend_options: dict[str, Any] = {"dry_run_query": dry_run_query} if dry_run_query else {}
        gate = Gate(
            api=api,
            queue=queue,
            backend=settings.via,
            audit=settings.audit,
            sandbox=settings.sandbox_api,
            request_id_header=settings.request_id_header,
            agent=Agent(name=f"run:{command_name}"[:128]),
            target=Target(api=api.base_url.host, base_url=settings.api, environment=settings.environment),
            poll_interval=settings.poll_interval,
            decision_timeout=settings.decision_timeout,
            patience=Patience(say=lambda line: say(safe_text(line))),
            allowed_signers=settings.trust.allowed_signers,
            signatures_required=settings.trust.signatures_required,
            ledger=settings.trust.ledger,
            **backend_options,
        )
        proposal_id = new_proposal_id(title)
        http_gate = HttpGate(
            api,
            settings.api,
            settings.document,
            aws_api_of(settings.credentials.auth),
            own_headers=(settings.request_id_header,),
        )
        async with gate_endpoint(http_gate, settings.sandbox) as (gate_url, inner_services):
            environment = child_environment(
                settings.environ,
                api_url=gate_url,
                proposal_id=proposal_id,
                withheld=(settings.withheld or settings.credentials).from_env,
                secrets=(settings.withheld or settings.credentials).secrets,
            )
            if settings.sandbox.allowed_net:
                environment.update(proxy_environment(f"http://127.0.0.1:{EGRESS_PORT}"))

            def child(feedback: Feedback | None = None) -> Awaitable[ChildExit]:
                return run_child(
                    settings.command,
                    with_feedback_env(environment, feedback),
                    timeout=settings.timeout,
                    stop=http_gate.stop,
                    sandbox=settings.sandbox,
                    inner_services=inner_services,
                )

            return await plan_until_decided(gate, http_gate, child, settings, title, proposal_id)


@asynccontextmanager
async def gate_endpoint(
    http_gate: HttpGate, sandbox: Sandbox
) -> AsyncIterator[tuple[str, tuple[InnerService, ...]]]:
    """The gate for COMMAND: the URL it is given, and the services served on its own loopback each
    time it runs (the gate, and `--allow-net`'s proxy), where it has a network of its own; elsewhere
    the gate is served here, on a loopback port behind a secret, for the whole run."""
    if not sandbox.private_network:
        async with serving(http_gate) as gate_url:
            yield gate_url, ()
        return
    services = [gate_service(http_gate, GATE_PORT)]
    if sandbox.allowed_net:
        proxy = EgressProxy(sandbox.allowed_net)
        services.append(InnerService(EGRESS_PORT, lambda listener: serving_egress(proxy, listener)))
    yield f"http://127.0.0.1:{GATE_PORT}", tuple(services)


Child = Callable[[], Awaitable[ChildExit]]
"""COMMAND started once more against the gate, to its end."""
ReplanningChild = Callable[[Feedback | None], Awaitable[ChildExit]]
"""COMMAND started against the gate with the reviewer's feedback, if any, to its end."""


async def plan_until_decided(
    gate: Gate,
    http_gate: HttpGate,
    child: ReplanningChild,
    settings: RunSettings,
    title: str,
    proposal_id: str,
) -> int:
    """Dry-run, submit and wait; when a reviewer asks for changes and `--max-revisions` allows another
    plan, dry-run COMMAND again with their words and submit it as the next revision. The run (real
    run, `--rerun`'s COMMAND included) is of the approved revision, with that revision's feedback."""

    async def attempt(replan: Replan) -> int:
        feedback = replan.feedback

        def planned() -> Awaitable[ChildExit]:
            return child(feedback)

        http_gate.writes_seen = http_gate.write_bytes = 0  # each plan has the whole budget
        proposal = await dry_run(gate, http_gate, planned, settings, title, proposal_id, replan.revision)
        if proposal is None:
            return 0
        return await decide_and_run(gate, http_gate, proposal, planned, settings)

    def plans_again(asked: Feedback) -> None:
        revision = asked.revision + 1
        say(
            f"{safe_text(str(asked))}; COMMAND plans again with {FEEDBACK_ENV} "
            f"(revision {revision}, plan {revision} of at most {settings.max_revisions})"
        )

    try:
        return await until_decided(attempt, Replan(settings.max_revisions), plans_again)
    except ChangesRequested as changes:
        asked = Feedback.from_request(changes)
        say(
            f"{safe_text(str(asked))}; nothing ran (--max-revisions {settings.max_revisions}: "
            "COMMAND does not plan again)"
        )
        return 1


def failed_note(ended: ChildExit, settings: RunSettings) -> str:
    """What the sandbox's network let COMMAND reach, after it exited non-zero on its own."""
    return settings.sandbox.network_note() if ended.returncode not in (0, None) else ""


async def dry_run(
    gate: Gate,
    http_gate: HttpGate,
    child: Child,
    settings: RunSettings,
    title: str,
    proposal_id: str,
    revision: int = 1,
) -> Proposal | None:
    """COMMAND once against the gate in dry-run mode; the plan it made, or None when it wrote nothing."""
    recording = gate.recorder()
    await recording.start()
    http_gate.mode = DryMode(recording, watch_kept=settings.via == "server")
    try:
        ended = await child()
    finally:
        http_gate.mode = None
    await recording.finish()
    if http_gate.spoiled is not None:
        raise DryRunSpoiled(f"the dry run was stopped: {http_gate.spoiled}")
    if not ended.ok:
        raise ChildFailed(f"{ended.describe(settings.timeout)} in the dry run{failed_note(ended, settings)}")
    if not recording.calls:
        say("COMMAND made no write: there is no plan to review, nothing was submitted")
        return None
    window = recording.audit_match
    if window is not None and gate.audit is not None:
        carried = "; the plan carries the alarm" if window.unplanned else ""
        say(alarm_line(window, gate.audit) + carried)
        for unplanned in window.unplanned:
            say(safe_text(f"unplanned during the dry run: {unplanned_text(unplanned)}"))
    proposal = gate.propose(recording, title=title, proposal_id=proposal_id, revision=revision)
    try:
        scan_proposal(dumps(proposal), "the plan")
    except ProposalError as error:
        raise DryRunSpoiled(f"the plan passes a proposal limit: {error}") from None
    return proposal


async def decide_and_run(
    gate: Gate, http_gate: HttpGate, proposal: Proposal, child: Child, settings: RunSettings
) -> int:
    submission = await gate.submit(proposal)
    state = await gate.status(submission.proposal_id)
    whom = "a reviewer" if state.approvals_required <= 1 else f"{state.approvals_required} reviewers"
    say(
        f"plan {submission.proposal_id} revision {submission.revision} ({len(proposal.calls)} calls, "
        f"digest {submission.plan_sha256[:12]}) waits at {settings.queue} for {whom} to decide: "
        f"reviewer review {submission.proposal_id}"
    )
    try:
        approval = await gate.wait(submission)
    except ProposalRejected as rejected:
        because = f": {rejected.reason}" if rejected.reason else " (no reason given)"
        say(f"rejected by {rejected.decided_by or 'a reviewer'}{because}; nothing ran")
        return 1
    except ChangesRequested:
        raise  # `plan_until_decided` plans again or ends the run
    except NoApproval as refused:
        say(safe_text(f"not approved: {refused}"))
        return 1
    if http_gate.late_requests:
        say(
            f"{safe_text(http_gate.late_requests[0])} reached the gate after the dry run ended (a process "
            "COMMAND left behind?); nothing was run, the approval stays unused"
        )
        return 1

    async def rerun() -> None:
        execution = ACTIVE_RUN.get()
        assert execution is not None
        http_gate.mode = RealMode(execution)
        try:
            ended = await child()
        finally:
            http_gate.mode = None
        if not ended.ok and getattr(execution, "stop", None) is None:
            raise ChildFailed(
                f"{ended.describe(settings.timeout)} in the real run{failed_note(ended, settings)}"
            )

    try:
        execution = await gate.execute(approval, task=rerun if settings.rerun else None)
    except RunStopped as stopped:
        execution = stopped.execution
    except (NoApproval, LedgerError, TrailRefused) as refused:  # this executor's own word: one line
        say(safe_text(f"not run: {refused}"))
        return 1
    status = report(gate, execution, approval.approved_by)
    await report_audit(gate, execution)
    return status


async def report_audit(gate: Gate, execution: Execution) -> None:
    """With an audit source, the summary line after the real run (docs/design.md, "Verifying against audit
    logs"), and each write it shows that no approved call made (the exit status stays the run's own:
    `reviewer verify` is the check)."""
    if gate.audit is None:
        return
    result = gate.audit_run(execution)
    if result is None:
        say(f"audit: {gate.audit.name} could not be read; the run is not verified against it")
        return
    for unplanned in result.unplanned:
        say(safe_text(f"unplanned: {unplanned_text(unplanned)}"))
    if not result.complete:
        say(f"audit: incomplete, {gate.audit.name} cannot vouch for this run")
    say(result.summary)


def report(gate: Gate, execution: Execution, approved_by: str) -> int:
    """One line for the run, one for its verification; 0 only when every approved call succeeded."""
    verification = gate.verify(execution)
    checked = "against the plan" if gate.audit is not None else "against the plan (no --audit)"
    if execution.ok:
        say(
            f"approved by {approved_by}; all {len(execution.executed)} calls succeeded; verified {checked}: "
            f"{verification.summary}"
        )
        return 0
    failed = [call for call in execution.executed if call.answer.status != "ok"]
    what = "; ".join(
        f"call {call.seq} {call.tool} answered {call.answer.http_status or call.answer.status}"
        + (f" ({call.answer.message[:200]})" if call.answer.message else "")
        for call in failed
    )
    if execution.stop is not None:
        what = "; ".join(
            filter(None, [what, f"stopped at call {execution.stop.position}: {execution.stop.reason}"])
        )
    if execution.failure is not None:
        what = "; ".join(filter(None, [what, execution.failure]))
    if not what:
        what = f"{len(execution.executed)} of {len(execution.plan)} calls ran ({execution.ended})"
    say(
        f"approved by {approved_by}, but not every approved call succeeded: {what}; verified {checked}: "
        f"{verification.summary}"
    )
    return 1
