"""The shipped examples under `reviewer run`: the Node agent (plain fetch) and the curl agent run the
reference task against the sample API started for real, with a real queue and a reviewer's token."""

from __future__ import annotations

import json
import os
import shutil
import sys
from pathlib import Path

import httpx
import pytest

from tests.run.harness import (
    API_TOKEN,
    ROOT,
    Queue,
    SampleApi,
    proposal,
    reviewer_decides,
    start_run,
)
from tests.system.documented import documented_block

NODE = shutil.which("node")
CURL = shutil.which("curl")
NODE_AGENT = str(ROOT / "examples" / "node_agent.mjs")
CURL_AGENT = str(ROOT / "examples" / "curl_agent.sh")


def with_env_dump(env_file: Path, *command: str) -> list[str]:
    """COMMAND, after writing the environment it was given to `env_file`."""
    return ["sh", "-c", 'env > "$0"; exec "$@"', str(env_file), *command]


@pytest.mark.skipif(NODE is None, reason="node is not installed (the Node example needs node 18 or later)")
def test_node_agent_is_gated_server_dry_run_then_the_approved_plan_runs(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    env_file = tmp_path / "child.env"
    run = start_run(
        queue,
        sample_api,
        "--via",
        "server",
        "--dry-run-param",
        "dryRun=All",
        "--audit",
        "api:/v1/audit",
        "--title",
        "Merge t1 and t2 into a new ticket, delete t3",
        writable=tmp_path,
        command=with_env_dump(env_file, str(NODE), NODE_AGENT),
    )
    proposal_id, revision = run.wait_for_plan()

    plan = proposal(queue, proposal_id, revision)
    calls = plan["calls"]
    assert [call["outcome"]["http_status"] for call in calls] == [201, 422, 422, 409]
    assert [call["request"]["method"] for call in calls] == ["POST", "PATCH", "PATCH", "DELETE"]
    for update in calls[1:3]:
        assert update["args"]["mergedInto"] == "<id from call 1>"
        assert update["request"]["body"]["mergedInto"] == "<id from call 1>"
    # The API saw the dry run's own id, and its refusal says so: chain noise, not a real refusal.
    assert calls[1]["outcome"]["message"] == "mergedInto names no ticket: tk-4"
    request_ids = plan["dry_run"].pop("request_ids")  # each dry-run request's own, for the audit log
    assert len(request_ids) == len(set(request_ids)) == 4
    assert plan["dry_run"] == {"via": "server", "write_requests": 4, "writes_kept": 0}
    assert plan["target"]["base_url"] == sample_api.url
    assert sample_api.audit() == [], "nothing may be written before a reviewer approves"
    assert sample_api.real_requests() == []

    reviewer_decides(queue, proposal_id)
    status, stderr = run.finish()

    assert status != 0
    assert "call 4 DELETE /v1/tickets/t3 answered 409" in stderr
    assert "verified against the plan" in stderr and "3 of 4 match" in stderr
    assert "audit: 3 of 3 calls matched; 0 writes in the audit log" in stderr, "the create's line by its id"
    assert len(sample_api.real_requests()) == 4
    audit = sample_api.audit()
    assert [(line["method"], line["path"]) for line in audit] == [
        ("POST", "/v1/tickets"),
        ("PATCH", "/v1/tickets/t1"),
        ("PATCH", "/v1/tickets/t2"),
    ]
    assert audit[1]["body"]["mergedInto"] == audit[0]["ticket"] == "tk-4"
    executed = queue.reviewer.get(f"/v1/proposals/{proposal_id}/decision").json()
    assert executed["state"] == "executed"

    child_environment = env_file.read_text()
    assert API_TOKEN not in child_environment
    assert "API_TOKEN=" not in child_environment
    assert queue.agent_token not in child_environment
    assert "REVIEWER_AGENT_TOKEN" not in child_environment
    assert f"REVIEWER_PROPOSAL_ID={proposal_id}" in child_environment


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_curl_agent_is_recorded_under_the_operations_the_openapi_document_names(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    document = tmp_path / "api.json"
    document.write_text(httpx.get(f"{sample_api.url}/openapi.json").text)
    # curl as the agent finds it on PATH, noting each command line it was given (what any user reads).
    shim, arguments = tmp_path / "shim", tmp_path / "curl-arguments"
    shim.mkdir()
    (shim / "curl").write_text(f'#!/bin/sh\nprintf "%s\\n" "$*" >> {arguments}\nexec {CURL} "$@"\n')
    (shim / "curl").chmod(0o755)
    run = start_run(
        queue,
        sample_api,
        "--openapi",
        str(document),
        "--title",
        "curl agent",
        writable=tmp_path,
        command=["sh", CURL_AGENT],
        environment={"PATH": f"{shim}:{os.environ['PATH']}"},
    )
    proposal_id, revision = run.wait_for_plan()
    calls = proposal(queue, proposal_id, revision)["calls"]
    assert [call["tool"] for call in calls] == [
        "create_ticket",
        "update_ticket",
        "update_ticket",
        "delete_ticket",
    ]
    assert [call["effect"] for call in calls] == ["create", "update", "update", "delete"]
    assert calls[1]["args"] == {"ticket_id": "t1", "status": "closed", "mergedInto": "<id from call 1>"}
    assert {call["outcome"]["status"] for call in calls} == {"recorded"}
    assert sample_api.requests() == [], "a recording dry run (the default) sends no write"
    command_lines = arguments.read_text().splitlines()
    assert len(command_lines) == 5 and all(line.startswith("-sS -K - -X ") for line in command_lines)
    assert not any("127.0.0.1" in line or "/v1/" in line for line in command_lines)

    reviewer_decides(queue, proposal_id, "reject", reason="t3 is still open; close it first")
    status, stderr = run.finish()
    assert status != 0
    assert "rejected by alice: t3 is still open; close it first; nothing ran" in stderr
    assert sample_api.requests() == [] and sample_api.audit() == []


@pytest.mark.skipif(CURL is None, reason="curl is not installed")
def test_the_pages_curl_line_reads_through_the_gate_with_the_url_off_its_command_line(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """docs/any-language.md's curl line, as written, as COMMAND: the read reaches the API through the gate."""
    (line,) = documented_block("any-language.md", "printf 'url = ")
    answer = tmp_path / "answer"
    run = start_run(queue, sample_api, writable=tmp_path, command=["sh", "-c", f"({line.text}) > {answer}"])
    status, stderr = run.finish()
    assert status == 0 and "COMMAND made no write" in stderr, stderr
    assert [ticket["id"] for ticket in json.loads(answer.read_text())["tickets"]] == ["t1", "t2", "t3"]


REQUESTS_AGENT = """
import os, requests
base = os.environ["REVIEWER_API_URL"]
listed = requests.get(base + "/v1/tickets", timeout=10)
created = requests.post(base + "/v1/tickets", json={"title": "From requests"}, timeout=10)
print(listed.status_code, created.status_code, len(listed.json()["tickets"]))
"""


def test_a_python_requests_agent_reaches_the_gate_from_its_sandbox(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    """Python's `requests`, which reads the proxy variables, in the default sandbox (a root of the
    system's folders and the reviewer's installation, no Unix socket): its read passes, its write is
    recorded and waits for a reviewer; the API saw no write."""
    out = tmp_path / "out"
    run = start_run(
        queue,
        sample_api,
        writable=tmp_path,
        command=["sh", "-c", f'"$0" -c "$1" > {out}', sys.executable, REQUESTS_AGENT],
    )
    proposal_id, _ = run.wait_for_plan()
    assert out.read_text().split() == ["200", "201", "3"]
    plan = proposal(queue, proposal_id)
    assert [(call["request"]["method"], call["request"]["path"]) for call in plan["calls"]] == [
        ("POST", "/v1/tickets")
    ]
    reviewer_decides(queue, proposal_id, "reject", reason="a test of the sandbox")
    status, _ = run.finish()
    assert status == 1 and sample_api.audit() == []
