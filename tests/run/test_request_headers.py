"""The request approved is the request sent: a real `reviewer run` in front of a small API that records
every request it gets, a child that writes with headers and exact bodies, a real queue."""

from __future__ import annotations

import json
import os
import sys
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import msgspec
import pytest

from reviewer.plan.proposal import parse_proposal, plan_sha256
from reviewer.policy.file import parse_policy
from reviewer.policy.verdict import evaluate
from tests.forked_commands import run_reviewer
from tests.queue_harness import reviewer_command
from tests.run.harness import Queue, proposal, reviewer_decides, start_run
from tests.serving import serving_in_thread

COPY_HEADERS = {
    "x-amz-copy-source": "/reports/source.txt",
    "x-amz-server-side-encryption": "aws:kms",
    "x-amz-tagging": "team=ops",
    "x-amz-meta-owner": "night-shift",
    "cache-control": "no-cache",
}
EXACT_JSON = b'{"zeta": 1,   "alpha": [2, 3],\n "note": "caf\\u00e9"}'
ITEM = b'{"TableName": "t", "Key": {"id": {"S": "1"}}}'
CHILD = textwrap.dedent(
    f"""
    import os, urllib.request, urllib.error
    def send(method, path, data=None, headers=None):
        request = urllib.request.Request(
            os.environ["REVIEWER_API_URL"] + path, method=method, data=data, headers=headers or {{}}
        )
        try:
            with urllib.request.urlopen(request) as answer:
                print(method, path, answer.status, flush=True)
        except urllib.error.HTTPError as error:
            print(method, path, error.code, error.read().decode()[:300], flush=True)
    send("PUT", "/reports/copy.txt", b"", {{
        **{COPY_HEADERS!r},
        "Authorization": "AWS4-HMAC-SHA256 Credential=CHILD/20260101/us-east-1/s3",
        "User-Agent": "Boto3/1.34", "amz-sdk-invocation-id": "5f1c", "amz-sdk-request": "attempt=1",
        "X-Amz-Date": "20260101T000000Z",
    }})
    for operation in ("GetItem", "DeleteItem"):
        send("POST", "/", {ITEM!r}, {{
            "content-type": "application/x-amz-json-1.0",
            "x-amz-target": "DynamoDB_20120810." + operation,
        }})
    send("POST", "/items", {EXACT_JSON!r}, {{"content-type": "application/json"}})
    form = {{"content-type": "application/x-www-form-urlencoded"}}
    send("POST", "/charges", b"amount=100;amount=999999", form)
    send("POST", "/charges", b'{{"amount": 100, "amount": 999999}}', {{"content-type": "application/json"}})
    """
)


@dataclass
class RecordingApi:
    """An API that answers every request `200 {{}}` and keeps what it got."""

    url: str
    received: list[dict[str, Any]] = field(default_factory=list)

    def writes(self) -> list[dict[str, Any]]:
        return [request for request in self.received if request["method"] != "GET"]


@pytest.fixture
def recording_api() -> Iterator[RecordingApi]:
    received: list[dict[str, Any]] = []

    class Handler(BaseHTTPRequestHandler):
        def _record(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            received.append(
                {
                    "method": self.command,
                    "path": self.path,
                    "headers": {name.lower(): value for name, value in self.headers.items()},
                    "body": self.rfile.read(length),
                }
            )
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        do_GET = do_PUT = do_POST = do_DELETE = do_PATCH = _record

        def log_message(self, *args: object) -> None:
            pass

    with serving_in_thread(ThreadingHTTPServer(("127.0.0.1", 0), Handler)) as server:
        yield RecordingApi(f"http://127.0.0.1:{server.server_port}", received)


def test_headers_and_exact_bytes_are_planned_shown_decided_and_sent(
    queue: Queue, recording_api: RecordingApi, tmp_path: Path
) -> None:
    child = tmp_path / "child.py"
    child.write_text(CHILD)
    run = start_run(queue, recording_api, "--readable", str(tmp_path), command=[sys.executable, str(child)])  # type: ignore[arg-type]
    proposal_id, revision = run.wait_for_plan()
    assert recording_api.writes() == [], "the default dry run only records"
    document = proposal(queue, proposal_id, revision)
    calls = document["calls"]
    assert len(calls) == 4, "the two ambiguous bodies are refused, not recorded"

    copy, get_item, delete_item, exact = calls
    assert copy["request"]["headers"] == COPY_HEADERS
    assert copy["args"] == {"headers": COPY_HEADERS}
    assert get_item["request"]["headers"] == {"x-amz-target": "DynamoDB_20120810.GetItem"}
    assert delete_item["request"]["headers"] == {"x-amz-target": "DynamoDB_20120810.DeleteItem"}
    assert get_item["args"] != delete_item["args"]
    assert "".join(exact["request"]["text"]) == EXACT_JSON.decode()

    plan = parse_proposal(json.dumps(document).encode())
    moved = {**COPY_HEADERS, "x-amz-copy-source": "/secrets/keys.txt"}
    assert plan.calls[0].request is not None
    changed = msgspec.structs.replace(
        plan.calls[0],
        args={"headers": moved},
        request=msgspec.structs.replace(plan.calls[0].request, headers=moved),
    )
    assert plan_sha256(plan) != plan_sha256(msgspec.structs.replace(plan, calls=[changed, *plan.calls[1:]]))

    policy = parse_policy(
        textwrap.dedent(
            """
            [[rules]]
            name = "copies out of secrets"
            when = '''plan.calls.exists(c, "headers" in c.args && "x-amz-copy-source" in c.args.headers
                && c.args.headers["x-amz-copy-source"].startsWith("/secrets/"))'''
            reject = "no copies out of secrets"
            """
        )
    )
    assert evaluate(policy, plan).outcome == "human"
    other = msgspec.structs.replace(plan, calls=[changed, *plan.calls[1:]])
    assert evaluate(policy, other).outcome == "reject"

    shown = run_reviewer(
        reviewer_command("show", proposal_id),
        capture_output=True,
        text=True,
        timeout=60,
        env={
            **os.environ,
            "REVIEWER_QUEUE": queue.url,
            "REVIEWER_TOKEN": queue.service.token("carol", "reviewer"),
            "COLUMNS": "200",
        },
    )
    assert shown.returncode == 0, shown.stderr
    assert "/reports/source.txt" in shown.stdout and "DeleteItem" in shown.stdout

    reviewer_decides(queue, proposal_id)
    code, output = run.finish()
    assert code == 0, output
    sent = recording_api.writes()
    assert [(request["method"], request["path"]) for request in sent] == [
        ("PUT", "/reports/copy.txt"),
        ("POST", "/"),
        ("POST", "/"),
        ("POST", "/items"),
    ]
    for name, value in COPY_HEADERS.items():
        assert sent[0]["headers"][name] == value
    assert "CHILD" not in sent[0]["headers"]["authorization"]
    assert "amz-sdk-invocation-id" not in sent[0]["headers"]
    assert sent[0]["headers"]["user-agent"] != "Boto3/1.34"
    assert sent[1]["headers"]["x-amz-target"] == "DynamoDB_20120810.GetItem"
    assert sent[2]["headers"]["x-amz-target"] == "DynamoDB_20120810.DeleteItem"
    assert sent[3]["body"] == EXACT_JSON, "the bytes approved are the bytes sent"
