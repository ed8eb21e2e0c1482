"""What a run learns from the API's audit log: only the lines its own writes left, or nothing known."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx

from reviewer.agent import HttpAuditLog, HttpRequest
from reviewer.agent.audit import RunAudit


def audit_api(pages: list[Any]) -> httpx.AsyncClient:
    """An API whose audit log answers `pages` in turn; an int page is that HTTP status instead."""

    def answer(request: httpx.Request) -> httpx.Response:
        page = pages.pop(0)
        if isinstance(page, int):
            return httpx.Response(page)
        return httpx.Response(200, json={"entries": page})

    return httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(answer))


def line(method: str, path: str, body: Any) -> dict[str, Any]:
    return {"method": method, "path": path, "body": body}


def kept(pages: list[Any], sent: list[HttpRequest | None]) -> list[dict[str, Any]] | None:
    async def run() -> list[dict[str, Any]] | None:
        async with audit_api(pages) as client:
            run_audit = RunAudit(HttpAuditLog(), client)
            await run_audit.start()
            return await run_audit.kept(sent)

    return asyncio.run(run())


def test_only_the_new_lines_the_run_sent_count() -> None:
    """Another client's write lands during the run: it is in the log, not in this run's kept lines."""
    earlier = line("POST", "/v1/tickets", {"title": "old"})
    mine = line("DELETE", "/v1/tickets/t3", None)
    theirs = line("PATCH", "/v1/tickets/t9", {"status": "closed"})
    sent = [HttpRequest("DELETE", "/v1/tickets/t3"), None]
    assert kept([[earlier], [earlier, theirs, mine]], sent) == [mine]


def test_a_log_unreadable_before_or_after_the_run_leaves_the_count_unknown() -> None:
    sent: list[HttpRequest | None] = [HttpRequest("DELETE", "/v1/tickets/t3")]
    assert kept([503], sent) is None
    assert kept([[], 503], sent) is None


def test_without_a_log_or_a_client_nothing_is_known() -> None:
    async def run() -> tuple[list[dict[str, Any]] | None, list[dict[str, Any]] | None]:
        async with audit_api([]) as client:
            no_log, no_client = RunAudit(None, client), RunAudit(HttpAuditLog(), None)
            for run_audit in (no_log, no_client):
                await run_audit.start()
            return await no_log.kept([]), await no_client.kept([])

    assert asyncio.run(run()) == (None, None)
