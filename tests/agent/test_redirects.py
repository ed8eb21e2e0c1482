"""A redirect never moves an approved write: real loopback servers, a runner's client that follows redirects.

The API answers the approved POST with a 307 or 308 pointing at a second server (another origin) or at
a path outside the approved base on its own host. Both servers count what reaches them: the redirect's
target must see nothing, and the run must stop at the 3xx with the later, chained call unsent.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

import httpx
import pytest

from reviewer.agent import OffTarget, execute_approved, local_approval
from reviewer.agent.backends import ServerBackend
from reviewer.agent.http_values import HttpRequest
from reviewer.plan.proposal import parse_proposal
from tests.agent.loopback import Answer, LoopbackServer, loopback_servers
from tests.builders import proposal_document


def redirect_to(location: str, status: int) -> Answer:
    def answer(server: LoopbackServer, handler: BaseHTTPRequestHandler) -> None:
        handler.send_response(status)
        handler.send_header("Location", location)
        handler.send_header("Content-Length", "0")
        handler.end_headers()

    return answer


@pytest.fixture
def servers() -> Iterator[list[LoopbackServer]]:
    """[the API, the server its redirects point at], both serving on loopback until the test ends."""
    with loopback_servers(2) as running:
        yield running


def _plan(base_url: str) -> Any:
    """Create a ticket, then close t1 into it (the second call takes the first one's id), under
    `base_url`, which ends in `/v1`."""
    calls = [
        {
            "tool": "create_ticket",
            "effect": "create",
            "args": {"title": "Printer on fire"},
            "request": {"method": "POST", "path": "/tickets", "body": {"title": "Printer on fire"}},
        },
        {
            "tool": "update_ticket",
            "effect": "update",
            "args": {"id": "t1", "mergedInto": "<id from call 1>"},
            "request": {"method": "PATCH", "path": "/tickets/t1", "body": {"mergedInto": "<id from call 1>"}},
        },
    ]
    document = proposal_document(calls, via="record", target={"api": "sample", "base_url": base_url})
    return local_approval(parse_proposal(json.dumps(document).encode(), "test"))


@pytest.mark.parametrize("status", [307, 308])
@pytest.mark.parametrize("elsewhere", ["other host", "same host, outside the base"])
def test_a_redirect_is_the_calls_answer_and_nothing_reaches_its_target(
    servers: list[LoopbackServer], status: int, elsewhere: str
) -> None:
    api, other = servers
    location = f"{other.url}/v1/tickets" if elsewhere == "other host" else "/admin/tickets"
    api.answer = redirect_to(location, status)
    approval = _plan(f"{api.url}/v1")

    async def run() -> Any:
        async with httpx.AsyncClient(
            base_url=f"{api.url}/v1", follow_redirects=True, headers={"X-Api-Key": "secret-key"}
        ) as client:
            return await execute_approved(None, approval, client=client)

    execution = asyncio.run(run())
    assert other.seen == []
    assert [(method, path) for method, path, _, _ in api.seen] == [("POST", "/v1/tickets")]
    [call] = execution.executed
    assert call.answer.status == "error" and call.answer.http_status == status
    assert "not followed" in (call.answer.message or "") and location in (call.answer.message or "")
    assert execution.ended == "stopped" and not execution.ok
    assert execution.stop is not None and execution.stop.position == 2
    assert execution.real_results == {}
    assert f"#1 create_ticket {status}" in execution.summary()


WRITE = HttpRequest("POST", "/v1/tickets", None, {"a": 1})


def test_a_dry_run_request_is_not_redirected_either(servers: list[LoopbackServer]) -> None:
    """The server backend sends the dry run itself: a 307 there must not carry the body elsewhere."""
    api, other = servers
    api.answer = redirect_to(f"{other.url}/v1/tickets", 307)

    async def dry() -> Any:
        async with httpx.AsyncClient(base_url=api.url, follow_redirects=True) as client:
            answer, _ = await ServerBackend(client, {"dryRun": "All"}).answer(
                HttpRequest("POST", "/v1/tickets", None, {"a": 1})
            )
            return answer

    answer = asyncio.run(dry())
    assert other.seen == [] and len(api.seen) == 1
    assert answer.status == "error" and answer.http_status == 307


@pytest.mark.parametrize(
    "path",
    [
        "/v1/..;/admin/t1",
        "/v1/tickets/..;jsessionid=1/..;/admin",
        "/v1/tickets/%2e%2e;/admin",
        "/v1/tickets/..%3b/admin",
        "/v1/tickets/.;/t1",
        "/v1/tickets/%252e%252e/admin",
    ],
)
def test_dot_segments_with_path_parameters_are_refused_before_sending(
    servers: list[LoopbackServer], path: str
) -> None:
    """Servlet containers read `..;x` as `..`: the off-target check refuses it, encoded or not."""
    api, _ = servers
    call = {
        "tool": "update_ticket",
        "effect": "update",
        "args": {"id": "t1"},
        "request": {"method": "PATCH", "path": path, "body": {"status": "closed"}},
    }
    document = proposal_document([call], via="record", target={"api": "sample", "base_url": f"{api.url}/v1"})
    approval = local_approval(parse_proposal(json.dumps(document).encode(), "test"))

    async def run() -> Any:
        async with httpx.AsyncClient(base_url=f"{api.url}/v1") as client:
            return await execute_approved(None, approval, client=client)

    execution = asyncio.run(run())
    assert isinstance(execution.stop, OffTarget), execution.stop
    assert api.seen == []
