"""Dry runs: record every write tool call through a backend, and turn the record into a v1 proposal."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from operator import attrgetter
from typing import Any, Protocol

import httpx

from reviewer.agent.audit import dry_run_window, require_readable, writes_kept
from reviewer.agent.backends import Backend, make_backend
from reviewer.agent.errors import MintedValueUnsafe, UnresolvablePlaceholder
from reviewer.agent.flag import run_scope
from reviewer.agent.http_values import CallAnswer, HttpRequest
from reviewer.agent.notes import dry_run_note
from reviewer.agent.placeholders import placeholder, substitute
from reviewer.agent.tools import ToolRunner, WriteTool, call_maybe_async, plain_result
from reviewer.audit.checks import alarm_line
from reviewer.audit.matching import AuditMatch
from reviewer.audit.registry import AuditSource, audit_source
from reviewer.plan.exact_bodies import filled
from reviewer.plan.minted import (
    InputValues,
    Minted,
    MintedIndex,
    kind_of,
    minted_fields,
    with_placeholders,
)
from reviewer.plan.placeholders import ABSENT, Reference, references_in, unresolvable_in
from reviewer.plan.proposal import (
    FORMAT_V1,
    Agent,
    Call,
    DryRun,
    Effect,
    Outcome,
    Proposal,
    SandboxProof,
    Target,
    raised_effect,
)

log = logging.getLogger(__name__)


class Run(ToolRunner, Protocol):
    """A runner with a beginning and an end: `start` before the first call, `finish` after the last
    (`failed` when the block ended by an exception or a cancellation, which it must not hide)."""

    async def start(self) -> None: ...

    async def finish(self, *, failed: bool = False) -> None: ...


@asynccontextmanager
async def running(run: Run, *, dry: bool) -> AsyncIterator[None]:
    """Start `run`, make it this context's active run with the flag at `dry`, and finish it at exit.

    It finishes even when the block raises, so what ran before the error is still counted; then it
    finishes as failed, and the error (or the cancellation) is what the caller gets.
    """
    await run.start()
    failed = True
    try:
        with run_scope(run, dry=dry):
            yield
        failed = False
    finally:
        await run.finish(failed=failed)


@dataclass
class RecordedCall:
    """One write tool call as it happened in a run.

    `request` is the request as the plan means it: placeholders stay placeholders, and a server dry
    run's query carries its dry-run parameter (as the proposal format's example shows). `sent` is what really
    reached the API, with concrete values, or None when nothing did.
    """

    seq: int
    tool: str
    effect: Effect
    args: dict[str, Any]
    request: HttpRequest | None
    answer: CallAnswer
    sent: HttpRequest | None = None
    dropped_args: tuple[str, ...] = ()
    request_id: str | None = None
    """A real HTTP write's own request id, sent under the run's request-id header (docs/design.md, "Verifying
    against audit logs")."""
    api_request_id: str | None = None
    """The API's own id for that request, from its answer's headers, when it gave one."""
    sent_at: str | None = None
    """When the write left, UTC: where an audit log without ids is searched for it."""
    answered_at: str | None = None
    """When a tool's write (not an HTTP request) answered, UTC: the log's writes from `sent_at` to here
    are the tool's, since nothing ties them to it but their time."""
    destructive: bool = False

    @classmethod
    def of(
        cls,
        tool: WriteTool,
        seq: int,
        arguments: Mapping[str, Any],
        dropped: tuple[str, ...],
        *,
        request: HttpRequest | None,
        answer: CallAnswer,
        sent: HttpRequest | None,
    ) -> RecordedCall:
        """The record of one call of `tool`, made the same way by dry and real runs."""
        return cls(
            seq=seq,
            tool=tool.name,
            # The method decides at least: a tool declared `update` that sends a DELETE is a delete.
            effect=raised_effect(tool.effect, request.method if request is not None else None),
            args=dict(arguments),
            request=request,
            answer=answer,
            sent=sent,
            dropped_args=dropped,
            destructive=tool.destructive,
        )

    def to_call(self) -> Call:
        return Call(
            seq=self.seq,
            tool=self.tool,
            effect=self.effect,
            args=dict(self.args),
            request=self.request.to_proposal() if self.request is not None else None,
            outcome=Outcome(
                status=self.answer.status,
                http_status=self.answer.http_status,
                message=self.answer.message,
                result=self.answer.result,
            ),
            destructive=self.destructive,
        )


def minted_by(
    tool: WriteTool, seq: int, request: HttpRequest | None, inputs: Any, answer: CallAnswer
) -> list[Minted]:
    """The values call `seq`'s dry-run answer holds that only a real write produces: every field of a
    create's (or a POST's) accepted answer that does not echo its input and is not declared stable,
    and any field the tool names in `produces`."""
    result = answer.result
    creates = tool.effect == "create" or (request is not None and request.method.upper() == "POST")
    found = (
        minted_fields(result, seq, InputValues(inputs), tool.stable)
        if creates and answer.status == "ok"
        else []
    )
    if isinstance(result, Mapping):
        named = {item.where for item in found}
        for name in tool.produces:
            if name not in named and name in result and kind_of(result[name]) is not None:
                found.append(Minted(result[name], Reference(name, seq), name))
    return found


def dry_result(tool: WriteTool, seq: int, shown: Any) -> Any:
    """The result the agent sees in a dry run (its minted values already placeholders), with each field
    the tool `produces` a placeholder even when the dry run answered none (record)."""
    if not tool.produces:
        return shown
    placeholders = {name: placeholder(name, seq) for name in tool.produces}
    if isinstance(shown, Mapping):
        return {**shown, **placeholders}
    return placeholders


@dataclass
class Recording:
    """A dry run in progress, then done: the calls, the counts, and the values dry writes produced."""

    backend: Backend
    client: httpx.AsyncClient | None = None
    """The API's client: a server dry run's backend sends through it, and an `api:` log is read with it."""
    audit: AuditSource | None = None
    """The API's audit log, read for the dry run's window: what the API kept of the gate's dry-run
    requests, and the writes someone else made meanwhile. Unreadable, it stops the dry run."""
    calls: list[RecordedCall] = field(default_factory=list)
    dry_values: dict[str, Any] = field(default_factory=dict)
    """Placeholder -> the value the backend produced for it, substituted into later requests it sees."""
    minted: MintedIndex = field(init=False, repr=False, default_factory=MintedIndex)
    """The values dry writes minted, by value: a later call carrying one records its placeholder."""
    stopped: MintedValueUnsafe | None = field(init=False, default=None)
    """Why this dry run cannot become a plan: a call carried a minted value no placeholder could stand
    for. `to_proposal` raises it."""
    writes_kept: int | None = None
    audit_match: AuditMatch | None = None
    """The audit source's reading of the dry run's window, once it finished."""
    tools: dict[str, WriteTool] = field(default_factory=dict)
    """The write tools this run saw, by name: what a replay needs to rebuild their calls."""
    _seqs_issued: int = field(init=False, repr=False, default=0)
    _seqs_by_path: dict[str, list[int]] = field(init=False, repr=False, default_factory=dict)
    """The seqs of the recorded calls, by request path: what `_depends_on` looks up without a scan."""
    started_at: datetime | None = None
    finished_at: datetime | None = None
    """The dry run's window, UTC: an API's audit log shows what else wrote meanwhile (docs/design.md,
    "Verifying against audit logs")."""
    sandbox_check: Callable[[], Awaitable[SandboxProof]] | None = None
    """Proves, before the dry run begins, that the API honours the dry-run parameter (a sandbox
    check); it raises when it cannot, and the dry run never starts."""
    sandbox_proof: SandboxProof | None = None
    """What the sandbox check proved, recorded with the plan."""

    @property
    def via(self) -> str:
        return self.backend.via

    @property
    def write_requests(self) -> int:
        return self.backend.write_requests

    @property
    def dry_run_request_ids(self) -> tuple[str, ...]:
        """The ids the backend sent its dry-run requests with (a server dry run's; none otherwise)."""
        return tuple(self.dry_run_requests)

    @property
    def dry_run_requests(self) -> dict[str, HttpRequest]:
        """Each dry-run request the backend sent, by the id it was sent with (a server dry run's)."""
        return dict(getattr(self.backend, "sent", {}))

    async def perform(
        self, tool: WriteTool, arguments: dict[str, Any], dropped: tuple[str, ...]
    ) -> CallAnswer:
        # Taken before the first await, so concurrent calls (parallel tool calls) get distinct seqs.
        # Checked before the seq is taken, so a refused call leaves no gap in the plan.
        seq = self._seqs_issued + 1
        planned: HttpRequest | None = tool.request_for(arguments) if tool.sends_http else None
        parts = [arguments] if planned is None else [arguments, *planned.parts()]
        unresolvable = unresolvable_in(parts, seq, range(1, seq))
        if unresolvable:
            raise UnresolvablePlaceholder(tool.name, seq, unresolvable[0].text())
        arguments, planned = self._named_minted(tool, seq, arguments, planned)
        self._seqs_issued = seq
        self.tools[tool.name] = tool
        recorded_request: HttpRequest | None = None
        sent: HttpRequest | None = None
        if planned is not None:
            answer, sent, recorded_request = await self._answer_http(planned)
        else:
            answer = await self._answer_sdk(tool, arguments)
        inputs = [arguments] if planned is None else [arguments, *planned.parts()]
        # What the backend saw (placeholders put in) counts as input too: a create that echoes an
        # earlier create's id mints nothing new.
        minted = minted_by(tool, seq, planned, [*inputs, substitute(inputs, self.dry_values)], answer)
        # An earlier minted value this answer repeats (a fake's update echoing `mergedInto`) is shown
        # to the agent as its placeholder too: a dry run's value never reaches the agent bare.
        shown, _ = self.minted.scan(with_placeholders(answer.result, minted), "answer")
        self.minted.add(minted)
        self.dry_values.update(
            {item.reference.text(): item.value for item in minted if item.reference is not None}
        )
        depends_on = self._depends_on(seq, arguments, planned)
        self.calls.append(
            RecordedCall.of(tool, seq, arguments, dropped, request=recorded_request, answer=answer, sent=sent)
        )
        if recorded_request is not None:
            self._seqs_by_path.setdefault(recorded_request.path, []).append(seq)
        return CallAnswer(
            answer.status,
            answer.http_status,
            answer.message,
            dry_result(tool, seq, shown),
            note=dry_run_note(self.via, answer, depends_on),
            dry_seq=seq,
        )

    def _named_minted(
        self, tool: WriteTool, seq: int, arguments: dict[str, Any], planned: HttpRequest | None
    ) -> tuple[dict[str, Any], HttpRequest | None]:
        """The call with each value an earlier dry write minted, found by value, recorded as its
        placeholder (the backend still gets the dry run's value). One that no placeholder can stand for
        stops the dry run: raised to the caller and kept, so the plan is never submitted."""
        if self.stopped is not None:
            raise self.stopped
        if not self.minted:
            return arguments, planned
        named_arguments, uses = self.minted.scan(arguments, "args")
        if planned is not None:
            path, path_uses = self.minted.scan(planned.path, "request.path", path=True)
            query, query_uses = self.minted.scan(planned.query, "request.query")
            body, body_uses = self.minted.scan(planned.body, "request.body")
            headers, header_uses = self.minted.scan(planned.headers, "request.headers")
            uses += path_uses + query_uses + body_uses + header_uses
            # A body that carried a dry value by value is written out from its fields in the real run:
            # its exact text holds the dry run's value where the plan holds the placeholder.
            text = None if body_uses else planned.text
            planned = replace(planned.with_parts(path, query, body), headers=headers, text=text)
        unsafe = next((use for use in uses if use.problem is not None), None)
        if unsafe is not None:
            self.stopped = MintedValueUnsafe(unsafe.sentence(seq, tool.name))
            raise self.stopped
        return named_arguments, planned

    async def _answer_http(self, planned: HttpRequest) -> tuple[CallAnswer, HttpRequest | None, HttpRequest]:
        """The backend's answer, what it sent, and the request as the plan records it (placeholders
        kept, a server dry run's own query parameter shown)."""
        to_send = replace(
            planned.with_parts(
                substitute(planned.path, self.dry_values),
                substitute(planned.query, self.dry_values),
                substitute(planned.body, self.dry_values),
            ),
            headers=substitute(planned.headers, self.dry_values),
            text=None
            if planned.text is None
            else filled(
                planned.content_type, planned.text, lambda found: self.dry_values.get(found.text(), ABSENT)
            ),
        )
        answer, sent = await self.backend.answer(to_send)
        recorded_query = planned.query
        if sent is not None and sent.query:
            # The backend's own parameter (dryRun=All) is shown; the plan's values keep their placeholders.
            added = {name: value for name, value in sent.query.items() if name not in (to_send.query or {})}
            recorded_query = {**(planned.query or {}), **added}
        return answer, sent, planned.with_parts(planned.path, recorded_query, planned.body)

    async def _answer_sdk(self, tool: WriteTool, arguments: dict[str, Any]) -> CallAnswer:
        """An SDK tool's dry run: its own dry-run callable answers, unless the run only records or the
        tool has none. Whatever the callable raises is the refusal, in its own words."""
        if tool.dry_write is None or self.via == "record":
            return CallAnswer("recorded", None, tool.caution or None)
        try:
            result = await call_maybe_async(tool.dry_write, substitute(arguments, self.dry_values))
        except Exception as refusal:  # the SDK's refusal is the dry run's answer
            return CallAnswer("refused", None, f"{type(refusal).__name__}: {refusal}", None)
        return CallAnswer("ok", None, None, plain_result(result))

    def _depends_on(
        self, seq: int, arguments: dict[str, Any], planned: HttpRequest | None
    ) -> tuple[int, ...]:
        """The earlier calls this one depends on: named by a placeholder, or writing the same resource
        (close t3, then delete t3: the dry run judged the delete against the state before the close)."""
        parts = [arguments] if planned is None else [arguments, planned.path, planned.query, planned.body]
        named = {reference.seq for reference in references_in(parts) if reference.seq < seq}
        if planned is not None:
            named |= {earlier for earlier in self._seqs_by_path.get(planned.path, ()) if earlier < seq}
        return tuple(sorted(named))

    async def start(self) -> None:
        """Begin the dry run: its start time, once the audit log (when given) proves it can be read.
        `dry_run()` calls it; a caller that holds a recording across requests calls it itself.
        With a sandbox check, the check runs first: a dry run it cannot prove never begins."""
        if self.sandbox_check is not None:
            self.sandbox_proof = await self.sandbox_check()
        if self.audit is not None:
            await require_readable(self.audit, self.client)
        self.started_at = datetime.now(UTC)

    async def kept_so_far(self) -> int | None:
        """How many of the dry run's requests the API kept until now, where the audit log can say
        (`AuditUnavailable` when it cannot be read): a caller that watches each write stops at the first."""
        if self.audit is None or self.started_at is None or not self.audit.keeps_only_kept_writes:
            return None  # only a log of kept writes can say; any other is read once, at the end
        sent = self.dry_run_requests
        window = await dry_run_window(self.audit, self.client, self.started_at, None, sent)
        return writes_kept(self.audit, window)

    async def finish(self, *, failed: bool = False) -> None:
        """End the dry run (`dry_run()` calls it at exit): the audit log read for its window. A run that
        sent nothing to the API kept nothing; otherwise the log says, where it can. A run that `failed`
        becomes no plan: its log is not read, and what it kept stays unknown."""
        self.finished_at = datetime.now(UTC)
        await self.backend.aclose()
        if failed:
            return
        if self.audit is not None and self.started_at is not None:
            self.audit_match = await dry_run_window(
                self.audit, self.client, self.started_at, self.finished_at, self.dry_run_requests
            )
            log.info("%s", alarm_line(self.audit_match, self.audit))
        if self.write_requests == 0:
            self.writes_kept = 0
        elif self.audit is not None and self.audit_match is not None:
            self.writes_kept = writes_kept(self.audit, self.audit_match)

    def _writes_around(self) -> int | None:
        """The writes in the dry run's window the gate did not make; None where the log proves nothing
        either way (no entry in the window, none unplanned)."""
        window = self.audit_match
        if window is None or not (window.complete or window.unplanned):
            return None
        return len(window.unplanned)

    def to_proposal(
        self,
        *,
        proposal_id: str,
        title: str,
        agent: Agent,
        target: Target,
        revision: int = 1,
        task: str | None = None,
        created_at: str | None = None,
    ) -> Proposal:
        """The recorded calls as a v1 proposal, ready to submit; `MintedValueUnsafe` when the dry run
        stopped at a minted value it could not name."""
        if self.stopped is not None:
            raise self.stopped
        return Proposal(
            format=FORMAT_V1,
            proposal_id=proposal_id,
            revision=revision,
            title=title,
            task=task,
            agent=agent,
            created_at=created_at or datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
            target=target,
            dry_run=DryRun(
                via=self.backend.via,
                write_requests=self.write_requests,
                writes_kept=self.writes_kept,
                writes_around=self._writes_around(),
                sandbox=self.sandbox_proof,
                request_ids=list(self.dry_run_request_ids) or None,
            ),
            calls=[call.to_call() for call in sorted(self.calls, key=attrgetter("seq"))],
        )


@asynccontextmanager
async def dry_run(
    backend: str = "record",
    *,
    client: object = None,
    audit: AuditSource | str | None = None,
    **backend_options: Any,
) -> AsyncIterator[Recording]:
    """Run write tools dry inside the block, through the backend named `backend`, and record them.

    The flag is set for this context only and put back at exit, so concurrent runs (asyncio tasks)
    each keep their own. An unknown backend name, or a live client handed to a fake, raises here,
    before any tool runs. `audit` (`"api:/v1/audit"`, or any `KIND:LOCATION` of
    `reviewer.audit.registry.audit_source`) lets the run learn how many writes the API kept (more than
    zero means the API ignored the dry-run parameter) and who else wrote meanwhile.
    """
    chosen = make_backend(backend, client, **backend_options)
    live_client = client if isinstance(client, httpx.AsyncClient) else None
    source = audit_source(audit) if isinstance(audit, str) else audit
    recording = Recording(chosen, client=live_client, audit=source)
    async with running(recording, dry=True):
        yield recording
