"""`GET /healthz` and `GET /readyz`: the probes a load balancer or Kubernetes asks, without a token.

`/healthz` says the process serves (it touches nothing else, so a database outage never gets a
replica restarted); `/readyz` says this replica can serve the queue: its database answers, holds
the schema this release writes, and takes writes (after a write failed for an outage, until a write
succeeds). Neither says anything about the queue's contents.
"""

from __future__ import annotations

from fastapi import APIRouter, Response
from fastapi.responses import JSONResponse

from reviewer import release
from reviewer.service.deps import Store
from reviewer.service.errors import DatabaseUnusable
from reviewer.service.store import SCHEMA_VERSION, QueueStore

router = APIRouter(tags=["operations"], include_in_schema=False)

NOT_CACHED = {"Cache-Control": "no-store"}


RELEASE = release()
"""Read once: the release serving does not change while it serves."""


@router.get("/healthz")
async def healthz() -> Response:
    """The process serves, which release it is and the schema it writes (a rolling upgrade's probe
    tells the replicas apart); nothing else is read."""
    return JSONResponse(
        {"status": "serving", "release": RELEASE, "schema_version": SCHEMA_VERSION}, headers=NOT_CACHED
    )


@router.get("/readyz")
def readyz(store: Store) -> Response:
    """A plain `def`: the database's answer may take its connect timeout, off the event loop."""
    reason = unready_reason(store)
    if reason is None:
        return JSONResponse({"status": "ready", "schema_version": SCHEMA_VERSION}, headers=NOT_CACHED)
    return JSONResponse({"status": "not ready", "reason": reason}, status_code=503, headers=NOT_CACHED)


def unready_reason(store: QueueStore) -> str | None:
    """Why this replica cannot serve the queue now, None when it can."""
    try:
        version = store.schema_version()
    except DatabaseUnusable as error:
        return error.message
    except Exception as error:  # the driver's own errors: sqlite3's, psycopg's
        first_line = (str(error).strip().splitlines() or [type(error).__name__])[0][:200]
        return f"the queue's database does not answer: {first_line}"
    if version != SCHEMA_VERSION:
        return f"the database holds queue schema version {version}, and this release writes {SCHEMA_VERSION}"
    failure = store.write_failure()
    return None if failure is None else f"the queue's database takes no writes: {failure}"
