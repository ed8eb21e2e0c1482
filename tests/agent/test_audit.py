"""What a run learns from the API's audit log, whatever its kind: the dry run's window read once it ends
(the gate's own dry-run requests known by their ids, every other write someone else's), and a log that
cannot be read stops the dry run."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.agent import AuditUnavailable, HttpRequest, RecordBackend, Recording, dry_run
from reviewer.agent.audit import dry_run_window, require_readable, verify_after_run, writes_kept
from reviewer.agent.runs import running
from reviewer.audit import inputs
from reviewer.audit.registry import BadAuditSource, audit_source
from reviewer.sample_api import tools

API_LOG = audit_source("api:/v1/audit")


def entry(request_id: str | None, *, path: str = "/v1/tickets") -> dict[str, Any]:
    """A write the log holds, made now."""
    at = datetime.now(UTC).isoformat()
    return {"at": at, "method": "POST", "path": path, "status": 201, "request_id": request_id}


def api_serving(*pages: Any) -> httpx.AsyncClient:
    """An API whose `GET /v1/audit` answers `pages` in turn (the last again); an int is that status."""
    answers = list(pages)

    def answer(request: httpx.Request) -> httpx.Response:
        page = answers.pop(0) if len(answers) > 1 else answers[0]
        if isinstance(page, int):
            return httpx.Response(page)
        return httpx.Response(200, json={"entries": page})

    return httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(answer))


def window(client: httpx.AsyncClient | None, source: Any = API_LOG) -> Any:
    """The dry run's window read, the gate having sent one create (`dry-1`) in it."""
    now = datetime.now(UTC)
    sent = {"dry-1": HttpRequest("POST", "/v1/tickets", {"dryRun": "All"})}
    return asyncio.run(dry_run_window(source, client, now - timedelta(seconds=1), now, sent))


def test_an_api_log_is_read_through_the_runs_client_and_tells_kept_from_around() -> None:
    """The gate's dry-run request in a log of kept writes is a write the API kept; another client's
    write in the window is one the gate did not make, not a kept one."""
    client = api_serving([entry("dry-1"), entry("someone-else", path="/v1/tickets/t9")])
    read = window(client)
    assert (writes_kept(API_LOG, read), len(read.unplanned)) == (1, 1)
    assert read.unplanned[0].row.path == "/v1/tickets/t9"


def test_a_log_of_every_request_leaves_what_was_kept_unknown(tmp_path: Path) -> None:
    """An access log holds the gate's dry-run requests honoured or not: it cannot count kept writes."""
    log = tmp_path / "access.json"
    log.write_text(
        f'{{"time": "{datetime.now(UTC).isoformat()}", "method": "POST", "uri": "/v1/tickets?dryRun=All", '
        '"status": 201, "request_id": "dry-1"}\n'
    )
    source = audit_source(f"access-log:{log}")
    read = window(None, source=source)
    assert (read.gate_dry_runs, writes_kept(source, read), read.unplanned) == (1, None, ())


def test_a_log_of_kept_writes_with_a_line_it_cannot_read_proves_nothing_was_kept() -> None:
    """The unreadable entry may be the kept write: the count is unknown, never 0."""
    read = window(api_serving([entry(None, path="/v1/tickets/t9"), {"at": "yesterday", "method": "POST"}]))
    assert (read.malformed_count, writes_kept(API_LOG, read)) == (1, None)


@pytest.mark.parametrize("answer", [404, 503, {"not": "a log"}])
def test_an_api_log_that_cannot_be_read_stops_the_dry_run(answer: Any) -> None:
    def answering(request: httpx.Request) -> httpx.Response:
        return httpx.Response(answer) if isinstance(answer, int) else httpx.Response(200, json=answer)

    client = httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(answering))
    with pytest.raises(AuditUnavailable, match="api:/v1/audit cannot be read"):
        asyncio.run(require_readable(API_LOG, client)) if isinstance(answer, int) else window(client)


def test_an_api_log_without_a_client_is_refused_not_guessed() -> None:
    with pytest.raises(AuditUnavailable, match="read through the API's client, and none was given"):
        window(None)


def test_an_api_log_is_read_no_further_than_a_document_may_be(monkeypatch: pytest.MonkeyPatch) -> None:
    """An API that answers without end costs no more memory than the document limit."""
    monkeypatch.setattr(inputs, "MAX_DOCUMENT_BYTES", 1_000)
    endless = httpx.AsyncClient(
        base_url="http://api.test",
        transport=httpx.MockTransport(lambda request: httpx.Response(200, content=b"[" + b" " * 5_000)),
    )
    with pytest.raises(AuditUnavailable, match="larger than 1,000 bytes"):
        window(endless)


@pytest.mark.parametrize(("logged_id", "base"), [(True, ""), (False, ""), (False, "/api")])
def test_a_server_dry_run_learns_what_the_api_kept_and_who_wrote_around_it(
    logged_id: bool, base: str
) -> None:
    """An API that ignores the dry-run parameter keeps the create, under the request id the gate sent
    (or with no id: its log keeps another header, or none; found by its path as the log writes it,
    under the API's base path); another client's write lands meanwhile. The plan says one kept, one
    around."""
    log: list[dict[str, Any]] = []

    def api(request: httpx.Request) -> httpx.Response:
        if request.method == "GET":
            return httpx.Response(200, json={"entries": log})
        kept = entry(request.headers["X-Request-Id"] if logged_id else None, path=request.url.path)
        log.extend([kept, entry(None, path=f"{base}/v1/tickets/t9")])
        return httpx.Response(201, json={"id": "tk-4", "title": "x"})

    async def run() -> Any:
        client = httpx.AsyncClient(base_url=f"http://api.test{base}", transport=httpx.MockTransport(api))
        async with dry_run(
            "server", client=client, audit="api:/v1/audit", dry_run_query={"dryRun": "All"}
        ) as rec:
            await tools.create_ticket(title="x")
        return rec.to_proposal(
            proposal_id="p", title="t", agent=tools.AGENT, target=tools.target("http://api.test")
        )

    plan = asyncio.run(run())
    assert (plan.dry_run.writes_kept, plan.dry_run.writes_around) == (1, 1)


def test_a_record_dry_run_kept_nothing_whatever_the_log_holds() -> None:
    """Nothing was sent: every write in the window is someone else's, none is a kept one."""

    async def run() -> Recording:
        recording = Recording(RecordBackend(), client=api_serving([]), audit=API_LOG)
        await recording.start()
        recording.client = api_serving([entry(None)])  # another client writes while the task runs
        await recording.finish()
        return recording

    recording = asyncio.run(run())
    assert recording.writes_kept == 0 and recording.audit_match is not None
    assert len(recording.audit_match.unplanned) == 1


@pytest.mark.parametrize(
    ("spec", "says"),
    [
        ("/v1/audit", "api:/v1/audit for a log the API serves itself"),
        ("api:v1/audit", "give the log's path on the API"),
        ("api://collector.example/v1/audit", "so it names no other host"),
    ],
)
def test_an_audit_option_the_api_kind_cannot_read_says_what_to_write(spec: str, says: str) -> None:
    with pytest.raises(BadAuditSource, match=says):
        audit_source(spec)


def test_a_header_for_an_api_log_or_a_bare_url_is_refused_with_what_to_write() -> None:
    with pytest.raises(BadAuditSource, match="read with the API's own credential"):
        audit_source("api:/v1/audit", headers={"Authorization": "Bearer x"})
    with pytest.raises(BadAuditSource, match="sample:https://api.example/v1/audit for a URL"):
        audit_source("https://api.example/v1/audit")


def test_an_api_log_outside_a_run_is_refused_with_the_kind_that_reads_it() -> None:
    """`reviewer verify` has no API client: it is told to name the same log as sample:URL."""
    with pytest.raises(Exception, match="give sample:URL of the same log"):
        next(iter(API_LOG.rows()))


def test_a_real_runs_log_that_fails_in_any_way_is_reported_not_raised() -> None:
    """A closed client, a caller's auth that raises: the run's report still goes, saying why."""

    def broken(request: httpx.Request) -> httpx.Response:
        raise ValueError("the auth plug-in gave up")

    client = httpx.AsyncClient(base_url="http://api.test", transport=httpx.MockTransport(broken))
    match, said = asyncio.run(verify_after_run(None, API_LOG, client, timeout=5))  # type: ignore[arg-type]
    assert match is None and not said["complete"]
    assert said.get("problem") == "could not be read: ValueError: the auth plug-in gave up"


@pytest.mark.parametrize("ending", [ValueError("the agent's own"), TimeoutError()])
def test_a_dry_run_that_fails_ends_with_its_own_error_not_the_logs(ending: BaseException) -> None:
    """The block raises (or is timed out) and the log is away by then: the caller gets what ended the
    block, and the log is not read for a plan that will not be made."""

    async def run() -> Recording:
        recording = Recording(RecordBackend(), client=api_serving([], 503), audit=API_LOG)
        with pytest.raises(type(ending)):
            async with running(recording, dry=True):
                raise ending
        return recording

    recording = asyncio.run(run())
    assert recording.finished_at is not None and recording.audit_match is None


def test_an_api_log_is_never_fetched_from_where_the_api_redirects_nor_forever(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The run's client follows redirects (as many runners set it up): the log's fetch does not, so a
    302 to another host is a log that cannot be read. A body that trickles in without end is given up."""
    seen: list[str] = []

    def redirecting(request: httpx.Request) -> httpx.Response:
        seen.append(str(request.url))
        return httpx.Response(302, headers={"location": "https://collector.example/v1/audit"})

    following = httpx.AsyncClient(
        base_url="http://api.test", transport=httpx.MockTransport(redirecting), follow_redirects=True
    )
    with pytest.raises(AuditUnavailable, match="answered 302, not 200"):
        window(following)
    assert seen == ["http://api.test/v1/audit"]

    async def trickle() -> Any:
        while True:
            yield b" "
            await asyncio.sleep(0.01)

    monkeypatch.setattr(inputs, "URL_TIMEOUT_SECONDS", 0.2)
    slow = httpx.AsyncClient(
        base_url="http://api.test",
        transport=httpx.MockTransport(lambda request: httpx.Response(200, content=trickle())),
    )
    with pytest.raises(AuditUnavailable, match="not read whole within 0.2 s"):
        window(slow)
