"""`serve --log-format json`: one JSON object a line, each request's lines with its id; and no token,
notification secret or webhook path in the log, whatever a caller sends or a delivery meets."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from reviewer.service.store.opener import open_store
from tests.queue_harness import body, proposal, start_service
from tests.service.ports import free_port

WEBHOOK_PATH = "/hooks/T0SECRET/B0SECRET"
NOTIFY_SECRET = "notify-signing-secret-0123456789"
DELIVERY_DEADLINE = 30.0


def test_json_lines_carry_the_request_id_and_no_secret(tmp_path: Path) -> None:
    secret_file = tmp_path / "notify.secret"
    secret_file.write_text(NOTIFY_SECRET)
    secret_file.chmod(0o600)
    webhook = f"http://127.0.0.1:{free_port()}{WEBHOOK_PATH}?token=query-secret"  # nobody listens there
    service = start_service(
        tmp_path, "--log-format", "json", "--notify", webhook, "--notify-secret-file", str(secret_file)
    )
    tokens = service.tokens({"agent": "agent", "alice": "reviewer"})
    try:
        with service.client(tokens["agent"]) as agent, service.client(tokens["alice"]) as alice:
            assert agent.post("/v1/proposals", content=body(proposal("logged"))).status_code == 201
            assert (
                alice.get(f"/v1/proposals/{tokens['agent']}").status_code == 404
            )  # a token pasted in a path
            assert alice.get("/v1/proposals", params={"token": tokens["alice"]}).status_code == 200
        wait_for_a_delivery_attempt(service.db)
    finally:
        service.stop()
    lines = [json.loads(line) for line in service.log().splitlines()]  # every line is one JSON object
    access = [line for line in lines if line["logger"] == "reviewer.service.access"]
    assert [(line["method"], line["status"]) for line in access[-3:]] == [
        ("POST", 201),
        ("GET", 404),
        ("GET", 200),
    ]
    assert all(len(line["request_id"]) == 16 for line in access)
    assert len({line["request_id"] for line in access}) == len(access)
    assert {"time", "level", "logger", "message"} <= set(lines[0])
    text = service.log()
    for secret in (*tokens.values(), NOTIFY_SECRET, WEBHOOK_PATH, "T0SECRET", "query-secret"):
        assert secret not in text
    assert "[redacted]" in text


def wait_for_a_delivery_attempt(db: Path | str) -> None:
    """Until the outbox records the failed attempt to the webhook (its error is then in hand)."""
    deadline = time.monotonic() + DELIVERY_DEADLINE
    store = open_store(db, clock=time.time, pending_ttl=60, approval_ttl=60, create=False)
    try:
        while time.monotonic() < deadline:
            if any(delivery.attempts for delivery in store.list_deliveries()):
                return
            time.sleep(0.05)
    finally:
        store.close()
    raise AssertionError("no delivery was attempted")


def test_the_text_log_escapes_what_a_client_sent_and_no_line_can_be_forged(tmp_path: Path) -> None:
    """An unauthenticated request whose path holds a line break, a forged log line and a terminal
    escape code: the default text log writes one line for it, the characters shown as escapes."""
    service = start_service(tmp_path)
    try:
        with service.client() as anonymous:
            forged = "/v1/x%0a2026-12-04 00:00:00,000 INFO reviewer.service.access: GET /admin 200 root%1b[2J"
            assert anonymous.get(forged).status_code in (401, 404)
    finally:
        service.stop()
    text = service.log()
    assert "\x1b" not in text
    assert not any(line.startswith("2026-12-04 00:00:00,000") for line in text.splitlines())
    (access,) = [line for line in text.splitlines() if "/v1/x" in line]
    assert "/v1/x\\n2026-12-04 00:00:00,000 INFO" in access and "root\\x1b[2J" in access


def test_a_traceback_keeps_its_lines_and_loses_its_escape_codes() -> None:
    import logging

    from reviewer.service.log_format import TEXT_FORMAT, TextLines

    formatter = TextLines(TEXT_FORMAT)
    try:
        raise ValueError("bad \x1b[31mred\x1b[0m")
    except ValueError:
        record = logging.LogRecord("t", logging.ERROR, __file__, 1, "failed: %s", ("a\nb",), sys.exc_info())
    line, *trace = formatter.format(record).splitlines()
    assert line.endswith("ERROR t: failed: a\\nb")
    assert trace[0] == "Traceback (most recent call last):"
    assert trace[-1] == "ValueError: bad \\x1b[31mred\\x1b[0m"
    assert record.getMessage() == "failed: a\nb", "the record itself is left as it was"
