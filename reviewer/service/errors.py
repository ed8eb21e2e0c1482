"""The refusals the queue service can answer with, each bound to its HTTP status and error code.

The store raises them inside its transactions (so a refusal never leaves a partial write) and the
routes turn them into the JSON error body of `reviewer.queue.messages.ErrorBody`.
"""

from __future__ import annotations

from typing import Any


class ServiceError(Exception):
    """A request the service refuses; `code` is stable for clients, `message` says what to do."""

    status = 400
    code = "bad_request"

    def __init__(self, message: str, **details: Any) -> None:
        super().__init__(message)
        self.message = message
        self.details = {key: value for key, value in details.items() if value is not None}


class BadRequest(ServiceError):
    status = 400
    code = "bad_request"


class InvalidJSON(ServiceError):
    status = 400
    code = "invalid_json"


class Unauthorized(ServiceError):
    status = 401
    code = "unauthorized"


class Forbidden(ServiceError):
    status = 403
    code = "forbidden"


class OutsideTheGroup(Forbidden):
    """A provider's person whose identity token no longer counts them in the reviewers group: their
    sign-in on the queue ended (their pending approvals withdrawn). A client says so in those words;
    only the provider can let them back in, never a token from the queue."""

    code = "not_in_reviewers_group"


class NotFound(ServiceError):
    status = 404
    code = "not_found"


class Conflict(ServiceError):
    """A request that contradicts what the queue already holds (a revision number, an owner)."""

    status = 409
    code = "conflict"


class NotPending(Conflict):
    """A decision on a proposal that is no longer pending; names the state and who decided."""

    code = "not_pending"


class ExecutionRefused(Conflict):
    """An execution report without a claim of its own (none, another's, or one already reported)."""

    code = "execution_refused"


class ClaimRefused(Conflict):
    """A claim of an approval that is not there to claim: pending, decided otherwise, or held by a run."""

    code = "claim_refused"


class OutsideWindow(ClaimRefused):
    """A claim of an approval whose plan may not run now under its environment's change windows; the
    approval stays unclaimed for a run inside one (or once enough reviewers broke glass)."""

    code = "outside_window"


class StaleRevision(ServiceError):
    """The request names a revision or digest that is not the latest: nothing was changed."""

    status = 412
    code = "stale_revision"


class NotJSON(ServiceError):
    """A body sent with a Content-Type that is not JSON: read as JSON it might mean something else."""

    status = 415
    code = "unsupported_media_type"


class TooLarge(ServiceError):
    status = 413
    code = "too_large"


class Invalid(ServiceError):
    """A well-formed JSON body that breaks the schema or a limit."""

    status = 422
    code = "invalid"


class IdempotencyMismatch(ServiceError):
    """An Idempotency-Key reused with a different request."""

    status = 422
    code = "idempotency_key_reused"


class Unavailable(ServiceError):
    """The service is stopping and cannot judge the request now: nothing was written, try later."""

    status = 503
    code = "unavailable"
    retry_after: int | None = None
    """Seconds to wait before trying again, sent as `Retry-After` when known."""


class DatabaseUnusable(Exception):
    """The queue's database cannot be used as it is: missing, unreachable, or of another schema.

    Not an HTTP refusal: the commands print the message as one line and exit non-zero.
    """

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class DatabaseUnavailable(Unavailable, DatabaseUnusable):
    """The queue's database cannot serve this now: down, hung, out of space, locked past its
    timeout, out of connections (`reviewer.service.store.outages`). A request meeting it is answered
    503 with `Retry-After`; a command prints it as one line, as any unusable database."""

    code = "database_unavailable"

    def __init__(self, cause: str, retry_after: int) -> None:
        super().__init__(f"the queue's database is unavailable: {cause}; try again in {retry_after} s")
        self.cause = cause
        self.retry_after = retry_after


class BodyNotReceived(ServiceError):
    """The client went away, or missed the body deadline, before its body arrived whole."""

    status = 408
    code = "request_timeout"


class AlreadyApproved(Conflict):
    """A reviewer approving a revision they already approved: under a quorum one person counts once."""

    code = "already_approved"


class SignatureRefused(ServiceError):
    """A decision's statement or signature that is malformed, names another decision, does not
    verify, or is missing where the policy requires one; the message names the field."""

    status = 422
    code = "signature_refused"
