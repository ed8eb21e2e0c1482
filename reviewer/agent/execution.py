"""The real run: only the approved plan, each of its calls sent at most once, checked before it leaves.

By default the run *replays* the approved calls (`Execution.replay`): it sends them in order, each
placeholder resolved from the real answer of the call it names, without asking the model again. Or
the agent's task runs again for real (`Execution.run(task)`: a fresh sample, which may choose other
calls). Either way every call passes the same gate before it is sent:
- plan positions are taken one at a time (a lock held until the answer is in), so concurrent tool
  calls (a model's parallel tool calls, `asyncio.gather`) are serialized in the order they arrive and
  never match the same plan call twice: the writes are a prefix of the plan, each at most once;
- the call must be the plan's call at that position (`reviewer.plan.matching`), or the run stops there and
  nothing after it is sent;
- the request, as httpx will send it, must stay under the approved base URL (no absolute URL, no
  `//host`, no dot segments, not even with path parameters such as `..;`);
- a redirect is never followed, whatever the runner's client says: a 3xx is the call's answer, and
  the run stops there;
- a write tool called after the run ended (a task spawned inside it) is refused.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Sequence
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import cached_property
from typing import Any, Final, NoReturn

import httpx

from reviewer.agent.audit import DEFAULT_AUDIT_READ_TIMEOUT, verify_after_run
from reviewer.agent.backends import answer_from_response, build_request, is_live_client
from reviewer.agent.errors import (
    LiveClientRequired,
    NotApproved,
    NoTarget,
    OffTarget,
    PlanStop,
    RunEnded,
    RunStopped,
    TargetMismatch,
    WindowClosed,
)
from reviewer.agent.http_values import CallAnswer, HttpRequest, new_request_id
from reviewer.agent.runs import RecordedCall, running
from reviewer.agent.tools import GatedTool, WriteTool, call_maybe_async, plain_result, spec_of
from reviewer.audit.matching import AuditMatch
from reviewer.audit.registry import AuditSource
from reviewer.plan.bodies import BodyError
from reviewer.plan.dry_run_params import without_dry_run_params
from reviewer.plan.exact_bodies import filled
from reviewer.plan.hosts import destination, dot_segments, fully_unquoted
from reviewer.plan.matching import MISSING, FieldChange, match_call, plain
from reviewer.plan.minted import Use, hard_coded
from reviewer.plan.placeholders import ABSENT, field_of, from_results, placeholders_in, references_in, resolve
from reviewer.plan.proposal import Call, Proposal, plan_sha256
from reviewer.plan.request_headers import HeaderError
from reviewer.plan.sanitize import clip
from reviewer.queue.messages import AuditVerification, RunEnding, SentRequestId

DEFAULT_REQUEST_ID_HEADER: Final = "X-Request-Id"
"""The header each real write carries its own request id in; `Audit-ID` for Kubernetes (its audit
events then carry it as `auditID`), `Idempotency-Key` for an API that takes one (Stripe logs it)."""

API_REQUEST_ID_HEADERS: Final = (
    "request-id",
    "x-request-id",
    "x-amzn-requestid",
    "x-amz-request-id",
    "audit-id",
    "x-correlation-id",
)
"""Where APIs put their own id of a request in the answer (Stripe, proxies, AWS, Kubernetes), in order."""


def api_request_id(headers: httpx.Headers) -> str | None:
    """The API's own id of the request it answered, from the first header of `API_REQUEST_ID_HEADERS`."""
    for name in API_REQUEST_ID_HEADERS:
        value: str | None = headers.get(name)
        if value:
            return value[:500]
    return None


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


def _url_key(url: httpx.URL) -> tuple[str, str, int | None, str, bytes]:
    """What makes two base URLs the same API: where they reach (`reviewer.plan.hosts.destination`,
    the one answer the policy and the review screen give too), path, query."""
    reached = destination(str(url))
    return (reached.scheme, reached.host, reached.port, url.path.rstrip("/"), url.query)


def same_base_url(approved: str, given: httpx.URL | str) -> bool:
    """Whether a client on `given` talks to the API the approved target names; a URL that does not
    parse matches nothing."""
    try:
        return _url_key(httpx.URL(approved)) == _url_key(httpx.URL(given))
    except httpx.InvalidURL:
        return False


def off_target(path: str, url: httpx.URL, approved: str) -> str | None:
    """Why a request for `path`, sent to `url`, would leave the approved base URL, or None.

    `path` must be relative to the base URL (one leading `/`, no scheme, no `//host`), and `url`, the
    URL httpx builds from it, must stay under the approved one. Dot segments are refused outright,
    percent-encoded or not, rather than normalised: a server or proxy may resolve them after the
    check and land outside the approved path.
    """
    if not path.startswith("/") or path.startswith("//"):
        return f"its path {path[:200]!r} is not relative to the base URL (it must start with a single /)"
    try:
        base = httpx.URL(approved)
    except httpx.InvalidURL:
        return f"the approved base URL {approved!r} does not parse"
    if _url_key(url)[:3] != _url_key(base)[:3]:
        return f"it goes to {url.scheme}://{url.netloc.decode('ascii', 'replace')}, not to {approved}"
    path = url.raw_path.split(b"?", 1)[0].decode("ascii", "replace")
    if reason := dot_segments(path):
        return reason
    path = fully_unquoted(path)
    prefix = base.path.rstrip("/")
    if not (path == prefix or path.startswith(prefix + "/")):
        return f"its path {path!r} is outside the approved {prefix or '/'}"
    return None


def check_target(
    approval: Approval, client: httpx.AsyncClient | None, *, allow_any_target: bool = False
) -> None:
    """Refuse, before anything runs, a client that is not live or not on the approved target.

    A plan without `target.base_url` runs only when the runner says so (`allow_any_target`): its
    requests could not be checked otherwise. A plan of vendor SDK calls alone (no HTTP request) needs
    no client: the SDK holds its own.
    """
    if client is None and all(call.request is None for call in approval.proposal.calls):
        return
    if not isinstance(client, httpx.AsyncClient) or not is_live_client(client):
        raise LiveClientRequired("a real run")
    approved_url = approval.proposal.target.base_url
    if approved_url is None:
        if not allow_any_target:
            raise NoTarget(approval.proposal_id, approval.revision)
    elif not same_base_url(approved_url, client.base_url):
        raise TargetMismatch(approval.proposal_id, approval.revision, approved_url, str(client.base_url))


def _describe(change: FieldChange) -> str:
    if change.new is MISSING:
        return f"{change.path} is in the plan but not in this call"
    if change.old is MISSING:
        return f"{change.path} is in this call but not in the plan"
    return f"{change.path}: plan {change.old!r}, this call {change.new!r}"


_NO_ANSWER = CallAnswer(
    "unknown",
    None,
    "no answer: the run ended while the request was in flight; it may have been performed",
    None,
)

_NOT_SENT: tuple[type[BaseException], ...] = (
    httpx.ConnectError,
    httpx.ConnectTimeout,
    httpx.PoolTimeout,
    httpx.UnsupportedProtocol,
    httpx.ProxyError,
    httpx.LocalProtocolError,
    httpx.InvalidURL,
    ConnectionRefusedError,
)
"""Failures that happen before a request leaves: the API cannot have performed it."""


def failed_answer(error: BaseException) -> CallAnswer:
    """A write that raised instead of answering: `error` when it cannot have left (no connection was
    made), else `unknown`: a timeout or a dropped connection after the request went out says nothing
    of whether the API performed it."""
    words = f"{type(error).__name__}: {error}"
    if isinstance(error, _NOT_SENT):
        return CallAnswer("error", None, f"{words} (not sent)", None)
    return CallAnswer(
        "unknown", None, f"{words}; the request was sent and no answer came: it may have been performed", None
    )


def utc_now_text() -> str:
    """Now, UTC, as the report writes a time: `2026-12-02T01:00:03.123456Z`."""
    return datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass
class Execution:
    """A real run in progress, then done: what ran, where it stopped, how it ended, what the audit kept."""

    approval: Approval
    client: httpx.AsyncClient | None
    audit: AuditSource | None = None
    """The API's audit log: the run is held against it call by call, by request id (`read_audit`)."""
    allow_any_target: bool = False
    claim_id: str | None = None
    """The queue's claim this run holds (None for a run without a queue); its report names it."""
    executed: list[RecordedCall] = field(default_factory=list)
    """The calls sent to the API, in order, each with the answer it got (or `_NO_ANSWER`)."""
    stop: PlanStop | None = None
    ended: RunEnding | None = None
    failure: str | None = None
    """What the task, the framework or a cancellation raised, when that ended the run."""
    real_results: dict[int, Any] = field(default_factory=dict)
    """seq of a plan call -> the result its real write answered: where placeholders take their values."""
    write_requests: int = 0
    report_key: str = field(default_factory=lambda: f"execution-{uuid.uuid4()}")
    """The Idempotency-Key every report of this run carries: a retried report is stored once."""
    request_id_header: str = DEFAULT_REQUEST_ID_HEADER
    """The header each real HTTP write carries a fresh request id in (`DEFAULT_REQUEST_ID_HEADER`)."""
    audit_match: AuditMatch | None = None
    """The run against the audit source its runner was given, read after the last call (docs/design.md,
    "Verifying against audit logs")."""
    audit_verification: AuditVerification | None = None
    """That verification as the report carries it: the source's name, each call's verdict, the writes
    nobody approved; or why the source could not be read."""
    window_closes: float | None = None
    """When the change window this run was claimed in closes, on `monotonic` (None: no window ends it):
    the queue said how long it stays open, by its own clock, and no write is sent after that."""
    window_name: str | None = None
    monotonic: Callable[[], float] = time.monotonic
    _lock: asyncio.Lock = field(init=False, repr=False, default_factory=asyncio.Lock)
    _closed: bool = field(init=False, repr=False, default=False)

    def __post_init__(self) -> None:
        check_target(self.approval, self.client, allow_any_target=self.allow_any_target)

    @property
    def plan(self) -> Sequence[Call]:
        return self.approval.proposal.calls

    @property
    def writes_kept(self) -> int | None:
        """The run's writes the audit log shows (as sent, or differing), once read (`read_audit`); None
        before, or without one."""
        if self.audit_match is None:
            return None
        return sum(call.verdict in ("matched", "differs") for call in self.audit_match.calls)

    @property
    def unexecuted(self) -> list[Call]:
        """Plan calls the run never reached (it stopped, or the fresh sample chose fewer calls)."""
        return list(self.plan[len(self.executed) :])

    @property
    def real_values(self) -> dict[str, Any]:
        """Each placeholder of the plan that this run resolved -> the real value it took."""
        found: dict[str, Any] = {}
        for call in self.plan:
            for reference in references_in([call.args, plain(call.request)]):
                value = field_of(self.real_results.get(reference.seq, ABSENT), reference.field)
                if value is not ABSENT:
                    found[reference.text()] = value
        return found

    @property
    def outcome_unknown(self) -> list[RecordedCall]:
        """Calls that were sent and never answered: the API may have performed them."""
        return [call for call in self.executed if call.answer.status == "unknown"]

    @property
    def ok(self) -> bool:
        """Every approved call was sent and answered with success."""
        return self.ended == "completed" and all(call.answer.status == "ok" for call in self.executed)

    # running

    async def run(self, work: Callable[[], Awaitable[Any]]) -> BaseException | None:
        """Run `work` (the agent's task, or `replay`) as this real run; return what ended it early.

        Nothing escapes: a stop, an exception from the task or framework, even a cancellation, is
        recorded (`ended`, `failure`) and returned, so the caller can report the run before raising.
        """
        error: BaseException | None = None
        try:
            async with running(self, dry=False):
                await work()
        except BaseException as caught:  # recorded and handed back to be raised
            # A stop of this run is its record, not an error, even wrapped by a framework that turns a
            # tool's exception into its own (the OpenAI Agents SDK raises UserError from it).
            if self.stop is None or not _caused_by_stop(caught):
                error = caught
        self._end(error)
        return error

    async def replay(self, tools: Iterable[WriteTool | GatedTool] = ()) -> None:
        """Send the approved calls in order, placeholders resolved from this run's real answers.

        A call whose write tool is in `tools` is rebuilt by the tool from its resolved arguments (and
        must still be the plan's request); any other is sent as the plan's own request. The run stops
        after the first call the API refuses or fails: later calls may depend on it.
        """
        by_name = {spec.name: spec for spec in map(spec_of, tools)}
        for planned in self.plan:
            async with self._lock:
                position = self._next_position(planned.tool)
                args = resolve(plain(planned.args) or {}, from_results(self.real_results))
                tool = by_name.get(planned.tool)
                request: HttpRequest | None
                if tool is not None:
                    request = tool.request_for(args) if tool.sends_http else None
                elif planned.request is not None:
                    request = self._planned_request(planned)
                else:
                    self._stop_at(
                        position,
                        planned.tool,
                        "the plan has no request for it; pass its write tool to replay it",
                    )
                self._require_planned(position, planned.tool, planned.effect, args, request)
                answer = await self._send(position, planned, args, (), request, tool)
            if self.stop is not None:
                return
            if answer.status != "ok" and position < len(self.plan):
                self.stop = PlanStop(
                    position + 1,
                    self.plan[position].tool,
                    f"call {position} ({planned.tool}) was answered {answer.http_status or answer.status}"
                    f"{': ' + answer.message if answer.message else ''}, and later calls may depend on it",
                )
                return

    async def perform(
        self, tool: WriteTool, arguments: dict[str, Any], dropped: tuple[str, ...]
    ) -> CallAnswer:
        """A write tool called by the agent's task during the run: the next plan call, or a stop."""
        async with self._lock:
            position = self._next_position(tool.name)
            request = tool.request_for(arguments) if tool.sends_http else None
            self._require_planned(position, tool.name, tool.effect, arguments, request)
            return await self._send(position, self.plan[position - 1], arguments, dropped, request, tool)

    def _next_position(self, tool_name: str) -> int:
        if self._closed:
            raise RunEnded(tool_name)
        position = len(self.executed) + 1
        if self.stop is not None:
            raise PlanStop(position, tool_name, f"the run already stopped at call {self.stop.position}")
        return position

    def _planned_request(self, planned: Call) -> HttpRequest:
        assert planned.request is not None
        real = from_results(self.real_results)
        request = plain(planned.request)
        return HttpRequest(
            request["method"],
            resolve(request["path"], real),
            resolve(without_dry_run_params(request.get("query")), real) or None,
            resolve(request.get("body"), real),
            request.get("content_type"),
            resolve(request.get("headers"), real) or None,
            None
            if request.get("text") is None
            else filled(request.get("content_type"), request["text"], real),
        )

    def _stop_at(self, position: int, tool_name: str, reason: str, actual: Any = None) -> NoReturn:
        expected = self.plan[position - 1] if position <= len(self.plan) else None
        self.stop = PlanStop(position, tool_name, reason, expected, actual)
        raise self.stop

    def _require_planned(
        self,
        position: int,
        tool_name: str,
        effect: str,
        arguments: dict[str, Any],
        request: HttpRequest | None,
    ) -> None:
        """Stop the run unless this call is the approved plan's call at this position."""
        reason = self._mismatch(position, tool_name, effect, arguments, request)
        if reason is not None:
            self._stop_at(position, tool_name, reason, {"tool": tool_name, "args": arguments})

    def _mismatch(
        self,
        position: int,
        tool_name: str,
        effect: str,
        arguments: dict[str, Any],
        request: HttpRequest | None,
    ) -> str | None:
        if position > len(self.plan):
            return f"the approved plan has {len(self.plan)} calls; call {position} is not in it"
        expected = self.plan[position - 1]
        if expected.tool != tool_name:
            return f"the plan's call {position} is {expected.tool} (seq {expected.seq}), not {tool_name}"
        if expected.effect != effect:
            return f"the plan's call {position} has effect {expected.effect}, this one {effect}"
        parts = [arguments] if request is None else [arguments, request.path, request.query, request.body]
        sent = placeholders_in(parts)
        if sent:
            return f"this call still holds {', '.join(sorted(sent))}; a placeholder is never sent"
        if request is None and expected.request is not None:
            return f"the plan's call {position} is an HTTP request; this {tool_name} sends none"
        real_request = request.to_proposal() if request is not None else None
        match = match_call(expected, arguments, real_request, self.real_results)
        if match.unresolved:
            return (
                f"the plan's call {position} depends on {', '.join(sorted(match.unresolved))}, "
                "which no real call of this run produced"
            )
        if match.differences:
            return "; ".join(_describe(change) for change in match.differences)
        return self._minted_elsewhere(expected)

    @cached_property
    def _hard_coded(self) -> dict[int, list[Use]]:
        """Plan calls that carry, as written, a value only the dry run minted (a hand-written plan's
        `"mergedInto": "tk-4"`), by seq: read once, when the first call is checked."""
        via = self.approval.proposal.dry_run.via
        return {call.seq: uses for call, uses in hard_coded(self.plan, via)}

    def _minted_elsewhere(self, planned: Call) -> str | None:
        """Why `planned` would write to a resource the dry run only imagined, or None: it carries a
        value the dry run minted, and this run's own answer for that field gave another."""
        for use in self._hard_coded.get(planned.seq, ()):
            answered = [
                field_of(self.real_results.get(minted.reference.seq, ABSENT), minted.reference.field)
                for minted in use.minted
                if minted.reference is not None
            ]
            if use.value not in answered:
                given = ", ".join(repr(value) for value in answered if value is not ABSENT)
                real = clip(given or "none", 120)
                return (
                    f"{use.sentence(planned.seq, planned.tool)}, and this run's own answer gave {real}: "
                    "sent as approved it would write to another resource"
                )
        return None

    async def _send(
        self,
        position: int,
        planned: Call,
        arguments: dict[str, Any],
        dropped: tuple[str, ...],
        request: HttpRequest | None,
        tool: WriteTool | None,
    ) -> CallAnswer:
        """Put one approved call on the wire (or through its vendor SDK), exactly as checked; recorded
        before it leaves, so a run cancelled while waiting for the answer still reports that the call
        may have been made."""
        self._require_window(position, planned.tool)
        if request is None:
            if tool is None or tool.write is None:
                self._stop_at(position, planned.tool, "the plan has no request for it; pass its write tool")
            return await self._write_through_sdk(planned, arguments, dropped, tool.write)
        if self.client is None:
            self._stop_at(position, planned.tool, "it is an HTTP request and this run was given no client")
        try:
            built = build_request(self.client, request)
        except (HeaderError, BodyError) as error:
            self._stop_at(position, planned.tool, f"it cannot be sent as approved: {error}")
        # Without an approved base URL (allow_any_target), the client's own is the one not to leave.
        approved_url = self.approval.proposal.target.base_url or str(self.client.base_url)
        reason = off_target(request.path, built.url, approved_url)
        if reason is not None:
            self.stop = OffTarget(position, planned.tool, reason, planned, {"url": str(built.url)})
            raise self.stop
        record = self._in_flight(planned, arguments, dropped, request)
        record.request_id = built.headers[self.request_id_header] = new_request_id()
        record.sent_at = utc_now_text()
        try:
            # Never a redirect, whatever the runner's client says: its Location is the API's word, and
            # following it would re-send this approved write, body and credential, wherever it points.
            response = await self.client.send(built, follow_redirects=False)
        except httpx.HTTPError as error:
            record.answer = failed_answer(error)
        else:
            record.answer = answer_from_response(response)
            record.api_request_id = api_request_id(response.headers)
            if response.is_redirect:
                self._stop_after_redirect(position, planned, record.answer)
        if record.answer.result is not None:
            self.real_results[planned.seq] = plain(record.answer.result)
        return record.answer

    def _require_window(self, position: int, tool_name: str) -> None:
        """Stop before this write when the change window the run was claimed in has closed."""
        if self.window_closes is None or self.monotonic() < self.window_closes:
            return
        window = f"the change window {self.window_name!r}" if self.window_name else "its change window"
        self.stop = WindowClosed(
            position,
            tool_name,
            f"{window} closed during the run (by the queue's clock); this write and the ones after it "
            "were not sent: submit them again for a run inside a window",
        )
        raise self.stop

    def _stop_after_redirect(self, position: int, planned: Call, answer: CallAnswer) -> None:
        """A 3xx is the call's answer and the end of the run: nothing after it is sent."""
        following = self.plan[position] if position < len(self.plan) else planned
        self.stop = PlanStop(
            position + 1, following.tool, f"call {position} ({planned.tool}) was {answer.message}"
        )

    async def _write_through_sdk(
        self, planned: Call, arguments: dict[str, Any], dropped: tuple[str, ...], write: Callable[..., Any]
    ) -> CallAnswer:
        """The real write of an SDK tool: its answer is ok, what it raises is the error, in its words."""
        record = self._in_flight(planned, arguments, dropped, None)
        record.sent_at = utc_now_text()
        try:
            result = plain(plain_result(await call_maybe_async(write, arguments)))
        except Exception as error:  # the SDK's failure is this call's answer
            transport = _transport_failure(error)
            record.answer = (
                CallAnswer("error", None, f"{type(error).__name__}: {error}", None)
                if transport is None
                else failed_answer(transport)
            )
        else:
            record.answer = CallAnswer("ok", None, None, result)
            if result is not None:
                self.real_results[planned.seq] = result
        record.answered_at = utc_now_text()
        return record.answer

    def _in_flight(
        self, planned: Call, arguments: dict[str, Any], dropped: tuple[str, ...], request: HttpRequest | None
    ) -> RecordedCall:
        """Record a call before it is sent, answered `_NO_ANSWER` until its answer is in: a run cancelled
        while waiting still reports that the call may have been made."""
        record = RecordedCall(
            seq=planned.seq,
            tool=planned.tool,
            effect=planned.effect,
            args=dict(arguments),
            request=request,
            answer=_NO_ANSWER,
            sent=request,
            dropped_args=dropped,
        )
        self.executed.append(record)
        self.write_requests += 1
        return record

    def _end(self, error: BaseException | None) -> None:
        self._closed = True
        if isinstance(error, asyncio.CancelledError):
            self.ended = "cancelled"
        elif error is not None:
            self.ended = "failed"
        elif self.stop is not None or self.unexecuted:
            self.ended = "stopped"
        else:
            self.ended = "completed"
        if error is not None:
            self.failure = f"{type(error).__name__}: {error}"

    async def start(self) -> None:
        """A real run sets nothing up: each call carries its own request id, which the log is read by."""

    async def finish(self, *, failed: bool = False) -> None:
        """A real run's log is read once the caller knows how it ended (`read_audit`), not here."""

    async def read_audit(self, timeout: float = DEFAULT_AUDIT_READ_TIMEOUT) -> None:
        """Hold the run against its audit source, call by call (`audit_match`), and keep what its
        report says of it (`audit_verification`); nothing without a source."""
        if self.audit is not None:
            self.audit_match, self.audit_verification = await verify_after_run(
                self, self.audit, self.client, timeout
            )

    # reading the result

    def executed_calls(self) -> list[Call]:
        """The real calls as proposal calls (seq = the plan call each one matched), for the queue."""
        return [call.to_call() for call in self.executed]

    def request_ids(self) -> list[SentRequestId]:
        """Each HTTP write's own request id and the API's, by seq, for the report."""
        found: list[SentRequestId] = []
        for call in self.executed:
            if call.request_id is None:
                continue
            entry = SentRequestId(seq=call.seq, header=self.request_id_header, request_id=call.request_id)
            if call.api_request_id is not None:
                entry["api_request_id"] = call.api_request_id
            if call.sent_at is not None:
                entry["sent_at"] = call.sent_at
            found.append(entry)
        return found

    def tool_spans(self) -> list[dict[str, Any]]:
        """Each tool write that is not an HTTP request (an SDK's, an MCP server's), by seq, with when it
        was sent and answered: the only thing that ties an audit log's writes to it."""
        return [
            {"seq": call.seq, "tool": call.tool, "sent_at": call.sent_at, "answered_at": call.answered_at}
            for call in self.executed
            if call.request is None and call.sent_at is not None
        ]

    def summary(self) -> str:
        """How the run ended and which calls ran, in one paragraph a log or an exception can carry."""
        ran = ", ".join(
            f"#{call.seq} {call.tool} {call.answer.http_status or call.answer.status}"
            for call in self.executed
        )
        text = f"the real run of {self.approval.proposal_id} revision {self.approval.revision} {self.ended}"
        if self.stop is not None:
            text += f" at call {self.stop.position}: {self.stop.reason}"
        if self.failure is not None:
            text += f" ({self.failure})"
        text += f"; sent {len(self.executed)} of {len(self.plan)} calls" + (f": {ran}" if ran else "")
        unknown = ", ".join(f"#{call.seq} {call.tool}" for call in self.outcome_unknown)
        if unknown:
            text += (
                f". Outcome unknown for {unknown}: sent, and no answer came, so the API may have performed "
                "it; check the API before running anything again"
            )
        return text

    def raise_for_stop(self) -> None:
        """Raise `RunStopped` unless every approved call was sent and answered with success."""
        if not self.ok:
            raise RunStopped(self, self.summary())


def _transport_failure(error: BaseException) -> BaseException | None:
    """The timeout or connection failure behind an SDK's exception (SDKs wrap httpx's own), if any:
    only that says the write may have happened; any other exception is the SDK's refusal."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, httpx.TransportError | TimeoutError | ConnectionError):
            return current
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return None


def _caused_by_stop(error: BaseException) -> bool:
    """Whether `error` is a `PlanStop`, or was raised from or while handling one."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        if isinstance(current, PlanStop):
            return True
        seen.add(id(current))
        current = current.__cause__ or current.__context__
    return False


@asynccontextmanager
async def real_run(
    approval: Approval,
    *,
    client: httpx.AsyncClient,
    audit: AuditSource | None = None,
    allow_any_target: bool = False,
) -> AsyncIterator[Execution]:
    """Run write tools for real inside the block, each one checked against the approved plan first.

    The block sees the flag off (real) and every other context keeps its own value. A `PlanStop`
    raised by a tool propagates out of the block; the `Execution` keeps what ran before it. A client
    that is not on the approved target raises before the block (`TargetMismatch`, `NoTarget`).
    This makes no claim and sends no report: `QueueAgent.execute` does both. Nor does it read the
    audit log: `await execution.read_audit()` after the block does.
    """
    execution = Execution(approval, client, audit, allow_any_target=allow_any_target)
    error: BaseException | None = None
    try:
        async with running(execution, dry=False):
            yield execution
    except BaseException as caught:
        error = caught
        raise
    finally:
        execution._end(None if isinstance(error, PlanStop) and execution.stop is not None else error)


async def execute_approved(
    task: Callable[[], Awaitable[Any]] | None,
    approval: Approval,
    *,
    client: httpx.AsyncClient | None,
    audit: AuditSource | None = None,
    tools: Iterable[WriteTool | GatedTool] = (),
    allow_any_target: bool = False,
    request_id_header: str = DEFAULT_REQUEST_ID_HEADER,
) -> Execution:
    """Run the approved plan for real without a queue: `task` again (re-sampling), or a replay when
    `task` is None. A stop is recorded in the result, not raised; anything else the task raised is
    raised again. `QueueAgent.execute` claims, reports and raises on any failure."""
    execution = Execution(
        approval, client, audit, allow_any_target=allow_any_target, request_id_header=request_id_header
    )
    error = await execution.run(task if task is not None else lambda: execution.replay(tools))
    if error is not None:
        raise error
    await execution.read_audit()
    return execution
