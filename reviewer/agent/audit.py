"""A run's reading of its audit source (`reviewer.audit`, docs/audit-logs.md): the dry run's window, for the
writes the API kept and the writes someone else made meanwhile; the real run, call by call. Every source is
read the same way, off the event loop: an `api:` log is first fetched through the run's own client.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Mapping
from datetime import UTC, datetime
from functools import partial
from typing import Final

import httpx

from reviewer.agent.errors import AgentError
from reviewer.agent.http_values import HttpRequest
from reviewer.audit.checks import RealRun, check_readable, verify_run, writes_during_dry_run
from reviewer.audit.inputs import AuditSourceUnreadable
from reviewer.audit.matching import AuditMatch, RequestLine
from reviewer.audit.registry import AuditSource
from reviewer.audit.reported import late_audit, unreadable_audit
from reviewer.queue.messages import AuditVerification

LOG_SETTLE_SECONDS: Final = 0.25
"""A server writes a request's access-log line after it answered (nginx, in its log phase): the dry
run's window is read at least this long after it closed, so the last write made in it is there."""
DEFAULT_AUDIT_READ_TIMEOUT: Final = 120.0
"""How long a run's report waits for its audit source to be read (a URL's own timeout is per read)."""


class AuditUnavailable(AgentError):
    """The audit source given to a dry run could not be read: the dry run stops, since only the log
    proves what the API kept and that nobody wrote around the gate."""

    def __init__(self, source_name: str, problem: str) -> None:
        super().__init__(
            f"the audit log {source_name} cannot be read ({problem}); check its location, or leave it out "
            "and nothing proves what the API kept"
        )


async def require_readable(source: AuditSource, client: httpx.AsyncClient | None) -> None:
    """`AuditUnavailable` unless the source's first entry can be read now: a missing file, a refused
    URL, a wrong path on the API or a document that is no log is said before anything runs, not after."""
    try:
        await asyncio.to_thread(check_readable, await source.ready(client))
    except AuditSourceUnreadable as error:
        raise AuditUnavailable(source.name, str(error)) from None


async def dry_run_window(
    source: AuditSource,
    client: httpx.AsyncClient | None,
    started_at: datetime,
    finished_at: datetime | None,
    dry_run_requests: Mapping[str, HttpRequest],
) -> AuditMatch:
    """The source read for the dry run's window (to now while it runs; once it closed, after the log
    settled, `LOG_SETTLE_SECONDS`): the gate's own dry-run requests
    known by their ids (`dry_run_requests`, each id's request), or by their lines where the log keeps
    no id of theirs; every other write in it someone else's. `AuditUnavailable` when it cannot be read."""
    base_path = client.base_url.path.rstrip("/") if client is not None else ""  # as the log writes it
    lines = {
        request_id: RequestLine.of(request.method, base_path + request.path, request.query or {})
        for request_id, request in dry_run_requests.items()
    }
    if finished_at is not None:
        settling = LOG_SETTLE_SECONDS - (datetime.now(UTC) - finished_at).total_seconds()
        if settling > 0:
            await asyncio.sleep(settling)
    try:
        ready = await source.ready(client)
        until = finished_at or datetime.now(UTC)
        read = await asyncio.to_thread(
            partial(writes_during_dry_run, dry_run_lines=lines), ready, started_at, until, tuple(lines)
        )
    except AuditSourceUnreadable as error:
        raise AuditUnavailable(source.name, str(error)) from None
    if read.rows_read == 0 and read.malformed:
        first = read.malformed[0]
        raise AuditUnavailable(source.name, f"no entry reads as one: {first.where} {first.problem}")
    return read


def writes_kept(source: AuditSource, window: AuditMatch) -> int | None:
    """How many of the gate's dry-run requests the API kept, where the log can say: a log of kept writes
    only (`api:`, `sample:`) holds an entry for each one the API wrote, found by the request id it was
    sent with, or, where the log keeps no id of it, by its method and path (what cannot be told from a
    kept write counts as one). Other logs record every request, honoured or not, and leave it unknown
    (None); so does a log with a line that cannot be read."""
    if not source.keeps_only_kept_writes or window.malformed_count:
        return None  # a line it could not read may be a kept write
    return window.gate_dry_runs


async def verify_after_run(
    execution: RealRun,
    source: AuditSource,
    client: httpx.AsyncClient | None,
    timeout: float = DEFAULT_AUDIT_READ_TIMEOUT,
) -> tuple[AuditMatch | None, AuditVerification]:
    """The real run against its audit source, and what its report says of it, whatever happens: the
    report is sent after it either way. Fetched (an `api:` log) and read in a thread of its own for at
    most `timeout` seconds in all: a log that trickles in or a reader that hangs is left behind (a
    daemon thread, which holds up neither the report nor the process's exit) and the report says the
    log was not read in time; a fetch that fails in any way is a log that could not be read."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    try:
        ready = await asyncio.wait_for(source.ready(client), timeout)
    except TimeoutError:
        return None, late_audit(source.name, timeout)
    except Exception as error:  # unreadable, or a closed client, or a caller's auth that failed: said
        failed = (
            str(error) if isinstance(error, AuditSourceUnreadable) else f"{type(error).__name__}: {error}"
        )
        return None, unreadable_audit(source.name, source.input.redacted(failed))
    verified: asyncio.Future[tuple[AuditMatch | None, AuditVerification]] = loop.create_future()

    def settle(outcome: tuple[AuditMatch | None, AuditVerification]) -> None:
        if not verified.done():
            verified.set_result(outcome)

    def read() -> None:
        outcome = verify_run(execution, ready)
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: nobody waits for it
            loop.call_soon_threadsafe(settle, outcome)

    threading.Thread(target=read, name=f"audit {source.name}", daemon=True).start()
    try:  # one bound for the fetch and the reading together
        return await asyncio.wait_for(verified, max(deadline - loop.time(), 0.0))
    except TimeoutError:
        return None, late_audit(source.name, timeout)
