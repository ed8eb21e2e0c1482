"""Bodies that are not JSON, as the plan holds them: a form's fields in order, bytes exactly; what a
reviewer and a policy read of them; and a proposal whose body is not what its content type says."""

from __future__ import annotations

import base64
import hashlib
import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewer.plan.bodies import (
    FORM,
    body_view,
    bytes_body,
    exact_bytes,
    fields_as_arguments,
    record_body,
    wire_bytes,
)
from reviewer.plan.proposal import ProposalError, parse_proposal, plan_sha256
from reviewer.tui.widgets.panes import untrusted
from tests.builders import proposal_document


@given(st.binary(max_size=4096))
def test_bytes_come_back_exactly(raw: bytes) -> None:
    content_type, body = record_body("application/octet-stream", raw)
    assert wire_bytes(content_type, body) == raw


def test_a_large_body_is_held_in_chunks_under_the_string_limit() -> None:
    raw = bytes(range(256)) * 8192  # 2 MiB
    body = bytes_body(raw)
    assert len(body["base64"]) > 1 and all(len(chunk) <= 512 * 1024 for chunk in body["base64"])
    assert exact_bytes(body) == raw


def test_a_form_keeps_its_order_its_repeats_and_names_that_look_like_pointers() -> None:
    content_type, body = record_body(FORM, b"b=2&a=1&tag=x&tag=y&%2Fcalls%2F0%2Feffect=read&empty=")
    assert body == [
        ["b", "2"],
        ["a", "1"],
        ["tag", "x"],
        ["tag", "y"],
        ["/calls/0/effect", "read"],
        ["empty", ""],
    ]
    assert fields_as_arguments(content_type, body) == {
        "b": "2",
        "a": "1",
        "tag": ["x", "y"],
        "/calls/0/effect": "read",
        "empty": "",
    }
    assert wire_bytes(content_type, body) == b"b=2&a=1&tag=x&tag=y&%2Fcalls%2F0%2Feffect=read&empty="


def test_a_form_that_is_not_utf8_is_held_as_its_bytes() -> None:
    content_type, body = record_body(FORM, b"name=\xff\xfe")
    assert content_type == FORM and exact_bytes(body) == b"name=\xff\xfe"
    assert wire_bytes(content_type, body) == b"name=\xff\xfe"


def test_escape_codes_in_bytes_reach_the_screen_inert() -> None:
    raw = b"\x1b[2J\x1b]52;c;aGVsbG8=\x07[bold red]markup[/]\x9b31m" * 3
    view = body_view("text/plain", bytes_body(raw))
    assert view["length"] == len(raw) and view["sha256"] == hashlib.sha256(raw).hexdigest()
    shown = untrusted(view, multiline=True)
    assert "\x1b" not in shown and "\x07" not in shown and "\x9b" not in shown
    assert "length" in shown and "sha256" in shown


def test_a_multipart_form_is_read_part_by_part() -> None:
    boundary = "xYz"
    raw = (
        f'--{boundary}\r\nContent-Disposition: form-data; name="note"\r\n\r\nquarterly\r\n'
        f'--{boundary}\r\nContent-Disposition: form-data; name="file"; filename="r.csv"\r\n'
        f"Content-Type: text/csv\r\n\r\na,b\n1,2\r\n--{boundary}--\r\n"
    ).encode()
    view = body_view(f"multipart/form-data; boundary={boundary}", bytes_body(raw))
    assert view["parts"][0] == {"name": "note", "value": "quarterly"}
    assert view["parts"][1]["name"] == "file" and view["parts"][1]["file"] == "r.csv"
    assert view["parts"][1]["sha256"] == hashlib.sha256(b"a,b\n1,2").hexdigest()


@pytest.mark.parametrize(
    ("content_type", "body", "says"),
    [
        ("application/octet-stream", {"base64": ["not base64!"]}, "base64 is not valid"),
        ("application/octet-stream", "raw text", '{"base64"'),
        (FORM, {"a": "1"}, "held as bytes"),
        (FORM, [["a", 1]], "its fields in order"),
        ("text/plain\r\nX-Evil: 1", {"base64": []}, "line break"),
    ],
)
def test_a_proposal_whose_body_is_not_what_its_content_type_says_is_refused(
    content_type: str, body: object, says: str
) -> None:
    request = {"method": "POST", "path": "/v1/upload", "body": body, "content_type": content_type}
    document = proposal_document([{"tool": "upload", "effect": "create", "request": request}])
    with pytest.raises(ProposalError, match="request.body") as refused:
        parse_proposal(json.dumps(document))
    assert says in str(refused.value)


def test_a_bytes_body_is_in_the_digest() -> None:
    request = {
        "method": "PUT",
        "path": "/v1/upload",
        "body": {"base64": [base64.b64encode(b"one").decode()]},
        "content_type": "application/octet-stream",
    }
    document = proposal_document([{"tool": "upload", "effect": "update", "request": request}])
    first = parse_proposal(json.dumps(document))
    document["calls"][0]["request"]["body"] = {"base64": [base64.b64encode(b"two").decode()]}
    second = parse_proposal(json.dumps(document))
    assert plan_sha256(first) != plan_sha256(second)
