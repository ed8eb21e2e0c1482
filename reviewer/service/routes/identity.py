"""`GET /v1/whoami`: who the token says the caller is."""

from __future__ import annotations

from fastapi import APIRouter, Response

from reviewer.queue.messages import Whoami
from reviewer.service.deps import Caller
from reviewer.service.responses import errors, json_response

router = APIRouter(tags=["identity"])


@router.get("/v1/whoami", response_model=Whoami, responses=errors())
async def whoami(identity: Caller) -> Response:
    return json_response(Whoami(name=identity.name, role=identity.role))
