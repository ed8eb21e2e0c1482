"""`reviewer run --audit access-log:FILE`: nginx (Debian's package, on loopback) in front of the sample
API writes the access log of docs/audit-logs.md. A child that writes around the gate during the dry run raises
the alarm on its plan before anyone approves it; a write around the gate during the real run is named in the
summary line after it, the approved calls matched by their request ids."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.analysis import Analysis
from tests.audit.nginx import Proxy, nginx_in_front_of
from tests.run.harness import API_TOKEN, Queue, SampleApi, proposal, reviewer_decides, start_run
from tests.serving import serving_in_thread

AGENTS = str(Path(__file__).with_name("agents.py"))


@pytest.fixture
def proxied(sample_api: SampleApi, tmp_path: Path) -> Iterator[tuple[SampleApi, Proxy]]:
    """The sample API behind nginx, as `reviewer run --api` reaches it."""
    with nginx_in_front_of(sample_api.url, tmp_path / "nginx") as proxy:
        yield SampleApi(proxy.url, sample_api.process), proxy


def run_around(
    queue: Queue,
    proxied: tuple[SampleApi, Proxy],
    tmp_path: Path,
    when: str,
    *options: str,
    source: str | None = None,
) -> tuple[str, str, str]:
    """`reviewer run --audit access-log:...` (or `source`) of the `around` agent, approved; its plan's
    id, the plan's `dry_run` as the queue holds it, and everything `reviewer run` said."""
    api, proxy = proxied
    command = [sys.executable, AGENTS, "around", str(tmp_path / "runs"), when, proxy.url, API_TOKEN]
    # Unsandboxed: the child reaches nginx itself, as a process around the gate does.
    audit = source or f"access-log:{proxy.access_log}"
    run = start_run(queue, api, "--no-sandbox", "--audit", audit, *options, command=command)
    proposal_id, revision = run.wait_for_plan()
    dry_run = proposal(queue, proposal_id, revision)["dry_run"]
    reviewer_decides(queue, proposal_id)
    status, stderr = run.finish()
    assert status == 0, stderr
    return proposal_id, str(dry_run.get("writes_around")), stderr


def test_a_child_writing_around_the_gate_in_the_dry_run_raises_the_alarm_on_its_plan(
    queue: Queue, proxied: tuple[SampleApi, Proxy], tmp_path: Path
) -> None:
    _, writes_around, stderr = run_around(queue, proxied, tmp_path, "dry")
    assert writes_around == "1"
    (alarm,) = [line for line in stderr.splitlines() if "during the dry run the gate did not make" in line]
    assert alarm.startswith(
        "reviewer run: dry run: 1 writes during the dry run the gate did not make (access-log:"
    )
    assert alarm.endswith(" entries in the window); the plan carries the alarm")
    assert "unplanned during the dry run: PATCH /v1/tickets/t2 200 at " in stderr


def test_a_write_around_the_gate_in_the_real_run_is_named_after_it(
    queue: Queue, proxied: tuple[SampleApi, Proxy], tmp_path: Path
) -> None:
    """`--rerun`: the child runs again for real and writes around the gate once; both approved calls
    match by the request id sent in `--request-id-header`, the third write is unplanned."""
    _, writes_around, stderr = run_around(
        queue, proxied, tmp_path, "real", "--rerun", "--request-id-header", "X-Request-Id"
    )
    assert writes_around == "0"
    lines = [line.removeprefix("reviewer run: ") for line in stderr.splitlines()]
    assert lines[-1] == "audit: 2 of 2 calls matched; 1 writes in the audit log no approved call made"
    assert any(line.startswith("unplanned: PATCH /v1/tickets/t2 200 at ") for line in lines), stderr


RENAMED = {"time": "ts", "method": "verb", "uri": "target", "status": "code", "request_id": "rid"}
"""A log of another shape: nginx's lines with each field under another name."""


@contextmanager
def log_behind_a_token(access_log: Path, token: str) -> Iterator[str]:
    """nginx's access log served over HTTP with its fields renamed (`RENAMED`), only to a request that
    carries `Authorization: Bearer TOKEN`; the URL of the log."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.headers.get("Authorization") != f"Bearer {token}":
                self.send_response(401)
                self.end_headers()
                return
            lines = [json.loads(line) for line in access_log.read_text().splitlines() if line]
            body = "".join(
                json.dumps({RENAMED.get(name, name): value for name, value in line.items()}) + "\n"
                for line in lines
            ).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args: object) -> None:
            pass

    with serving_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        yield f"http://127.0.0.1:{server.server_address[1]}/log"


def test_a_log_read_by_a_field_mapping_behind_a_credential_the_child_never_sees(
    queue: Queue, proxied: tuple[SampleApi, Proxy], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--audit jsonl:URL --audit-field ... --audit-header 'Authorization: Bearer env:LOG_TOKEN'`: the
    log is read with the credential and by the mapping (the write around the gate is named, the
    approved calls matched by request id), the report the queue stores names the source without it,
    and COMMAND's environment does not hold it."""
    monkeypatch.setenv("LOG_TOKEN", "log-s3cr3t")
    mapping = [option for name, field in RENAMED.items() for option in ("--audit-field", f"{name}={field}")]
    with log_behind_a_token(proxied[1].access_log, "log-s3cr3t") as url:
        proposal_id, _, stderr = run_around(
            queue,
            proxied,
            tmp_path,
            "real",
            "--rerun",
            *mapping,
            "--audit-header",
            "Authorization: Bearer env:LOG_TOKEN",
            source=f"jsonl:{url}",
        )
    lines = [line.removeprefix("reviewer run: ") for line in stderr.splitlines()]
    assert lines[-1] == "audit: 2 of 2 calls matched; 1 writes in the audit log no approved call made"
    assert (tmp_path / "log-token-seen").read_text() == ""
    assert "log-s3cr3t" not in stderr
    response = queue.reviewer.get(f"/v1/proposals/{proposal_id}/executions")
    assert response.status_code == 200, response.text
    (report,) = response.json()["executions"]
    assert report["audit"]["source"] == f"jsonl:{url}"
    assert [(write["method"], write["path"]) for write in report["audit"]["unplanned"]] == [
        ("PATCH", "/v1/tickets/t2")
    ]


@pytest.mark.parametrize(
    ("options", "said"),
    [
        (("--audit-field", "time=ts"), "--audit-field and --audit-header read an --audit KIND:LOCATION"),
        (
            ("--audit", "/v1/audit", "--audit-field", "time=ts"),
            "api:/v1/audit for a log the API serves itself",
        ),
        (("--audit", "jsonl:-", "--audit-field", "time"), "--audit-field 'time': write NAME=FIELD"),
        (("--audit", "jsonl:-"), "--audit jsonl:-: standard input is COMMAND's"),
    ],
)
def test_audit_options_without_a_source_to_read_them_are_refused(
    queue: Queue, sample_api: SampleApi, options: tuple[str, ...], said: str
) -> None:
    """`--audit-field` with no `--audit`, with the sample API's bare path, or not NAME=FIELD: refused
    (exit 2) before COMMAND starts."""
    run = start_run(queue, sample_api, "--no-sandbox", *options, command=[sys.executable, "-c", "pass"])
    status, stderr = run.finish()
    assert status == 2 and said in stderr, stderr


@pytest.mark.parametrize("path", ["/v1/au\tdit", "/v1/audit\n", "/v1/\x1b[2Jaudit", "/v1/\x85audit"])
def test_a_control_character_in_an_api_audit_path_is_one_line_and_nothing_starts(
    queue: Queue, sample_api: SampleApi, tmp_path: Path, path: str
) -> None:
    """A tab pasted into `--audit api:PATH` used to end in the HTTP client's traceback once the run had
    begun; it is refused with one line, escaped, before COMMAND starts."""
    started = tmp_path / "started"
    run = start_run(
        queue,
        sample_api,
        "--no-sandbox",
        "--audit",
        f"api:{path}",
        command=[sys.executable, "-c", f"open({str(started)!r}, 'w')"],
    )
    status, stderr = run.finish()
    assert status == 2 and stderr.count("\n") == 1, stderr
    assert stderr.startswith(f"reviewer run: --audit api:{path!r}: the path holds a control character (U+")
    assert not started.exists() and sample_api.requests() == []


def test_a_server_dry_run_the_api_ignored_is_said_truthfully(
    queue: Queue, proxied: tuple[SampleApi, Proxy], tmp_path: Path
) -> None:
    """`--via server --dry-run-param dry_run=1` against an API that does not know the parameter: its two
    dry-run writes are real. The access log holds them under the gate's own request ids, so they are
    not another client's writes, and the run says the log cannot tell whether the API honoured them;
    the plan's alarm does not claim no log was read, and no line says `(no --audit)`."""
    proposal_id, writes_around, stderr = run_around(
        queue, proxied, tmp_path, "never", "--via", "server", "--dry-run-param", "dry_run=1"
    )
    assert writes_around == "0"
    (alarm,) = [line for line in stderr.splitlines() if "during the dry run the gate did not make" in line]
    assert alarm.endswith(
        "it holds 2 of the gate's dry-run requests and does not say whether the API honoured them as dry runs"
    )
    assert "(no --audit)" not in stderr
    unproven = " ".join(Analysis(parse_proposal(json.dumps(proposal(queue, proposal_id, 1)))).alarms)
    assert "no audit log read" not in unproven
    assert "cannot say whether the API kept the gate's own" in unproven
