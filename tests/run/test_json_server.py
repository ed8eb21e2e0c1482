"""`reviewer run` against json-server, a REST API nobody here wrote and which has no dry run (like most):
the default dry run keeps nothing, a server dry run is refused until the parameter is named, and one
the API ignores is caught by its access log, or submitted only as unproven."""

from __future__ import annotations

import contextlib
import json
import shlex
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.analysis import Analysis, Verdict
from tests.run.harness import ROOT, Queue, SampleApi, proposal, reviewer_decides, start_run
from tests.service.ports import free_port
from tests.system.documented import as_run, documented_block

NODE = shutil.which("node")
JSON_SERVER = ROOT / ".test-apis" / "node_modules" / "json-server" / "lib" / "cli" / "bin.js"
ACCESS_LOG = Path(__file__).with_name("json_server_log.js")
AGENTS = str(Path(__file__).with_name("agents.py"))
TICKETS = {
    "tickets": [
        {"id": "t1", "title": "Printer jammed", "status": "open"},
        {"id": "t2", "title": "Printer out of toner", "status": "open"},
    ]
}

pytestmark = pytest.mark.skipif(
    NODE is None or not JSON_SERVER.exists(),
    reason="json-server is not installed: npm install --prefix .test-apis json-server@0.17.4 (.ci/run does)",
)


@contextlib.contextmanager
def serving_json_server(directory: Path) -> Iterator[tuple[SampleApi, Path]]:
    """json-server on a loopback port over a fresh data file in `directory`, its access log at /_log."""
    directory.mkdir(exist_ok=True)
    data = directory / "db.json"
    data.write_text(json.dumps(TICKETS, indent=2))
    port = free_port()
    log = (directory / "json-server.log").open("wb")
    process = subprocess.Popen(
        [str(NODE), str(JSON_SERVER), str(data), "--port", str(port), "--middlewares", str(ACCESS_LOG)],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=directory,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        for _ in range(400):
            if process.poll() is not None:
                raise RuntimeError((directory / "json-server.log").read_text(errors="replace"))
            try:
                httpx.get(f"{url}/_log", timeout=1).raise_for_status()
                break
            except httpx.TransportError:
                with contextlib.suppress(subprocess.TimeoutExpired):
                    process.wait(0.05)
        else:
            raise RuntimeError("json-server did not start")
        yield SampleApi(url, process), data  # type: ignore[arg-type]
    finally:
        process.terminate()
        process.wait(10)
        log.close()


@pytest.fixture
def json_server(tmp_path: Path) -> Iterator[tuple[SampleApi, Path]]:
    with serving_json_server(tmp_path / "api") as served:
        yield served


@pytest.fixture
def json_server_sandbox(tmp_path: Path) -> Iterator[tuple[SampleApi, Path]]:
    """A second json-server, the operator's sandbox copy of the first."""
    with serving_json_server(tmp_path / "sandbox") as served:
        yield served


PAGE_CREDENTIAL = "Authorization: Bearer env:API_TOKEN"
"""The credential docs/any-language.md gives `reviewer run`, as `start_run` gives it too."""


def writes_received(api: SampleApi) -> list[tuple[str, str]]:
    entries = httpx.get(f"{api.url}/_log", timeout=10).json()["entries"]
    return [(entry["method"], entry["path"]) for entry in entries]


def run_tickets_agent(queue: Queue, api: SampleApi, *options: str) -> tuple[int, str, str | None]:
    """`reviewer run` with the tickets agent; its status, its stderr, and the plan it submitted (rejected
    at once, so nothing runs for real)."""
    run = start_run(queue, api, *options, command=[sys.executable, AGENTS, "tickets"])
    proposal_id: str | None = None
    with contextlib.suppress(AssertionError):
        proposal_id, _ = run.wait_for_plan()
        reviewer_decides(queue, proposal_id, "reject", reason="test")
    status, stderr = run.finish()
    return status, stderr, proposal_id


def test_the_default_dry_run_keeps_nothing(queue: Queue, json_server: tuple[SampleApi, Path]) -> None:
    api, data = json_server
    before = data.read_bytes()
    status, stderr, proposal_id = run_tickets_agent(queue, api, "--title", "json-server record")
    assert proposal_id is not None, stderr
    plan = proposal(queue, proposal_id)
    assert plan["dry_run"]["via"] == "record"
    assert [(call["request"]["method"], call["request"]["path"]) for call in plan["calls"]] == [
        ("POST", "/tickets"),
        ("PATCH", "/tickets/t1"),
        ("DELETE", "/tickets/t2"),
    ]
    assert data.read_bytes() == before, "the dry run changed the API's data"
    assert writes_received(api) == []
    assert status == 1 and "rejected by alice" in stderr


def test_a_server_dry_run_with_no_declared_parameter_is_refused_and_writes_nothing(
    queue: Queue, json_server: tuple[SampleApi, Path]
) -> None:
    api, data = json_server
    before = data.read_bytes()
    status, stderr, proposal_id = run_tickets_agent(queue, api, "--via", "server")
    assert (status, proposal_id) == (2, None)
    assert "--via server needs the API's own dry-run parameter" in stderr
    assert data.read_bytes() == before and writes_received(api) == []


@pytest.mark.parametrize("id_header", ["X-Request-Id", "X-Correlation-Id"])
def test_a_parameter_the_api_ignores_is_caught_by_its_access_log(
    queue: Queue, json_server: tuple[SampleApi, Path], id_header: str
) -> None:
    """json-server drops dryRun=All and performs the write: its log of performed writes, read after
    the write, stops the dry run at once, and nothing is submitted. The log keeps X-Request-Id only:
    sent under another header, the write is found by its method and path."""
    api, data = json_server
    options = ("--via", "server", "--dry-run-param", "dryRun=All", "--audit", "api:/_log")
    options += ("--request-id-header", id_header)
    status, stderr, proposal_id = run_tickets_agent(queue, api, *options, "--title", "json-server kept")
    assert (status, proposal_id) == (1, None)
    assert "the dry run kept 1 write(s)" in stderr and "nothing was submitted" in stderr
    assert writes_received(api) == [("POST", "/tickets")], "the first kept write stopped the run"
    assert len(json.loads(data.read_text())["tickets"]) == 3


def test_a_parameter_the_api_ignores_is_submitted_only_as_unproven_without_a_log(
    queue: Queue, json_server: tuple[SampleApi, Path]
) -> None:
    """Without a log nothing can catch the kept writes; the plan says the server's oks prove nothing."""
    api, _ = json_server
    options = ("--via", "server", "--dry-run-param", "dryRun=All", "--title", "json-server unproven")
    status, stderr, proposal_id = run_tickets_agent(queue, api, *options)
    assert proposal_id is not None, stderr
    document = proposal(queue, proposal_id)
    assert "writes_kept" not in document["dry_run"], "no log read: the count is unknown, never 0"
    analysis = Analysis(parse_proposal(json.dumps(document), "json-server"))
    assert {analysis.row(index).verdict for index in range(len(analysis))} == {Verdict.UNPROVEN}
    assert analysis.ratios.validated == 0 and "unproven_dry_run" in analysis.alarm_names
    assert len(writes_received(api)) == 3, "json-server wrote for real: only a log would have shown it"


def test_a_sandbox_that_kept_the_checks_create_stops_the_run_before_command_starts(
    queue: Queue, json_server: tuple[SampleApi, Path], json_server_sandbox: tuple[SampleApi, Path]
) -> None:
    """The built-in sandbox check, with the options docs/any-language.md gives it: json-server keeps the
    create sent with dryRun=All, so the run stops before COMMAND starts. Only the sandbox's data changed
    (by the page's create); the API received nothing."""
    api, data = json_server
    sandbox, sandbox_data = json_server_sandbox
    before, sandbox_before = data.read_bytes(), sandbox_data.read_bytes()
    (documented,) = documented_block("any-language.md", "reviewer run --api https://api.example/v1 --api-h")
    sandbox_url = {"https://sandbox.api.example/v1/tickets": f"{sandbox.url}/tickets"}
    words = shlex.split(as_run(documented, sandbox_url))
    # The page's options after its --api and --api-header, which start_run gives as the page does.
    assert words[2:6] == ["--api", "https://api.example/v1", "--api-header", PAGE_CREDENTIAL]
    options = words[6 : words.index("--")]
    status, stderr, proposal_id = run_tickets_agent(queue, api, *options, "--title", "json-server sandbox")
    assert (status, proposal_id) == (1, None)
    assert f"sent to {sandbox.url}/tickets with dryRun=All, was kept" in stderr
    assert "COMMAND did not start and nothing was submitted" in stderr
    assert data.read_bytes() == before and writes_received(api) == [], "the API received nothing"
    assert writes_received(sandbox) == [("POST", "/tickets")], "one create, to the sandbox only"
    assert sandbox_data.read_bytes() != sandbox_before
    assert "sandbox check" in sandbox_data.read_text(), "the page's --sandbox-create body was sent"
