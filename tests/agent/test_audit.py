"""What a run learns from the API's audit log: only the lines its own writes left, or nothing known."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from reviewer.agent import AuditUnavailable, HttpAuditLog, HttpRequest
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


def kept(
    pages: list[Any], sent: list[HttpRequest | None], *, required: bool = False
) -> list[dict[str, Any]] | None:
    async def run() -> list[dict[str, Any]] | None:
        async with audit_api(pages) as client:
            run_audit = RunAudit(HttpAuditLog(), client, required=required)
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


def test_a_kept_create_is_attributed_though_its_line_holds_what_the_server_added() -> None:
    """The line of a create carries the id the server minted: a body comparison missed it."""
    sent = [HttpRequest("POST", "/v1/tickets", {"dryRun": "All"}, {"title": "Printer on fire"})]
    created = {"method": "POST", "path": "/v1/tickets", "body": {"title": "Printer on fire", "id": "tk-4"}}
    assert kept([[], [created]], sent) == [created]


def test_a_line_that_records_the_query_is_attributed_by_it_too() -> None:
    """Another client's real write to the same path, at the same time, is not the dry run's."""
    sent = [HttpRequest("POST", "/v1/tickets", {"dryRun": "All"}, {"title": "a"})]
    theirs = {"method": "POST", "path": "/v1/tickets", "query": {}}
    mine = {"method": "POST", "path": "/v1/tickets?dryRun=All"}
    assert kept([[], [theirs, mine]], sent) == [mine]


def test_a_dry_runs_log_that_cannot_be_read_stops_it() -> None:
    sent: list[HttpRequest | None] = [HttpRequest("DELETE", "/v1/tickets/t3")]
    with pytest.raises(AuditUnavailable, match="cannot be read"):
        kept([404], sent, required=True)
    with pytest.raises(AuditUnavailable, match="is not an audit log"):
        kept([[], {"oops": 1}], sent, required=True)
