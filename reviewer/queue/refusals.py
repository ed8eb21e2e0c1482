"""What kept a queue request from succeeding, as exceptions whose message says what to do: no answer
at all (`QueueUnreachable`, an untrusted certificate among them), or the queue's refusal
(`QueueRefused`, typed by its code and status).

Shared by the asynchronous `QueueClient` and the shell's `ShellQueue`; it loads neither pydantic nor
asyncio, so a command that only reads a page of the queue starts as fast as a script would.
"""

from __future__ import annotations

import ssl
from typing import Final

import httpx

from reviewer.queue.answers import ErrorFields, error_fields


class QueueError(Exception):
    """Anything that kept a queue request from succeeding; the message says what to do."""


class QueueUnreachable(QueueError):
    """No HTTP answer at all (refused, timed out, cut off): the queue may be down or the URL wrong."""


class UntrustedCertificate(QueueUnreachable):
    """The queue answered over TLS with a certificate this machine does not trust: a private CA's,
    or a self-signed one. Retrying cannot help; trusting the CA does."""


def is_untrusted(error: BaseException) -> bool:
    while error is not None:
        if isinstance(error, ssl.SSLCertVerificationError):
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def unreachable(base_url: str, error: httpx.TransportError) -> QueueUnreachable:
    """Why the queue did not answer, in words that say what to do."""
    if is_untrusted(error):
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

    def __init__(self, status: int, body: ErrorFields) -> None:
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

    def __init__(self, status: int, body: ErrorFields) -> None:
        super().__init__(status, body)
        self.state = body.state
        self.decided_by = body.decided_by


class ExecutionRefused(Conflict):
    """409 on an execution: no current, unused approval (pending, rejected, expired, executed)."""

    def __init__(self, status: int, body: ErrorFields) -> None:
        super().__init__(status, body)
        self.state = body.state


class ClaimRefused(Conflict):
    """409 on a claim: the approval is not there to take (pending, rejected, expired, executed, or
    held by another run: `claimed_by` names it)."""

    def __init__(self, status: int, body: ErrorFields) -> None:
        super().__init__(status, body)
        self.state = body.state
        self.claimed_by = body.claimed_by


class OutsideWindow(ClaimRefused):
    """409 on a claim: the plan may not run now under its environment's change windows (`window`),
    and may from `runs_from`; the approval was not used."""

    def __init__(self, status: int, body: ErrorFields) -> None:
        super().__init__(status, body)
        self.window = body.window
        self.runs_from = body.runs_from


class StaleRevision(QueueRefused):
    """412: the revision or digest named is not the latest; nothing changed. Review the latest."""

    def __init__(self, status: int, body: ErrorFields) -> None:
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
    body = error_fields(response.content)
    if body is None:
        reason = response.reason_phrase or "error"
        body = ErrorFields(error="http_error", message=f"the queue answered {response.status_code} {reason}")
    kind = _BY_CODE.get(body.error) or _BY_STATUS.get(response.status_code)
    if kind is None:
        kind = QueueServerError if response.status_code >= 500 else QueueRefused
    return kind(response.status_code, body)
