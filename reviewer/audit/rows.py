"""An API's audit log as normalised rows: what every audit source yields and what verification matches.

Each vendor says it its own way (a proxy's access log, Kubernetes audit events, CloudTrail records,
Stripe events); a reader turns each entry into one `AuditRow`, or into a `MalformedLine` that names
where it was, so a line that cannot be read is counted and shown, never dropped and never a match.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final
from urllib.parse import parse_qsl

from reviewer.plan.dry_run_params import names_dry_run

WRITE_METHODS: Final = frozenset({"POST", "PUT", "PATCH", "DELETE"})

QueryPairs = tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class AuditRow:
    """One entry of an audit log, in the same words whatever wrote it.

    `method` is the HTTP method (a Kubernetes verb is mapped to its method; CloudTrail's and Stripe's
    entries carry their own word in `action` and no method); `path` is the request path, or the
    resource where the log names no path. `request_ids` are every id the entry carries for the request
    that made it (the API's own, the client's, an idempotency key).
    """

    where: str
    """The file (or URL) and line number of the entry: how a person finds it again."""
    time: datetime | None
    method: str
    path: str
    query: str = ""
    status: int | None = None
    request_ids: tuple[str, ...] = ()
    actor: str | None = None
    user_agent: str | None = None
    is_dry_run: bool = False
    """The API itself says it was a dry run (CloudTrail's `Client.DryRunOperation`, a Kubernetes
    `dryRun` the API server honours, a log field that records it). A query parameter's name never says
    so: an API that does not know it writes (`dry_run_param` notes it)."""
    is_write: bool = True
    action: str | None = None
    """The vendor's own word for what happened: a verb, an eventName, an event type."""
    error: str | None = None
    """The error the API answered, where the log names it apart from a status (CloudTrail's
    `errorCode`)."""
    dry_run_param: bool = False
    """The query carries a parameter that reads as a dry run (`dry_run=1`, `validateOnly=true`), which
    only the API's honouring makes one: said beside a write, never a reason to leave it out."""
    events_per_request: bool = False
    """The format logs what a request caused, several entries per request (Stripe's events), each
    carrying the request's id; other formats log one entry per request."""

    @property
    def counts_as_write(self) -> bool:
        """A write the API performed: a dry run the API vouches for never is, whatever its method."""
        return self.is_write and not self.is_dry_run

    @property
    def has_http_path(self) -> bool:
        return self.path.startswith("/")


@dataclass(frozen=True, slots=True)
class MalformedLine:
    """An entry that could not be read as a row: where it is and what is wrong with it."""

    where: str
    problem: str


def query_pairs(query: str) -> QueryPairs:
    """A raw query string as sorted pairs (a dry-run parameter included: it is part of the request)."""
    return tuple(sorted(parse_qsl(query, keep_blank_values=True)))


def has_dry_run_param(query: str) -> bool:
    """Whether a query string asks for a dry run (`dryRun=All`, `dry_run=true`; not `dryRun=false`)."""
    lowered = query.lower()
    if "dry" not in lowered and "validate" not in lowered:  # most queries: no parse at all
        return False
    return any(
        names_dry_run(name) and value.lower() not in ("", "false", "0", "none")
        for name, value in parse_qsl(query, keep_blank_values=True)
    )


def utc_time(value: object) -> datetime | None:
    """A log's time as an aware UTC time: ISO 8601 text (`2026-12-02T01:02:03Z`, with an offset, or
    without one, read as UTC) or Unix seconds; None for anything else. The one reading of a log time:
    the readers, the matcher and the screen agree on what a time is."""
    try:
        if type(value) is str:
            parsed = datetime.fromisoformat(value)
            return parsed.replace(tzinfo=UTC) if parsed.tzinfo is None else parsed.astimezone(UTC)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return datetime.fromtimestamp(value, UTC)
    except (ValueError, OverflowError, OSError):
        pass
    return None
