"""A gated run verified call by call against nginx's access log (the `log_format` of
docs/audit-logs.md), nginx being Debian's package started here on loopback in front of the sample API.

The agent dry-runs through nginx (its requests carry `dryRun=All`), a reviewer approves, the run replays
the plan through nginx with a request id per write, and `reviewer verify` reads nginx's log.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reviewer.agent import execute_approved, local_approval
from reviewer.audit.checks import alarm_line, audit_execution, writes_during_dry_run
from reviewer.audit.commands import unplanned_text
from reviewer.audit.registry import audit_source
from reviewer.sample_api import tools
from reviewer.sample_api.server import RunningSampleApi
from tests.agent.fixtures import Queue
from tests.audit.gated import executions, gated_run, verify
from tests.audit.nginx import LOG_FORMAT_WITHOUT_IDS, Proxy, nginx_in_front_of

SUMMARY_ALL_MATCHED = "audit: 4 of 4 calls matched; 0 writes in the audit log no approved call made"


@pytest.fixture
def proxy(sample_api: RunningSampleApi, tmp_path: Path) -> Iterator[Proxy]:
    with nginx_in_front_of(sample_api.base_url, tmp_path / "nginx") as running:
        yield running


def test_a_gated_run_is_verified_call_by_call_by_request_id(queue: Queue, proxy: Proxy) -> None:
    """Every call is found by the id the executor sent (nginx logs `$http_x_request_id`), the 409 too;
    the dry run's four requests are in the log, known by the ids the gate sent them with (the plan
    carries them), and are not counted as writes."""
    gated_run(queue, proxy.url, "nginx-verified-0001")
    result = verify(queue, "nginx-verified-0001", f"access-log:{proxy.access_log}")
    lines = result.stdout.splitlines()
    assert result.returncode == 0, result.stdout + result.stderr
    assert lines[-1] == SUMMARY_ALL_MATCHED
    call_lines = [line for line in lines if line.startswith("call ")]
    assert len(call_lines) == 4
    assert all("matched at" in line and "by request id" in line for line in call_lines), call_lines
    (report,) = asyncio.run(executions(queue, "nginx-verified-0001"))
    assert [entry["seq"] for entry in report.request_ids or []] == [1, 2, 3, 4]
    for entry in report.request_ids or []:
        assert entry["header"] == "X-Request-Id"
        assert len(entry.get("api_request_id") or "") == 32, entry  # nginx's own $request_id, answered
    for entry in report.request_ids or []:
        assert len(entry["request_id"]) == 32 and int(entry["request_id"], 16) >= 0  # 128 random bits
    assert "4 dry-run requests in the window" in result.stdout
    assert (
        "note: 4 audit entries excluded as the dry run's own requests, by request ids the proposal names "
        "(the proposal's word, not the API's)"
    ) in lines


def test_a_second_clients_write_during_the_run_is_reported_as_unplanned(queue: Queue, proxy: Proxy) -> None:
    """Another client with the same API writes while the run holds its claim: every approved call still
    matches, the write nobody approved is listed with its user agent, and the exit is 1."""

    async def second_client(_: httpx.Response) -> None:
        async with httpx.AsyncClient(base_url=proxy.url, headers={"User-Agent": "someone-else/1"}) as other:
            (await other.post("/v1/tickets", json={"title": "made around the gate"})).raise_for_status()

    gated_run(queue, proxy.url, "nginx-unplanned-0001", second_client)
    result = verify(queue, "nginx-unplanned-0001", f"access-log:{proxy.access_log}")
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    assert lines[-1] == "audit: 4 of 4 calls matched; 1 writes in the audit log no approved call made"
    (unplanned,) = [line for line in lines if line.startswith("unplanned: ")]
    assert unplanned.startswith("unplanned: POST /v1/tickets 201 at ")


def test_a_log_without_the_runs_window_cannot_vouch_for_it(
    queue: Queue, proxy: Proxy, tmp_path: Path
) -> None:
    """An empty (or rotated-away) log is not a clean bill: the calls are missing and the exit is 1."""
    gated_run(queue, proxy.url, "nginx-empty-0001")
    empty = tmp_path / "empty.log"
    empty.write_text("", encoding="utf-8")
    result = verify(queue, "nginx-empty-0001", f"access-log:{empty}")
    assert result.returncode == 1
    assert "it cannot vouch for the run" in result.stdout
    assert result.stdout.splitlines()[-1] == (
        "audit: 0 of 4 calls matched; 0 writes in the audit log no approved call made"
    )
    missing = verify(queue, "nginx-empty-0001", f"access-log:{tmp_path / 'no-such.log'}")
    assert missing.returncode == 1
    assert "could not be read" in missing.stdout


def test_the_sample_apis_own_log_read_from_its_url(queue: Queue, sample_api: RunningSampleApi) -> None:
    """`sample:URL`: the sample API keeps each write's `X-Request-Id`, and no line for a refused write.
    Another client creates a ticket on the same path during the run: the three kept writes match by
    request id, the other client's create is unplanned, never taken for the run's (not verified), and
    the refused delete (409) is not looked for: a log of kept writes holds none of it."""

    async def second_client(_: httpx.Response) -> None:
        async with httpx.AsyncClient(base_url=sample_api.base_url) as other:
            (await other.post("/v1/tickets", json={"title": "made around the gate"})).raise_for_status()

    gated_run(queue, sample_api.base_url, "sample-url-0001", second_client)
    result = verify(queue, "sample-url-0001", f"sample:{sample_api.base_url}/v1/audit")
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    assert lines[-1] == "audit: 3 of 3 calls matched; 1 writes in the audit log no approved call made"
    call_lines = [line for line in lines if line.startswith("call ")]
    assert [line.split(": ", 1)[1].split(" ", 1)[0] for line in call_lines] == ["matched"] * 3
    assert all(line.endswith("by request id") for line in call_lines[:3]), call_lines
    assert call_lines[0].startswith("call 1 create_ticket POST /v1/tickets: matched at ")
    (unplanned,) = [line for line in lines if line.startswith("unplanned: ")]
    assert unplanned.startswith("unplanned: POST /v1/tickets 201 at ")


def test_in_a_log_without_ids_two_candidates_leave_the_call_ambiguous_and_the_run_not_verified(
    queue: Queue, sample_api: RunningSampleApi, tmp_path: Path
) -> None:
    """nginx logging no request id, read as `jsonl:`: another client creates a ticket on the same path
    during the run, so two entries could be the run's create and neither is picked (the nearest in
    time could be the other client's); the calls with one candidate are matched, by method and path
    only, which the verification says."""

    async def second_client(_: httpx.Response) -> None:
        async with httpx.AsyncClient(base_url=proxy.url) as other:
            (await other.post("/v1/tickets", json={"title": "made around the gate"})).raise_for_status()

    with nginx_in_front_of(sample_api.base_url, tmp_path / "no-ids", LOG_FORMAT_WITHOUT_IDS) as proxy:
        gated_run(queue, proxy.url, "nginx-no-ids-0001", second_client)
        result = verify(queue, "nginx-no-ids-0001", f"jsonl:{proxy.access_log}")
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    call_lines = [line for line in lines if line.startswith("call ")]
    assert [line.split(": ", 1)[1].split(" ", 1)[0] for line in call_lines] == [
        "ambiguous,",
        "matched",
        "matched",
        "matched",
    ]
    assert call_lines[0].startswith(
        "call 1 create_ticket POST /v1/tickets: ambiguous, not verified: 2 entries of the same method, "
        f"path and query could each be it ({proxy.access_log}:"
    )
    assert call_lines[0].endswith("and this log keeps no request ids to tell them apart")
    assert all(
        line.endswith("by method and path only: this log keeps no request ids") for line in call_lines[1:]
    ), call_lines
    assert lines[-1].startswith("audit: 3 of 4 calls matched; ")
    assert "excluded as the dry run's own" not in result.stdout  # no entry carries an id to leave out


def test_a_write_dressed_as_a_dry_run_is_in_the_writes_around_alarm(
    proxy: Proxy, sample_api: RunningSampleApi, tmp_path: Path
) -> None:
    """Another client writes while the gate dry-runs, two of its writes asking for a dry run in their
    query (`?dry_run=1`, `?validateOnly=true`), which the sample API ignores: all three are writes the
    gate did not make, said so, since only the request ids the gate sent its own dry-run requests with
    make an entry its dry run. A dry run nobody wrote around (through a second nginx, with a log of its
    own) shows none, and counts the gate's four."""

    async def dry_run(proxy: Proxy, write_around: bool):  # type: ignore[no-untyped-def]
        async def around(response: httpx.Response) -> None:
            if write_around and response.request.method == "POST":
                async with httpx.AsyncClient(base_url=proxy.url, headers={"User-Agent": "child/1"}) as child:
                    await child.delete("/v1/tickets/t9")  # 404, still a write the API was asked for
                    patched = await child.patch("/v1/tickets/t2?dry_run=1", json={"status": "closed"})
                    patched.raise_for_status()
                    made = await child.post("/v1/tickets?validateOnly=true", json={"title": "kept"})
                    made.raise_for_status()

        async with httpx.AsyncClient(base_url=proxy.url, event_hooks={"response": [around]}) as api:
            recording, proposal = await tools.dry_run_reference(api, "server", "dry-alarm", proxy.url)
        assert recording.started_at is not None and recording.finished_at is not None
        assert proposal.dry_run.request_ids == list(recording.dry_run_request_ids)
        return writes_during_dry_run(
            audit_source(f"access-log:{proxy.access_log}"),
            recording.started_at,
            recording.finished_at,
            recording.dry_run_request_ids,
        )

    with nginx_in_front_of(sample_api.base_url, tmp_path / "quiet") as quiet_proxy:
        quiet = asyncio.run(dry_run(quiet_proxy, False))
        source = audit_source(f"access-log:{quiet_proxy.access_log}")
    assert alarm_line(quiet, source).startswith(
        f"dry run: 0 writes during the dry run the gate did not make ({source.name} read, "
    )
    assert alarm_line(quiet, source).endswith(
        "it holds 4 of the gate's dry-run requests and does not say whether the API honoured them as dry runs"
    )
    assert quiet.gate_dry_runs == 4
    noisy = asyncio.run(dry_run(proxy, True))
    assert alarm_line(noisy, source).startswith("dry run: 3 writes during the dry run the gate did not make")
    assert [(one.row.method, one.row.path, one.row.query, one.row.status) for one in noisy.unplanned] == [
        ("DELETE", "/v1/tickets/t9", "", 404),
        ("PATCH", "/v1/tickets/t2", "dry_run=1", 200),
        ("POST", "/v1/tickets", "validateOnly=true", 201),
    ]
    assert [len(one.notes) for one in noisy.unplanned] == [0, 1, 1]
    assert "its query asks for a dry run" in unplanned_text(noisy.unplanned[1])


def test_a_write_under_a_borrowed_request_id_is_named_and_not_verified(queue: Queue, proxy: Proxy) -> None:
    """The access log is world-readable (nginx makes it 0644): another client takes the approved first
    call's request id (here from the request itself, as the log would show it) and sends a DELETE under
    it. `reviewer verify` matches call 1 with its own entry, names the DELETE as a write no approved
    call made that reuses call 1's request id, and exits 1."""

    async def borrower(response: httpx.Response) -> None:
        borrowed = response.request.headers["X-Request-Id"]
        async with httpx.AsyncClient(base_url=proxy.url, headers={"X-Request-Id": borrowed}) as other:
            await other.delete("/v1/tickets/t2")

    gated_run(queue, proxy.url, "nginx-borrowed-0001", borrower)
    result = verify(queue, "nginx-borrowed-0001", f"access-log:{proxy.access_log}")
    lines = result.stdout.splitlines()
    assert result.returncode == 1, result.stdout + result.stderr
    assert lines[-1] == "audit: 4 of 4 calls matched; 1 writes in the audit log no approved call made"
    (unplanned,) = [line for line in lines if line.startswith("unplanned: ")]
    assert unplanned.startswith("unplanned: DELETE /v1/tickets/t2 ")
    assert unplanned.endswith("; reuses call 1's request id")


def test_a_run_in_process_is_audited_by_its_own_request_ids(proxy: Proxy) -> None:
    """`audit_execution`: a run without a queue (the walkthrough's kind), held against nginx's log."""

    async def run():  # type: ignore[no-untyped-def]
        async with httpx.AsyncClient(base_url=proxy.url) as api:
            _, proposal = await tools.dry_run_reference(api, "server", "in-process", proxy.url)
            return await execute_approved(None, local_approval(proposal), client=api)

    result = audit_execution(asyncio.run(run()), audit_source(f"access-log:{proxy.access_log}"))
    assert result.summary == SUMMARY_ALL_MATCHED
    assert {one.matched_by for one in result.calls} == {"request id"}
    assert result.verified
