"""`reviewer run` with a child that does what SDKs do: put a minted id into a URL path percent-encoded
(`quote`), plus-encoded (as Stripe's `Customer.modify` does) or every byte escaped, and into a query
plus-encoded; retry a write under the same `Idempotency-Key` or `amz-sdk-invocation-id`; upload
bytes. The plan reads each placeholder as `<id from call 1>`, holds a retry once, and the approved run
sends exactly that."""

from __future__ import annotations

import json
import re
import sys
import textwrap
import urllib.parse
from pathlib import Path
from typing import Any

import httpx
import pytest

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.analysis import Analysis
from tests.run.harness import Queue, SampleApi, proposal, reviewer_decides, start_run

CHILD = textwrap.dedent(
    """
    import json, os, sys, urllib.error, urllib.parse, urllib.request
    def send(method, path, body=None, headers=(), raw=None, content_type="application/json"):
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        request = urllib.request.Request(
            os.environ["REVIEWER_API_URL"] + path, method=method, data=data,
            headers={"content-type": content_type, **dict(headers)},
        )
        try:
            with urllib.request.urlopen(request) as answer:
                status, text = answer.status, answer.read().decode()
                note = answer.headers.get("reviewer-note")
        except urllib.error.HTTPError as error:
            status, text, note = error.code, error.read().decode(), None
        print(json.dumps([method, path, status, json.loads(text or "{}"), note]), flush=True)
        return json.loads(text or "{}")
    mode = sys.argv[1]
    if mode == "chain":
        minted = send("POST", "/v1/tickets", {"title": "Printer on fire"})["id"]
        path = "/v1/tickets/" + urllib.parse.quote(minted, safe="")
        send("PATCH", path, {"title": "Printer still on fire"})
        query = urllib.parse.urlencode({"notify": minted, "note": "merged into"})
        send("PATCH", "/v1/tickets/t1?" + query, {"status": "closed", "mergedInto": minted})
        escaped = "".join(f"%{byte:02X}" for byte in minted.encode())
        send("PATCH", "/v1/tickets/" + escaped, {"status": "closed"})
        # Stripe's SDK writes an id into a path with quote_plus: a space would come back as a +.
        send("PATCH", "/v1/tickets/" + urllib.parse.quote_plus(minted), {"title": "Printer out"})
    elif mode == "retries":
        for headers in ([("Idempotency-Key", "k-1")], [("Idempotency-Key", "k-1")],
                        [("amz-sdk-invocation-id", "5f0c")], [("amz-sdk-invocation-id", "5f0c")], [], []):
            send("POST", "/v1/tickets", {"title": "Printer on fire"}, headers)
        send("POST", "/v1/tickets", {"title": "another ticket"}, [("Idempotency-Key", "k-1")])
    elif mode == "binary":
        send("PATCH", "/v1/tickets/t1", raw=bytes(range(256)) * 4, content_type="application/octet-stream")
    elif mode == "zero-width":
        send("PATCH", "/v1/tickets/t1", {"title": "Printer\\u200b on fire"})
    """
)


def _child(tmp_path: Path, mode: str) -> list[str]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    return [sys.executable, str(script), mode]


def _answers(stdout: str) -> list[list[Any]]:
    return [json.loads(line) for line in stdout.splitlines() if line.startswith("[")]


def _run(queue: Queue, api: SampleApi, tmp_path: Path, mode: str) -> tuple[str, dict[str, Any], Any]:
    run = start_run(queue, api, "--readable", str(tmp_path), "--title", mode, command=_child(tmp_path, mode))
    proposal_id, revision = run.wait_for_plan()
    return proposal_id, proposal(queue, proposal_id, revision), run


def test_a_minted_id_percent_or_plus_encoded_is_read_back_as_its_placeholder_and_replayed_real(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    proposal_id, plan, run = _run(queue, sample_api, tmp_path, "chain")
    calls = plan["calls"]
    assert [call["request"]["path"] for call in calls] == [
        "/v1/tickets",
        "/v1/tickets/<id from call 1>",
        "/v1/tickets/t1",
        "/v1/tickets/<id from call 1>",
        "/v1/tickets/<id from call 1>",
    ]
    assert calls[2]["request"]["query"] == {"notify": "<id from call 1>", "note": "merged into"}
    assert calls[2]["request"]["body"] == {"status": "closed", "mergedInto": "<id from call 1>"}
    assert [call["effect"] for call in calls] == ["create", "update", "update", "update", "update"]
    assert sample_api.requests() == []  # the default dry run only records
    reviewer_decides(queue, proposal_id)
    status, stderr = run.finish()
    assert status == 0, stderr
    sent = [(entry["method"], entry["path"], entry["query"]) for entry in sample_api.real_requests()]
    assert sent == [
        ("POST", "/v1/tickets", {}),
        ("PATCH", "/v1/tickets/tk-4", {}),
        ("PATCH", "/v1/tickets/t1", {"notify": "tk-4", "note": "merged into"}),
        ("PATCH", "/v1/tickets/tk-4", {}),
        ("PATCH", "/v1/tickets/tk-4", {}),
    ]
    assert sample_api.real_requests()[2]["body"]["mergedInto"] == "tk-4"


def test_the_form_a_child_is_handed_is_one_no_url_encoding_changes(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    run = start_run(queue, sample_api, "--readable", str(tmp_path), command=_child(tmp_path, "chain"))
    proposal_id, _ = run.wait_for_plan()
    reviewer_decides(queue, proposal_id, "reject", reason="a test of the minted form")
    stdout, _ = run.process.communicate(timeout=60)
    minted = _answers(stdout)[0][3]["id"]
    assert re.fullmatch(r"[A-Za-z0-9_-]+", minted), minted
    assert urllib.parse.quote(minted, safe="") == urllib.parse.quote_plus(minted) == minted


def test_a_retry_under_one_key_is_one_call_answered_alike_and_a_repeat_without_one_is_two(
    queue: Queue, sample_api: SampleApi, tmp_path: Path
) -> None:
    proposal_id, plan, run = _run(queue, sample_api, tmp_path, "retries")
    assert [call["seq"] for call in plan["calls"]] == [1, 2, 3, 4]
    assert all(call["tool"] == "POST /v1/tickets" for call in plan["calls"])
    reviewer_decides(queue, proposal_id)
    stdout, rest = run.process.communicate(timeout=60)
    assert run.process.returncode == 0, "".join(run.lines) + rest
    answers = _answers(stdout)
    ids = [answer[3].get("id") for answer in answers]
    assert answers[0][2:] == answers[1][2:] and answers[0][2] == 201  # status, body and note alike
    assert answers[2][2:] == answers[3][2:]
    assert ids[:6] == [
        "rvw--id--from-call-1--",
        "rvw--id--from-call-1--",
        "rvw--id--from-call-2--",
        "rvw--id--from-call-2--",
        "rvw--id--from-call-3--",
        "rvw--id--from-call-4--",
    ]
    # The key again with another body: refused, and not in the plan.
    assert answers[6][2] == 422 and "Idempotency-Key".lower() in answers[6][3]["detail"]
    assert [entry["method"] for entry in sample_api.real_requests()] == ["POST"] * 4
    assert sorted(ticket for ticket in _tickets(sample_api) if ticket.startswith("tk-")) == [
        "tk-4",
        "tk-5",
        "tk-6",
        "tk-7",
    ]


def _tickets(api: SampleApi) -> list[str]:
    return [ticket["id"] for ticket in httpx.get(f"{api.url}/v1/tickets", timeout=10).json()["tickets"]]


@pytest.mark.parametrize(("mode", "alarmed"), [("binary", False), ("zero-width", True)])
def test_hidden_characters_are_an_alarm_in_text_and_not_in_a_body_held_as_bytes(
    queue: Queue, sample_api: SampleApi, tmp_path: Path, mode: str, alarmed: bool
) -> None:
    proposal_id, plan, run = _run(queue, sample_api, tmp_path, mode)
    reviewer_decides(queue, proposal_id, "reject", reason="a test of the alarm")
    run.finish()
    analysis = Analysis(parse_proposal(json.dumps(plan)))
    assert analysis.row(0).hidden_characters is alarmed
    assert ("hidden_characters" in analysis.alarm_names) is alarmed
    if mode == "binary":
        assert "base64" in plan["calls"][0]["request"]["body"]
