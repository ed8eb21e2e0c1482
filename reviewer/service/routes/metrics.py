"""`GET /metrics`: the queue's figures for Prometheus, to tokens of the `metrics` role only."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from prometheus_client import CONTENT_TYPE_LATEST

from reviewer.service.deps import Caller, require_role
from reviewer.service.metrics import Metrics

router = APIRouter(tags=["operations"], include_in_schema=False)


@router.get("/metrics")
def metrics(request: Request, identity: Caller) -> Response:
    """A plain `def`: the shared figures are queries, run off the event loop."""
    require_role(identity, "metrics", "read the queue's metrics")
    figures: Metrics = request.app.state.metrics
    return Response(figures.exposition(), media_type=CONTENT_TYPE_LATEST)
