"""The real run: only an approved plan, checked call by call before each request leaves.

The agent's task runs again for real (a fresh sample, which may choose other calls). Before each
write is sent, it is compared with the approved plan's call at the same position; placeholders in
the plan are resolved from what the real run's earlier calls produced. The first call that is not
in the plan, or differs, stops the run before anything is sent, and nothing after it is sent either.
A client pointed at another API than the approved target's base URL is refused before the run starts.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

import httpx
import msgspec

from reviewer.agent.audit import HttpAuditLog, RunAudit
from reviewer.agent.backends import answer_from_response, is_live_client, send
from reviewer.agent.errors import LiveClientRequired, NotApproved, PlanStop, TargetMismatch
from reviewer.agent.flag import names_dry_run
from reviewer.agent.placeholders import placeholders_in, substitute
from reviewer.agent.runs import RecordedCall, produced_values, running
from reviewer.agent.tools import CallAnswer, HttpRequest, WriteTool
from reviewer.proposal import Call, Proposal, plan_sha256, same_json


@dataclass(frozen=True)
class Approval:
    """An approval of one revision's exact plan: the plan itself, its digest, and who approved it.

    Constructing one checks that the plan in hand is the plan the digest names, so a plan edited
    after approval cannot run under it. Get one from `QueueAgent.wait_for_decision`; `local_approval`
    exists only for demonstrations and tests that run without a queue.
    """

    proposal: Proposal
    plan_sha256: str
    approved_by: str
    expires_at: str | None = None

    def __post_init__(self) -> None:
        actual = plan_sha256(self.proposal)
        if actual != self.plan_sha256:
            raise NotApproved(
                self.proposal.proposal_id,
                self.proposal.revision,
                f"the plan in hand has digest {actual[:12]}…, the approval names {self.plan_sha256[:12]}…",
            )

    @property
    def proposal_id(self) -> str:
        return self.proposal.proposal_id

    @property
    def revision(self) -> int:
        return self.proposal.revision


def local_approval(proposal: Proposal, approved_by: str = "walkthrough (no queue)") -> Approval:
    """An approval made in-process, without a reviewer: for the walkthrough and tests only."""
    return Approval(proposal, plan_sha256(proposal), approved_by)


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _url_key(url: httpx.URL) -> tuple[str, str, int | None, str, bytes]:
    """What makes two base URLs the same API: scheme, host and port (default or not), path, query."""
    return (url.scheme, url.host, url.port or _DEFAULT_PORTS.get(url.scheme), url.path.rstrip("/"), url.query)


def same_base_url(approved: str, given: httpx.URL | str) -> bool:
    """Whether a client on `given` talks to the API the approved target names; a URL that does not
    parse matches nothing."""
    try:
        return _url_key(httpx.URL(approved)) == _url_key(httpx.URL(given))
    except httpx.InvalidURL:
        return False


def _plain(value: Any) -> Any:
    """JSON-equal values compare equal (a tuple and a list, a JSONFloat and a float)."""
    return msgspec.json.decode(msgspec.json.encode(value))


def _without_dry_run_names(query: Mapping[str, Any] | None) -> dict[str, Any]:
    """The plan's query as the real run sends it: a server dry run's own parameter is not part of it."""
    return {name: value for name, value in (query or {}).items() if not names_dry_run(name)}


def _differences(expected: Any, actual: Any, where: str) -> list[str]:
    """Which fields differ, by path, so a stop names what changed (not just that something did)."""
    if isinstance(expected, dict) and isinstance(actual, dict):
        found: list[str] = []
        for key in sorted(set(expected) | set(actual), key=str):
            if key not in actual:
                found.append(f"{where}.{key} is in the plan but not in this call")
            elif key not in expected:
                found.append(f"{where}.{key} is in this call but not in the plan")
            else:
                found += _differences(expected[key], actual[key], f"{where}.{key}")
        return found
    if not same_json(expected, actual):  # `true` is not `1`, though Python's == says it is
        return [f"{where}: plan {expected!r}, this call {actual!r}"]
    return []


@dataclass
class Execution:
    """A real run in progress, then done: what ran, where it stopped, and what the API's audit kept."""

    approval: Approval
    client: httpx.AsyncClient
    audit: HttpAuditLog | None = None
    executed: list[RecordedCall] = field(default_factory=list)
    stop: PlanStop | None = None
    real_values: dict[str, Any] = field(default_factory=dict)
    """Placeholder of the plan -> the value this run's real write produced for it."""
    write_requests: int = 0
    audit_lines: list[dict[str, Any]] = field(default_factory=list)
    audit_available: bool = False
    claim_id: str | None = None
    report_key: str = field(default_factory=lambda: f"execution-{uuid.uuid4()}")
    """The Idempotency-Key every report of this run carries: a retried report is stored once."""
    _run_audit: RunAudit = field(init=False, repr=False)

    def __post_init__(self) -> None:
        approved_url = self.approval.proposal.target.base_url
        if approved_url is not None and not same_base_url(approved_url, self.client.base_url):
            raise TargetMismatch(
                self.approval.proposal_id, self.approval.revision, approved_url, str(self.client.base_url)
            )
        self._run_audit = RunAudit(self.audit, self.client)

    @property
    def plan(self) -> Sequence[Call]:
        return self.approval.proposal.calls

    @property
    def writes_kept(self) -> int | None:
        return len(self.audit_lines) if self.audit_available else None

    @property
    def unexecuted(self) -> list[Call]:
        """Plan calls the run never reached (it stopped, or the fresh sample chose fewer calls)."""
        return list(self.plan[len(self.executed) :])

    def _check(
        self, position: int, tool: WriteTool, arguments: dict[str, Any], request: HttpRequest
    ) -> str | None:
        """Why this call may not be sent, or None when it is the approved plan's call at this position."""
        if position > len(self.plan):
            return f"the approved plan has {len(self.plan)} calls; call {position} is not in it"
        expected = self.plan[position - 1]
        if expected.tool != tool.name:
            return f"the plan's call {position} is {expected.tool} (seq {expected.seq}), not {tool.name}"
        if expected.effect != tool.effect:
            return f"the plan's call {position} has effect {expected.effect}, this one {tool.effect}"
        sent_placeholders = placeholders_in([arguments, request.path, request.query, request.body])
        if sent_placeholders:
            held = ", ".join(sorted(sent_placeholders))
            return f"this call still holds {held}; a placeholder is never sent"
        expected_args = substitute(expected.args or {}, self.real_values)
        unresolved = placeholders_in(expected_args)
        if expected.request is not None:
            unresolved |= placeholders_in(
                [expected.request.path, expected.request.query, expected.request.body]
            )
            unresolved -= set(self.real_values)
        if unresolved:
            return (
                f"the plan's call {position} depends on {', '.join(sorted(unresolved))}, "
                "which no real call of this run produced"
            )
        differences = _differences(_plain(expected_args), _plain(arguments), "args")
        if expected.request is not None:
            planned = expected.request
            differences += _differences(
                _plain(
                    {
                        "method": planned.method.upper(),
                        "path": substitute(planned.path, self.real_values),
                        "query": _without_dry_run_names(substitute(planned.query, self.real_values)),
                        "body": substitute(planned.body, self.real_values),
                    }
                ),
                _plain(
                    {
                        "method": request.method.upper(),
                        "path": request.path,
                        "query": dict(request.query or {}),
                        "body": request.body,
                    }
                ),
                "request",
            )
        if differences:
            return "; ".join(differences)
        return None

    async def perform(
        self, tool: WriteTool, arguments: dict[str, Any], dropped: tuple[str, ...]
    ) -> CallAnswer:
        position = len(self.executed) + 1
        if self.stop is not None:
            raise PlanStop(position, tool.name, f"the run already stopped at call {self.stop.position}")
        request = tool.request_for(arguments)
        reason = self._check(position, tool, arguments, request)
        if reason is not None:
            expected = self.plan[position - 1] if position <= len(self.plan) else None
            self.stop = PlanStop(
                position, tool.name, reason, expected, {"tool": tool.name, "args": arguments}
            )
            raise self.stop
        seq = self.plan[position - 1].seq
        self.write_requests += 1
        try:
            response = await send(self.client, request)
            answer = answer_from_response(response)
        except httpx.HTTPError as error:
            answer = CallAnswer("error", None, f"{type(error).__name__}: {error}", None)
        self.real_values.update(produced_values(tool, seq, answer.result))
        self.executed.append(
            RecordedCall.of(tool, seq, arguments, dropped, request=request, answer=answer, sent=request)
        )
        return answer

    async def _start(self) -> None:
        await self._run_audit.start()

    async def _finish(self) -> None:
        lines = await self._run_audit.kept(call.sent for call in self.executed)
        if lines is not None:
            self.audit_lines = lines
            self.audit_available = True

    def executed_calls(self) -> list[Call]:
        """The real calls as proposal calls (seq = the plan call each one matched), for the queue."""
        return [call.to_call() for call in self.executed]


@asynccontextmanager
async def real_run(
    approval: Approval, *, client: httpx.AsyncClient, audit: HttpAuditLog | None = None
) -> AsyncIterator[Execution]:
    """Run write tools for real inside the block, each one checked against the approved plan first.

    The block sees the flag off (real) and every other context keeps its own value. A `PlanStop`
    raised by a tool propagates out of the block; the `Execution` keeps what ran before it.
    A client whose base URL is not the approved target's raises `TargetMismatch` before the block.
    """
    if not isinstance(client, httpx.AsyncClient) or not is_live_client(client):
        raise LiveClientRequired("a real run")
    execution = Execution(approval, client, audit)
    async with running(execution, dry=False):
        yield execution


async def execute_approved(
    task: Callable[[], Awaitable[Any]],
    approval: Approval,
    *,
    client: httpx.AsyncClient,
    audit: HttpAuditLog | None = None,
) -> Execution:
    """Run `task` for real under `approval`; a stop is recorded in the result, not raised.

    This does not ask the queue; `QueueAgent.execute` does, and reports the run afterwards.
    """
    async with real_run(approval, client=client, audit=audit) as execution:
        try:
            await task()
        except PlanStop:
            if execution.stop is None:
                raise
    return execution
