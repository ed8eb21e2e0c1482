"""`reviewer run` with agents that misbehave: a fresh sample that leaves the plan, a child that fails,
hangs, sends what is not JSON or more than a plan may hold, writes after the dry run, or asks for an
operation the API does not have; and an API it must refuse before COMMAND starts."""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from reviewer.run.commands import _sandbox_option, register
from reviewer.run.errors import RunRefused
from reviewer.sample_api.server import sample_api_in_thread
from tests.forked_commands import run_reviewer
from tests.run.harness import API_TOKEN, ROOT, Queue, SampleApi, proposal, reviewer_decides, start_run

AGENTS = str(Path(__file__).with_name("agents.py"))


def agent(*arguments: str) -> list[str]:
    return [sys.executable, AGENTS, *arguments]


def submitted_titles(queue: Queue) -> list[str]:
    return [item["title"] for item in queue.reviewer.get("/v1/proposals").json()["proposals"]]


def test_rerun_stops_at_the_first_call_the_plan_does_not_have(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    run = start_run(
        queue,
        sample_api,
        "--rerun",
        "--audit",
        "api:/v1/audit",
        "--title",
        "rerun drift",
        writable=tmp_path,
        command=agent("drift", str(tmp_path / "runs")),
    )
    proposal_id, revision = run.wait_for_plan()
    assert [call["tool"] for call in proposal(queue, proposal_id, revision)["calls"]] == [
        "POST /v1/tickets",
        "PATCH /v1/tickets/t1",
    ]
    reviewer_decides(queue, proposal_id)
    status, stderr = run.finish()
    assert status != 0
    assert "stopped at call 2" in stderr and "DELETE /v1/tickets/t2" in stderr
    # The create matched the plan and ran; the delete it does not have was never sent, nor anything after.
    assert [(line["method"], line["path"]) for line in sample_api.audit()] == [("POST", "/v1/tickets")]
    assert [(request["method"], request["path"]) for request in sample_api.real_requests()] == [
        ("POST", "/v1/tickets")
    ]


def test_a_child_that_exits_non_zero_submits_nothing(queue: Queue, sample_api: SampleApi) -> None:
    status, stderr = start_run(queue, sample_api, "--title", "child fails", command=agent("fail")).finish()
    assert status == 1
    assert (
        "COMMAND exited with status 3 in the dry run (its network holds the gate: a connection elsewhere, "
        "or by a client that ignores the proxy variables, finds no route and no name); nothing was submitted"
    ) in stderr
    assert "child fails" not in submitted_titles(queue)


def test_a_child_that_never_exits_is_killed_at_the_timeout(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    marker = tmp_path / "started"
    run = start_run(
        queue,
        sample_api,
        "--timeout",
        "1",
        "--title",
        "child hangs",
        writable=tmp_path,
        command=agent("hang", str(marker)),
    )
    status, stderr = run.finish()
    assert marker.exists()
    assert status == 1
    assert "did not exit within 1 s (--timeout) and was killed" in stderr
    assert "child hangs" not in submitted_titles(queue)


def test_a_body_that_is_not_json_spoils_the_dry_run(queue: Queue, sample_api: SampleApi) -> None:
    status, stderr = start_run(queue, sample_api, "--title", "not json", command=agent("not-json")).finish()
    assert status == 1
    assert "the body of POST /v1/tickets is not JSON" in stderr and "nothing was submitted" in stderr
    assert "not json" not in submitted_titles(queue)
    assert sample_api.requests() == []


def test_a_body_past_the_proposal_limits_is_refused_unread(queue: Queue, sample_api: SampleApi) -> None:
    status, stderr = start_run(queue, sample_api, "--title", "flood", command=agent("big-body")).finish()
    assert status == 1
    assert "passed the proposal limit" in stderr
    assert "flood" not in submitted_titles(queue)
    assert sample_api.requests() == []


def test_a_write_after_the_dry_run_is_refused_and_nothing_runs(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    go, answered = tmp_path / "go", tmp_path / "answered"
    os.mkfifo(go)
    os.mkfifo(answered)
    # Unsandboxed: in the sandbox a process COMMAND leaves behind ends with it (its PID namespace ends).
    run = start_run(
        queue,
        sample_api,
        "--no-sandbox",
        "--title",
        "late write",
        command=agent("late", str(go), str(answered)),
    )
    proposal_id, _ = run.wait_for_plan()
    go.write_text("now")
    assert answered.read_text() == "409"
    reviewer_decides(queue, proposal_id)
    status, stderr = run.finish()
    assert status == 1
    assert (
        "POST /v1/tickets reached the gate after the dry run ended" in stderr and "nothing was run" in stderr
    )
    assert sample_api.real_requests() == [] and sample_api.audit() == []


def test_an_operation_the_openapi_document_lacks_is_refused_with_a_message(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    document = tmp_path / "api.json"
    document.write_text(httpx.get(f"{sample_api.url}/openapi.json").text)
    run = start_run(
        queue,
        sample_api,
        "--via",
        "server",
        "--openapi",
        str(document),
        "--title",
        "undeclared",
        command=agent("undeclared"),
    )
    proposal_id, revision = run.wait_for_plan()
    reviewer_decides(queue, proposal_id, "reject", reason="test")
    run.process.wait(60)
    assert run.process.stdout is not None
    printed = run.process.stdout.read()
    assert "refused: 404" in printed and "not an operation of the API's OpenAPI document" in printed
    calls = proposal(queue, proposal_id, revision)["calls"]
    assert [call["tool"] for call in calls] == ["create_ticket"]
    # The dry-run parameter came from the document: the sample API declares dryRun with its value.
    assert calls[0]["request"]["query"] == {"dryRun": "All"}
    assert calls[0]["outcome"]["http_status"] == 201
    assert all(request["path"] != "/v1/merge-everything" for request in sample_api.requests())


def test_a_dry_run_the_api_kept_stops_with_the_alarm(queue: Queue, tmp_path: Path) -> None:
    with sample_api_in_thread(ignore_dry_run=True, write_token=API_TOKEN) as ignoring:
        api = SampleApi(ignoring.base_url, None)  # type: ignore[arg-type]
        run = start_run(
            queue,
            api,
            "--via",
            "server",
            "--dry-run-param",
            "dryRun=All",
            "--audit",
            "api:/v1/audit",
            "--title",
            "kept",
            command=agent("fail"),
        )
        status, stderr = run.finish()
        assert status == 1
        assert "the dry run kept 1 write(s)" in stderr and "nothing was submitted" in stderr
        assert "kept" not in submitted_titles(queue)


def run_refused(queue: Queue, api_url: str, marker: Path) -> subprocess.CompletedProcess[str]:
    return run_reviewer(
        [sys.executable, "-m", "reviewer", "run", "--api", api_url, "--queue", queue.url, "--"]
        + agent("touch", str(marker)),
        capture_output=True,
        text=True,
        env={**os.environ, "REVIEWER_AGENT_TOKEN": queue.agent_token},
        cwd=ROOT,
        timeout=60,
    )


def test_an_api_that_is_not_reachable_is_refused_before_command_starts(queue: Queue, tmp_path: Path) -> None:
    from tests.service.ports import free_port

    marker = tmp_path / "started"
    result = run_refused(queue, f"http://127.0.0.1:{free_port()}", marker)
    assert result.returncode == 2
    assert "is not reachable" in result.stderr
    assert not marker.exists()


def test_plain_http_off_loopback_is_refused_before_command_starts(queue: Queue, tmp_path: Path) -> None:
    marker = tmp_path / "started"
    result = run_refused(queue, "http://api.example/v1", marker)
    assert result.returncode == 2
    assert "plain http off loopback" in result.stderr
    assert not marker.exists()


def test_a_server_dry_run_without_the_apis_parameter_is_refused_before_command_starts(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """Never guessed: most APIs drop a parameter they do not know and perform the write."""
    marker = tmp_path / "started"
    run = start_run(queue, sample_api, "--via", "server", command=agent("touch", str(marker)))
    status, stderr = run.finish()
    assert status == 2
    assert "--via server needs the API's own dry-run parameter" in stderr
    assert "--dry-run-param dryRun=All" in stderr and "--via record (the default)" in stderr
    assert not marker.exists() and sample_api.requests() == []


def test_an_audit_log_that_cannot_be_read_is_refused_before_command_starts(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """A mistyped --audit, or a path that is not an audit log, is never skipped silently."""
    marker = tmp_path / "started"
    for path, said in (
        ("api:/v1/audti", "api:/v1/audti cannot be read (/v1/audti: answered 404, not 200)"),
        (
            "api:/v1/stats",
            "api:/v1/stats cannot be read (its first entry does not read as one: /v1/stats holds no list",
        ),
        (f"access-log:{tmp_path / 'no-such.log'}", "no-such.log cannot be read"),
    ):
        run = start_run(queue, sample_api, "--audit", path, command=agent("touch", str(marker)))
        status, stderr = run.finish()
        assert status == 2, stderr
        assert "--audit: " in stderr and said in stderr
    assert not marker.exists() and sample_api.requests() == []


SANDBOX_TOKEN = "sandbox-write-secret-51d2"


def test_a_sandbox_that_honours_the_parameter_proves_the_server_dry_run(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """The sample API honours dryRun=All: the sandbox check's create (with the sandbox's own credential,
    which COMMAND never sees) leaves its sandbox's collection as it was, the plan carries the proof,
    and the server's oks are validated without an audit log."""
    from reviewer.plan.proposal import parse_proposal
    from reviewer.reading.analysis import Analysis, Verdict

    seen = tmp_path / "environment"
    command = f"env > {seen} && exec {sys.executable} {AGENTS} drift {tmp_path / 'runs'}"
    with sample_api_in_thread(write_token=SANDBOX_TOKEN) as sandbox:
        collection = f"{sandbox.base_url}/v1/tickets"
        before = dict(sandbox.store.tickets)
        run = start_run(
            queue,
            sample_api,
            *("--via", "server", "--dry-run-param", "dryRun=All", "--sandbox-api", collection),
            *("--sandbox-header", "Authorization: Bearer env:SANDBOX_TOKEN", "--title", "sandbox proven"),
            writable=tmp_path,
            command=["sh", "-c", command],
            environment={"SANDBOX_TOKEN": SANDBOX_TOKEN},
        )
        proposal_id, revision = run.wait_for_plan()
        document = proposal(queue, proposal_id, revision)
        reviewer_decides(queue, proposal_id, "reject", reason="test")
        run.finish()
        assert sandbox.store.tickets == before and sandbox.store.writes_kept == 0
    proof = document["dry_run"]["sandbox"]
    assert (proof["url"], proof["query"]) == (collection, {"dryRun": "All"})
    analysis = Analysis(parse_proposal(json.dumps(document), "sandbox proven"))
    assert {analysis.row(index).verdict for index in range(len(analysis))} == {Verdict.VALIDATED}
    assert "unproven_dry_run" not in analysis.alarm_names
    assert sample_api.real_requests() == [], "the dry run wrote nothing for real"
    assert SANDBOX_TOKEN not in seen.read_text(), "COMMAND never holds the sandbox's credential"


def test_the_reviewers_settings_are_withheld_by_name_and_not_taken_for_secrets(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """`REVIEWER_CA_FILE` names the CA bundle `SSL_CERT_FILE` names too, and a one-character
    `REVIEWER_FEEDBACK` is left from an earlier run: COMMAND gets neither `REVIEWER_` variable, but
    keeps its CA bundle and every variable that holds a 1. A copy of the agent token is still withheld:
    a token's value is a secret, a setting's is not."""
    seen = tmp_path / "environment"
    bundle = "/etc/ssl/certs/ca-certificates.crt"
    run = start_run(
        queue,
        sample_api,
        writable=tmp_path,
        command=["sh", "-c", f"env > {seen} && exec {sys.executable} {AGENTS} drift {tmp_path / 'runs'}"],
        environment={
            "REVIEWER_CA_FILE": bundle,
            "SSL_CERT_FILE": bundle,
            "REVIEWER_FEEDBACK": "1",
            "RELEASE": "1.2",
            "TOKEN_COPY": queue.agent_token,
        },
    )
    proposal_id, _ = run.wait_for_plan()
    reviewer_decides(queue, proposal_id, "reject", reason="test")
    run.finish()
    child = dict(line.partition("=")[::2] for line in seen.read_text().splitlines() if "=" in line)
    assert (child.get("SSL_CERT_FILE"), child.get("RELEASE")) == (bundle, "1.2")
    given = {name for name in child if name.startswith("REVIEWER_")}
    assert given == {"REVIEWER_API_URL", "REVIEWER_PROPOSAL_ID"}, "what the run tells COMMAND, no more"
    assert "TOKEN_COPY" not in child


def run_options(*arguments: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    register(parser.add_subparsers())
    return parser.parse_args(["run", "--api", "http://127.0.0.1:9", *arguments, "--", "true"])


def test_the_sandbox_id_field_option_names_where_the_check_reads_the_created_id() -> None:
    sandbox = ("--via", "server", "--dry-run-param", "dryRun=All", "--sandbox-api", "http://127.0.0.1:9/v1/t")
    check = _sandbox_option(run_options(*sandbox, "--sandbox-id-field", "data.id"), {})
    assert check is not None and check.id_field == "data.id"
    assert (_sandbox_option(run_options(*sandbox), {}) or check).id_field == "id"
    with pytest.raises(RunRefused, match="--sandbox-id-field .* go with --sandbox-api"):
        _sandbox_option(run_options("--sandbox-id-field", "data.id"), {})


def test_a_sandbox_check_without_a_server_dry_run_is_refused(queue: Queue, sample_api: SampleApi) -> None:
    run = start_run(queue, sample_api, "--sandbox-api", f"{sample_api.url}/v1/tickets", command=agent("fail"))
    status, stderr = run.finish()
    assert status == 2 and "--sandbox-api proves a server dry run's parameter" in stderr
    assert sample_api.requests() == []
