"""A redirect never moves an approved write: real loopback servers, a runner's client that follows redirects.

The API answers the approved POST with a 307 or 308 pointing at a second server (another origin) or at
a path outside the approved base on its own host. Both servers count what reaches them: the redirect's
target must see nothing, and the run must stop at the 3xx with the later, chained call unsent.
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest

from reviewer.agent import OffTarget, execute_approved, local_approval
from reviewer.agent.backends import ServerBackend
from reviewer.agent.http_values import HttpRequest
from reviewer.plan.proposal import parse_proposal
from tests.builders import proposal_document


@dataclass
class CountingServer:
    """A loopback HTTP server that records every request (method, path, headers) and answers
    `status` with `location`, or 201 with an id."""

    status: int = 201
    location: str | None = None
    seen: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    url: str = ""

    def handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("content-length") or 0)
                self.rfile.read(length)
                server.seen.append((self.command, self.path, dict(self.headers)))
                if server.location is not None:
                    self.send_response(server.status)
                    self.send_header("Location", server.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                body = json.dumps({"id": "elsewhere-1"}).encode()
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            do_POST = do_PATCH = do_PUT = do_DELETE = do_GET = _answer

            def log_message(self, format: str, *args: Any) -> None:
                """Quiet: the test reads `seen`."""

        return Handler


@pytest.fixture
def servers() -> Iterator[tuple[CountingServer, CountingServer]]:
    """(the API, the server its redirects point at), both serving on loopback until the test ends."""
    started: list[ThreadingHTTPServer] = []
    pair = (CountingServer(), CountingServer())
    for counting in pair:
        http = ThreadingHTTPServer(("127.0.0.1", 0), counting.handler())
        counting.url = f"http://127.0.0.1:{http.server_address[1]}"
        threading.Thread(target=http.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True).start()
        started.append(http)
    yield pair
    for http in started:
        http.shutdown()
        http.server_close()


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
    servers: tuple[CountingServer, CountingServer], status: int, elsewhere: str
) -> None:
    api, other = servers
    api.status = status
    api.location = f"{other.url}/v1/tickets" if elsewhere == "other host" else "/admin/tickets"
    approval = _plan(f"{api.url}/v1")

    async def run() -> Any:
        async with httpx.AsyncClient(
            base_url=f"{api.url}/v1", follow_redirects=True, headers={"X-Api-Key": "secret-key"}
        ) as client:
            return await execute_approved(None, approval, client=client)

    execution = asyncio.run(run())
    assert other.seen == []
    assert [(method, path) for method, path, _ in api.seen] == [("POST", "/v1/tickets")]
    [call] = execution.executed
    assert call.answer.status == "error" and call.answer.http_status == status
    assert "not followed" in (call.answer.message or "") and api.location in (call.answer.message or "")
    assert execution.ended == "stopped" and not execution.ok
    assert execution.stop is not None and execution.stop.position == 2
    assert execution.real_results == {}
    assert f"#1 create_ticket {status}" in execution.summary()


def test_a_dry_run_request_is_not_redirected_either(servers: tuple[CountingServer, CountingServer]) -> None:
    """The server backend sends the dry run itself: a 307 there must not carry the body elsewhere."""
    api, other = servers
    api.status, api.location = 307, f"{other.url}/v1/tickets"

    async def dry() -> Any:
        async with httpx.AsyncClient(base_url=api.url, follow_redirects=True) as client:
            answer, _ = await ServerBackend(client).answer(HttpRequest("POST", "/v1/tickets", None, {"a": 1}))
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
    servers: tuple[CountingServer, CountingServer], path: str
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
