"""`GET /v1`: which release this queue is and what it reads, asked without a token.

An agent of another release (after a rollback, or in a rolling upgrade while the replicas differ)
asks it before submitting and leaves out the dry-run fields this queue does not read
(`reviewer.plan.format_fields`). It says nothing about the queue's contents.
"""

from __future__ import annotations

from functools import cache

from fastapi import APIRouter, Response

from reviewer import release
from reviewer.plan.format_fields import proposal_fields
from reviewer.plan.proposal import FORMAT_V1
from reviewer.queue.messages import QueueVersion
from reviewer.service.responses import json_response
from reviewer.service.store import SCHEMA_VERSION

router = APIRouter(tags=["version"])


@cache
def this_queue() -> QueueVersion:
    """Made once: what a release reads does not change while it serves."""
    return QueueVersion(
        release=release(),
        schema_version=SCHEMA_VERSION,
        proposal_format=FORMAT_V1,
        proposal_fields=list(proposal_fields()),
    )


@router.get("/v1", response_model=QueueVersion)
async def queue_version() -> Response:
    return json_response(this_queue())
