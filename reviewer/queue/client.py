"""`QueueClient`: the async HTTP client of the queue API, and the errors it raises.

Used by the terminal app and the agent library alike; it imports no Textual. The token travels
only in the `Authorization` header: it is in no URL, log line, exception message or repr.
"""

from __future__ import annotations

import asyncio
import re
import ssl
import uuid
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any, Final, TypeVar

import httpx
from pydantic import BaseModel, ValidationError

from reviewer.plan.format_fields import fit_for_queue, refused_field, without_fields
from reviewer.plan.proposal import PROPOSAL_ID_PATTERN, Proposal, dumps, parse_proposal
from reviewer.queue.messages import (
    Claim,
    ClaimRequest,
    Decision,
    DecisionRequest,
    DecisionState,
    ErrorBody,
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
from reviewer.queue.trust import trusted_certificates

Answer = TypeVar("Answer", bound=BaseModel)

DEFAULT_TIMEOUT: Final = 10.0
DEFAULT_RETRIES: Final = 3
KEEPALIVE_EXPIRY: Final = 2.0
"""Seconds an idle connection is kept for the next request: under the service's keep-alive (5 s), so
a poll is not sent down a connection the service is closing at that moment (the retry would cover
it, but only after a reset and a delay)."""
_PARSE_IN_THREAD_BYTES: Final = 1024 * 1024
_PROPOSAL_ID: Final = re.compile(PROPOSAL_ID_PATTERN)
_DOT_SEGMENTS: Final = frozenset({".", ".."})
_NOT_ASKED: Final = object()


class QueueError(Exception):
    """Anything that kept a queue request from succeeding; the message says what to do."""


class QueueUnreachable(QueueError):
    """No HTTP answer at all (refused, timed out, cut off): the queue may be down or the URL wrong."""


class UntrustedCertificate(QueueUnreachable):
    """The queue answered over TLS with a certificate this machine does not trust: a private CA's,
    or a self-signed one. Retrying cannot help; trusting the CA does."""


def _is_untrusted(error: BaseException) -> bool:
    while error is not None:
        if isinstance(error, ssl.SSLCertVerificationError):
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def unreachable(base_url: str, error: httpx.TransportError) -> QueueUnreachable:
    """Why the queue did not answer, in words that say what to do."""
    if _is_untrusted(error):
        return UntrustedCertificate(
            f"the queue at {base_url} answered with a TLS certificate this machine does not trust "
            "(a private CA's, or self-signed): pass --ca-file FILE, or set SSL_CERT_FILE (or "
            "REQUESTS_CA_BUNDLE) to the CA that signed it"
        )
    return QueueUnreachable(
        f"the queue at {base_url} did not answer ({type(error).__name__}); "
        "check that `reviewer serve` runs there and the URL is right"
    )


class QueueRefused(QueueError):
    """The queue answered with an error; `status`, `code` and `body` (its ErrorBody) say which."""

    hint = ""

    def __init__(self, status: int, body: ErrorBody) -> None:
        self.status = status
        self.code = body.error
        self.body = body
        hint = f"; {self.hint}" if self.hint else ""
        super().__init__(f"{body.message} (HTTP {status}){hint}")


class InvalidRequest(QueueRefused):
    """400, 413 or 422: the request itself is wrong (a bug in the caller or a plan over the limits)."""


class IdempotencyKeyReused(InvalidRequest):
    """422: an Idempotency-Key was sent again with another decision."""


class Unauthorized(QueueRefused):
    hint = "check REVIEWER_TOKEN or the token file; the operator mints tokens with `reviewer token create`"


class Forbidden(QueueRefused):
    """403: the token's role may not do this (an agent deciding, a reviewer submitting)."""


class NotFound(QueueRefused):
    """404: no such proposal or revision, or a proposal another agent submitted."""


class Conflict(QueueRefused):
    """409: the request contradicts what the queue holds (revision number, owner, state)."""


class AlreadyDecided(Conflict):
    """409 on a decision: the proposal is no longer pending. `state` and `decided_by` say why."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(status, body)
        self.state = body.state
        self.decided_by = body.decided_by


class ExecutionRefused(Conflict):
    """409 on an execution: no current, unused approval (pending, rejected, expired, executed)."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(status, body)
        self.state = body.state


class ClaimRefused(Conflict):
    """409 on a claim: the approval is not there to take (pending, rejected, expired, executed, or
    held by another run: `claimed_by` names it)."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(status, body)
        self.state = body.state
        self.claimed_by = body.claimed_by


class OutsideWindow(ClaimRefused):
    """409 on a claim: the plan may not run now under its environment's change windows (`window`),
    and may from `runs_from`; the approval was not used."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(status, body)
        self.window = body.window
        self.runs_from = body.runs_from


class StaleRevision(QueueRefused):
    """412: the revision or digest named is not the latest; nothing changed. Review the latest."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(status, body)
        self.latest_revision = body.latest_revision
        self.latest_plan_sha256 = body.latest_plan_sha256


class QueueServerError(QueueRefused):
    hint = "the queue failed; try again, and tell its operator if it persists"


_BY_CODE: Final[dict[str, type[QueueRefused]]] = {
    "not_pending": AlreadyDecided,
    "execution_refused": ExecutionRefused,
    "claim_refused": ClaimRefused,
    "outside_window": OutsideWindow,
    "idempotency_key_reused": IdempotencyKeyReused,
}
_BY_STATUS: Final[dict[int, type[QueueRefused]]] = {
    400: InvalidRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    412: StaleRevision,
    413: InvalidRequest,
    422: InvalidRequest,
}


def refusal(response: httpx.Response) -> QueueRefused:
    """The typed error for an error response, even one without a JSON body (a proxy's 502)."""
    try:
        body = ErrorBody.model_validate_json(response.content)
    except ValidationError:
        reason = response.reason_phrase or "error"
        body = ErrorBody(error="http_error", message=f"the queue answered {response.status_code} {reason}")
    kind = _BY_CODE.get(body.error) or _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = QueueServerError if response.status_code >= 500 else QueueRefused
    return kind(response.status_code, body)


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
        headers = {"Accept": "application/json"}
        if isinstance(token, str):
            if not token or any(character.isspace() for character in token) or not token.isprintable():
                raise ValueError("the token is empty or contains whitespace or control characters")
            headers["Authorization"] = f"Bearer {token}"
        self.base_url = base_url.rstrip("/")
        self._version: QueueVersion | None | object = _NOT_ASKED
        self.timeout = timeout
        self.retries = retries
        self.retry_delay = retry_delay
        self._http = httpx.AsyncClient(
            base_url=self.base_url,
            auth=None if isinstance(token, str) else token,
            headers=headers,
            transport=transport,
            timeout=timeout,
            follow_redirects=False,
            limits=httpx.Limits(keepalive_expiry=KEEPALIVE_EXPIRY),
            verify=trusted_certificates(),
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
        attempts = 1 + self.retries
        for attempt in range(attempts):
            try:
                response = await self._http.request(method, path, **kwargs)
            except httpx.TransportError as error:
                if attempt + 1 < attempts and not _is_untrusted(error):
                    await asyncio.sleep(self.retry_delay * 2**attempt)
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
        return await self._get(f"/v1/proposals/{_segment(proposal_id)}", ProposalRecord)

    async def get_revision(self, proposal_id: str, revision: int) -> Proposal:
        """One revision, whole, decoded with the proposal format's own checks (off the loop if large)."""
        response = await self._request(
            "GET", f"/v1/proposals/{_segment(proposal_id)}/revisions/{int(revision)}"
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
            f"/v1/proposals/{_segment(proposal_id)}/decisions",
            expect=(201,),
            content=request.model_dump_json(exclude_none=True),
            headers={"Content-Type": "application/json", "Idempotency-Key": key},
        )
        return DecisionState.model_validate_json(response.content)

    async def decision_state(self, proposal_id: str) -> DecisionState:
        return await self._get(f"/v1/proposals/{_segment(proposal_id)}/decision", DecisionState)

    async def review_link(self, proposal_id: str) -> ReviewLink:
        """The review page of the latest revision (a queue serving pages, `serve --web-origin`)."""
        return await self._get(f"/v1/proposals/{_segment(proposal_id)}/link", ReviewLink)

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
            f"/v1/proposals/{_segment(proposal_id)}/decision",
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
            f"/v1/proposals/{_segment(proposal_id)}/claims",
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
            f"/v1/proposals/{_segment(proposal_id)}/executions",
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
            f"/v1/proposals/{_segment(proposal_id)}/refusals",
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
        history = await self._get(f"/v1/proposals/{_segment(proposal_id)}/executions", ExecutionHistory)
        return history.executions


def _segment(proposal_id: str) -> str:
    """A proposal id as one URL path segment; ids outside the format's pattern are refused here."""
    if not _PROPOSAL_ID.match(proposal_id) or proposal_id in _DOT_SEGMENTS:
        raise ValueError(f"{proposal_id[:60]!r} is not a proposal id ([A-Za-z0-9._-], 1 to 128 characters)")
    return proposal_id
