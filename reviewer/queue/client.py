"""`QueueClient`: the async HTTP client of the queue API; the errors it raises are
`reviewer.queue.refusals`'.

Used by the terminal app and the agent library alike; it imports no Textual (a shell command, which
asks once and exits, uses `reviewer.queue.shell_client`). The token travels
only in the `Authorization` header: it is in no URL, log line, exception message or repr.
"""

from __future__ import annotations

import asyncio
import re
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import httpx
from pydantic import BaseModel

from reviewer.plan.format_fields import fit_for_queue, refused_field, without_fields
from reviewer.plan.proposal import Proposal, dumps, parse_proposal
from reviewer.queue.messages import (
    Claim,
    ClaimRequest,
    Decision,
    DecisionRequest,
    DecisionState,
    ExecutionHistory,
    ExecutionReport,
    ProposalPage,
    ProposalRecord,
    QueueVersion,
    RefusalKind,
    RefusalReport,
    State,
    StoredExecution,
    SubmissionAnswer,
    TrailCheckpoint,
    Whoami,
)
from reviewer.queue.passkey_messages import EnrolmentLink, PasskeyListing, ReviewLink
from reviewer.queue.refusals import (
    InvalidRequest,
    is_untrusted,
    refusal,
    unreachable,
)
from reviewer.queue.shell_client import (
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    connection_options,
    retry_delays,
    segment,
)

Answer = TypeVar("Answer", bound=BaseModel)

_PARSE_IN_THREAD_BYTES: Final = 1024 * 1024
_NOT_ASKED: Final = object()


@dataclass(frozen=True)
class Listing:
    """One poll of the list: the page and its ETag, or `page is None` when nothing changed (304)."""

    page: ProposalPage | None
    etag: str | None

    @property
    def not_modified(self) -> bool:
        return self.page is None


@dataclass(frozen=True)
class DecisionPoll:
    """One answer about a decision: the state, and its ETag (None from a queue that sends none),
    which the next long poll names so it is answered only once the state differs."""

    state: DecisionState
    etag: str | None


class QueueClient:
    """The queue API over httpx; `transport=` lets tests use `httpx.MockTransport` or ASGI.

    Requests that are safe to repeat (reads, submissions, and decisions and execution reports
    under their Idempotency-Key) are retried on transport errors.
    """

    def __init__(
        self,
        base_url: str,
        token: str | httpx.Auth,
        *,
        transport: httpx.AsyncBaseTransport | None = None,
        timeout: float = DEFAULT_TIMEOUT,
        retries: int = DEFAULT_RETRIES,
        retry_delay: float = 0.2,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self._version: QueueVersion | None | object = _NOT_ASKED
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self._http = httpx.AsyncClient(
            base_url=self.base_url, transport=transport, **connection_options(token, timeout)
        )

    def __repr__(self) -> str:
        return f"QueueClient(base_url={self.base_url!r})"

    async def aclose(self) -> None:
        await self._http.aclose()

    async def __aenter__(self) -> QueueClient:
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.aclose()

    async def _request(
        self,
        method: str,
        path: str,
        *,
        expect: tuple[int, ...] = (200,),
        **kwargs: Any,
    ) -> httpx.Response:
        for delay in [*retry_delays(self.retries, self.retry_delay), None]:
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.TransportError as error:
                if delay is not None and not is_untrusted(error):
                    await asyncio.sleep(delay)
                    continue
                raise unreachable(self.base_url, error) from error
            if response.status_code in expect:
                return response
            raise refusal(response)
        raise AssertionError("unreachable")

    async def _get(self, path: str, model: type[Answer], **kwargs: Any) -> Answer:
        response = await self._request("GET", path, **kwargs)
        return model.model_validate_json(response.content)

    async def whoami(self) -> Whoami:
        return await self._get("/v1/whoami", Whoami)

    async def queue_version(self) -> QueueVersion | None:
        """The queue's release and what it reads (`GET /v1`), asked once; None from a queue of a
        release before it answered that."""
        if self._version is _NOT_ASKED:
            response = await self._request("GET", "/v1", expect=(200, 404))
            self._version = (
                QueueVersion.model_validate_json(response.content) if response.status_code == 200 else None
            )
        return self._version if isinstance(self._version, QueueVersion) else None

    async def submit(self, proposal: bytes | Proposal) -> SubmissionAnswer:
        """Submit a revision; sending the same one again (a retry) answers the stored record.

        What the queue does not read of the dry run's account is left out first, as the queue says
        (`GET /v1`), or, for a queue of an earlier release, as its refusal names it: a rolled-back
        queue, or a replica not yet upgraded, takes the same plan and digest (`format_fields`)."""
        body = proposal if isinstance(proposal, bytes) else dumps(proposal)
        version = await self.queue_version()
        body = fit_for_queue(body, None if version is None else frozenset(version.proposal_fields))
        left_out: set[str] = set()
        while True:
            try:
                response = await self._request(
                    "POST",
                    "/v1/proposals",
                    expect=(200, 201),
                    content=body,
                    headers={"Content-Type": "application/json"},
                )
            except InvalidRequest as refused:
                field = refused_field(refused.body.message)
                if field is None or field in left_out:
                    raise
                left_out.add(field)
                body = without_fields(body, [field])
                continue
            return SubmissionAnswer.model_validate_json(response.content)

    async def list_proposals(
        self,
        state: State | None = None,
        cursor: str | None = None,
        etag: str | None = None,
        limit: int | None = None,
        wait: float = 0.0,
        filters: Mapping[str, str] | None = None,
    ) -> Listing:
        """A page of summaries, narrowed by `filters` (the list's query words: `environment`, `agent`,
        `alarm`, `older_than`, `yours`); pass the last `Listing.etag` to get `not_modified` at almost
        no cost, and `wait` with it to have the queue hold the answer until something changes (a long
        poll, at most that many seconds; a queue that does not wait answers at once)."""
        params: dict[str, str | int] = {
            key: value
            for key, value in (("state", state), ("cursor", cursor), ("limit", limit))
            if value is not None
        }
        if wait > 0:
            params["wait"] = f"{wait:.3f}"
        params.update(filters or {})
        headers = {"If-None-Match": etag} if etag else {}
        response = await self._request(
            "GET",
            "/v1/proposals",
            expect=(200, 304),
            params=params,
            headers=headers,
            timeout=httpx.Timeout(self.timeout, read=self.timeout + wait),
        )
        new_etag = response.headers.get("etag")
        if response.status_code == 304:
            return Listing(page=None, etag=new_etag or etag)
        return Listing(page=ProposalPage.model_validate_json(response.content), etag=new_etag)

    async def get_proposal(self, proposal_id: str) -> ProposalRecord:
        return await self._get(f"/v1/proposals/{segment(proposal_id)}", ProposalRecord)

    async def get_revision(self, proposal_id: str, revision: int) -> Proposal:
        """One revision, whole, decoded with the proposal format's own checks (off the loop if large)."""
        response = await self._request(
            "GET", f"/v1/proposals/{segment(proposal_id)}/revisions/{int(revision)}"
        )
        source = f"{proposal_id} revision {revision} from the queue"
        if len(response.content) > _PARSE_IN_THREAD_BYTES:
            return await asyncio.to_thread(parse_proposal, response.content, source)
        return parse_proposal(response.content, source)

    async def decide(
        self,
        proposal_id: str,
        revision: int,
        plan_sha256: str,
        decision: Decision,
        reason: str = "",
        idempotency_key: str | None = None,
        statement: str | None = None,
        signature: str | None = None,
        break_glass: bool = False,
    ) -> DecisionState:
        """Approve or reject; a lost answer is retried with the same key, so it is decided once.

        `statement` and `signature` carry a signed decision (`reviewer.queue.deciding` makes them);
        `break_glass` approves so the plan may run outside its change windows (`reason` says why)."""
        request = DecisionRequest(
            revision=revision,
            plan_sha256=plan_sha256,
            decision=decision,
            reason=reason,
            statement=statement,
            signature=signature,
            # Left out unless given: a queue of a release before change windows refuses the field.
            break_glass=True if break_glass else None,
        )
        key = idempotency_key or str(uuid.uuid4())
        response = await self._request(
            "POST",
            f"/v1/proposals/{segment(proposal_id)}/decisions",
            expect=(201,),
            content=request.model_dump_json(exclude_none=True),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        return DecisionState.model_validate_json(response.content)

    async def decision_state(self, proposal_id: str) -> DecisionState:
        return await self._get(f"/v1/proposals/{segment(proposal_id)}/decision", DecisionState)

    async def review_link(self, proposal_id: str) -> ReviewLink:
        """The review page of the latest revision (a queue serving pages, `serve --web-origin`)."""
        return await self._get(f"/v1/proposals/{segment(proposal_id)}/link", ReviewLink)

    async def enrolment_link(self) -> EnrolmentLink:
        """A one-time link whose page registers a passkey for the caller."""
        response = await self._request("POST", "/v1/passkeys/links", expect=(201,))
        return EnrolmentLink.model_validate_json(response.content)

    async def list_passkeys(self) -> PasskeyListing:
        return await self._get("/v1/passkeys", PasskeyListing)

    async def remove_passkey(self, credential_id: str) -> None:
        if not re.fullmatch(r"[A-Za-z0-9_-]{4,1400}", credential_id):
            raise ValueError(
                f"{credential_id[:60]!r} is not a passkey's id (base64url, 4 characters or more)"
            )
        await self._request("DELETE", f"/v1/passkeys/{credential_id}", expect=(204,))

    async def export_passkeys(self) -> bytes:
        """Every registered passkey, as executors' `--allowed-passkeys` file."""
        return (await self._request("GET", "/v1/passkeys/export")).content

    async def await_decision(
        self, proposal_id: str, *, wait: float, known: DecisionPoll | None = None
    ) -> DecisionPoll:
        """The decision's state once it differs from `known` (without it: once it is not pending),
        or as it is after `wait` seconds: a long poll, answered by the queue the moment a reviewer
        decides. A queue that does not wait (an older release) answers at once: the caller paces
        its next ask."""
        headers = {"If-None-Match": known.etag} if known is not None and known.etag else {}
        response = await self._request(
            "GET",
            f"/v1/proposals/{segment(proposal_id)}/decision",
            expect=(200, 304),
            params={"wait": f"{wait:.3f}"},
            headers=headers,
            timeout=httpx.Timeout(self.timeout, read=self.timeout + wait),
        )
        etag = response.headers.get("etag")
        if response.status_code == 304 and known is not None:
            return DecisionPoll(known.state, etag or known.etag)
        return DecisionPoll(DecisionState.model_validate_json(response.content), etag)

    async def claim(
        self, proposal_id: str, revision: int, plan_sha256: str, idempotency_key: str | None = None
    ) -> Claim:
        """Claim the approval for one run; a lost answer is retried with the same key: claimed once."""
        request = ClaimRequest(revision=revision, plan_sha256=plan_sha256)
        key = idempotency_key or str(uuid.uuid4())
        response = await self._request(
            "POST",
            f"/v1/proposals/{segment(proposal_id)}/claims",
            expect=(201,),
            content=request.model_dump_json(),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        return Claim.model_validate_json(response.content)

    async def report_execution(
        self, proposal_id: str, report: ExecutionReport, idempotency_key: str | None = None
    ) -> DecisionState:
        """Report the real run under its claim; a lost answer is retried with the same key, so it is
        stored once (a claim has one report: a retry without the key would be refused)."""
        key = idempotency_key or str(uuid.uuid4())
        response = await self._request(
            "POST",
            f"/v1/proposals/{segment(proposal_id)}/executions",
            expect=(201,),
            content=report.model_dump_json(exclude_none=True),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        return DecisionState.model_validate_json(response.content)

    async def report_refusal(
        self,
        proposal_id: str,
        revision: int,
        plan_sha256: str,
        kind: RefusalKind,
        message: str,
        idempotency_key: str | None = None,
    ) -> DecisionState:
        """Say this executor refused the approval before claiming it; a lost answer is retried with
        the same key, so it is stored once."""
        request = RefusalReport(revision=revision, plan_sha256=plan_sha256, kind=kind, message=message)
        key = idempotency_key or str(uuid.uuid4())
        response = await self._request(
            "POST",
            f"/v1/proposals/{segment(proposal_id)}/refusals",
            expect=(201,),
            content=request.model_dump_json(),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        return DecisionState.model_validate_json(response.content)

    async def trail_checkpoint(self, since: int | None = None) -> TrailCheckpoint:
        """The trail's newest signed checkpoint, with the consistency proof from `since` entries."""
        params = {} if since is None else {"since": since}
        return await self._get("/v1/trail/checkpoint", TrailCheckpoint, params=params)

    async def trail_proof(self, index: int, size: int | None = None) -> bytes:
        """Entry `index` and its inclusion proof in the tree of `size` entries (default: the newest),
        as the two lines `reviewer trail verify` reads."""
        params = {} if size is None else {"size": size}
        response = await self._request("GET", f"/v1/trail/entries/{int(index)}/proof", params=params)
        return response.content

    async def trail_export(self, since: int = 0) -> AsyncIterator[bytes]:
        """The trail's export from entry `since`, as the service streams it (JSON lines, in chunks)."""
        request = self._http.build_request("GET", "/v1/trail/export", params={"since": since})
        try:
            response = await self._http.send(request, stream=True)
        except httpx.TransportError as error:
            raise unreachable(self.base_url, error) from error
        try:
            if response.status_code != 200:
                await response.aread()
                raise refusal(response)
            try:
                async for chunk in response.aiter_raw():
                    yield chunk
            except httpx.TransportError as error:
                raise unreachable(self.base_url, error) from error
        finally:
            await response.aclose()

    async def get_executions(self, proposal_id: str) -> list[StoredExecution]:
        """The execution reports the queue stored for a proposal, oldest first (empty if it never ran)."""
        history = await self._get(f"/v1/proposals/{segment(proposal_id)}/executions", ExecutionHistory)
        return history.executions
