"""A trail leaf as an OCSF API Activity event: the class's required attributes, and the leaf's hash
and position to trace it back to what an export proves."""

from __future__ import annotations

import json

import pytest

from reviewer.trail.entries import leaf
from reviewer.trail.ocsf import api_activity

REQUIRED = {"activity_id", "category_uid", "class_uid", "type_uid", "time", "severity_id", "metadata"}
"""The attributes every OCSF event requires, with API Activity's own: actor, api, src_endpoint."""


def test_a_decision_is_an_api_activity_update_naming_who_what_and_the_leaf() -> None:
    content = json.loads(
        leaf(
            index=4,
            seq=9,
            at=1_780_000_000.5,
            actor="alice",
            event="approved",
            proposal_id="p-1",
            revision=2,
            plan_sha256="5be1" * 16,
            reason=None,
            statement="statement",
            signature="-----BEGIN SSH SIGNATURE-----",
            key_fingerprint="SHA256:abc",
            identity="oidc:https://id.example#alice-7",
        )
    )
    event = api_activity(content, "bGVhZg==", "reviewer.trail/0123")
    assert REQUIRED | {"actor", "api", "src_endpoint"} <= set(event)
    assert (event["class_uid"], event["category_uid"], event["activity_id"], event["type_uid"]) == (
        6003,
        6,
        3,
        600303,
    )
    assert event["time"] == 1_780_000_000_500
    assert event["actor"] == {
        "user": {"name": "alice", "uid": "oidc:https://id.example#alice-7", "type_id": 1, "type": "User"}
    }
    assert event["api"]["service"] == {"name": "reviewer queue", "uid": "reviewer.trail/0123"}
    assert event["resources"][0] == {
        "type": "proposal",
        "uid": "p-1",
        "data": {"revision": 2, "plan_sha256": "5be1" * 16},
    }
    assert (event["metadata"]["uid"], event["metadata"]["sequence"]) == ("bGVhZg==", 4)
    assert event["unmapped"]["signed"]["key_fingerprint"] == "SHA256:abc"
    submitted = api_activity({**content, "event": "submitted"}, "x", "o")
    assert (submitted["activity_id"], submitted["type_uid"]) == (1, 600301)
    assert (submitted["actor"]["user"]["type_id"], submitted["actor"]["user"]["type"]) == (4, "Service")


def nulls_in(value: object, path: str = "$") -> list[str]:
    if isinstance(value, dict):
        return [found for key, item in value.items() for found in nulls_in(item, f"{path}.{key}")]
    if isinstance(value, list):
        return [found for index, item in enumerate(value) for found in nulls_in(item, f"{path}[{index}]")]
    return [path] if value is None or value == {} else []


@pytest.mark.parametrize("event", ["submitted", "approved", "claimed", "executed", "a-later-event"])
def test_an_event_carries_what_the_ocsf_models_require_and_no_null(event: str) -> None:
    """OCSF 1.3.0's required attributes of the base event, API Activity and the objects it holds
    (actor: a user, named; api: an operation; metadata: the product and the schema version), the
    user's `type_id` and the service's `uid` that loaders built on the OCSF models ask for; a leaf
    of an old release, with no identity, no reason and no signature, leaves them out rather than
    writing nulls, in `unmapped` and everywhere."""
    content = json.loads(
        leaf(
            index=0,
            seq=1,
            at=1_780_000_000.0,
            actor="deploy-bot",
            event=event,
            proposal_id="p-1",
            revision=1,
            plan_sha256="5be1" * 16,
            reason=None,
        )
    )
    ocsf = api_activity(content, "bGVhZg==", "reviewer.trail/0123")
    assert nulls_in(ocsf) == []
    assert REQUIRED | {"actor", "api", "src_endpoint"} <= set(ocsf)
    user = ocsf["actor"]["user"]
    assert user["name"] == "deploy-bot" and user["type_id"] in (0, 1, 4) and "uid" not in user
    assert ocsf["api"]["operation"] == event and ocsf["api"]["service"]["uid"] == "reviewer.trail/0123"
    assert {"name", "vendor_name"} <= set(ocsf["metadata"]["product"]) and ocsf["metadata"]["version"]
    assert ocsf["unmapped"] == {"trail_seq": 1}


def export_body(entries: int, *, broken: int | None = None, last_newline: bool = True) -> bytes:
    """A queue's export: its header, then `entries` entry lines; line `broken` (1 the header) is not JSON."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    from reviewer.trail import checkpoint, merkle
    from reviewer.trail.entries import entry_line, header_line

    contents = [
        leaf(
            index=index,
            seq=index + 1,
            at=1_780_000_000.0 + index,
            actor="alice",
            event="submitted",
            proposal_id=f"p-{index}",
            revision=1,
            plan_sha256="5be1" * 16,
            reason=None,
        )
        for index in range(entries)
    ]
    tree = merkle.CompactTree()
    hashes = [tree.append(content) for content in contents]
    signed = checkpoint.sign(Ed25519PrivateKey.generate(), entries, tree.root())
    lines = [header_line(0, entries, signed.text, [])]
    lines += [entry_line(index, hashes[index], content) for index, content in enumerate(contents)]
    if broken is not None:
        lines[broken - 1] = b'{"index": 1, "leaf_hash": \x1b[2J\n'
    body = b"".join(lines)
    return body if last_newline else body.rstrip(b"\n")


def ocsf_export(body: bytes, tmp_path, monkeypatch, capsys) -> tuple[int, list[dict[str, object]], str]:
    """`reviewer trail export --ocsf` against a queue on loopback that streams `body` in small chunks."""
    from reviewer.__main__ import main
    from tests.agent.loopback import loopback_servers

    def export(server, handler) -> None:
        handler.send_response(200)
        handler.send_header("Content-Type", "application/x-ndjson")
        handler.send_header("Content-Length", str(len(body)))
        handler.end_headers()
        try:
            for start in range(0, len(body), 97):
                handler.wfile.write(body[start : start + 97])
                handler.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass  # the command stopped reading at the line it refused

    output = tmp_path / "trail.ocsf.jsonl"
    monkeypatch.setenv("REVIEWER_TOKEN", "rvw_auditor-token")
    with loopback_servers(1) as [queue]:
        queue.answer = export
        code = main(["trail", "export", "--ocsf", "--queue", queue.url, "-o", str(output)])
    said = capsys.readouterr().err
    events = [json.loads(line) for line in output.read_text().splitlines()]
    return code, events, said


def test_the_ocsf_export_keeps_a_last_entry_without_its_newline(tmp_path, monkeypatch, capsys) -> None:
    code, events, said = ocsf_export(export_body(5, last_newline=False), tmp_path, monkeypatch, capsys)
    assert code == 0, said
    assert [event["metadata"]["sequence"] for event in events] == [0, 1, 2, 3, 4]


def test_the_ocsf_export_refuses_a_line_that_is_not_json_by_its_number(tmp_path, monkeypatch, capsys) -> None:
    code, _, said = ocsf_export(export_body(5, broken=4), tmp_path, monkeypatch, capsys)
    assert code == 1
    assert "line 4 of the queue's export is not JSON" in said
    assert "Traceback" not in said and "\x1b" not in said


def test_the_ocsf_export_refuses_an_entry_without_its_leaf_by_its_number(
    tmp_path, monkeypatch, capsys
) -> None:
    body = export_body(3, last_newline=False) + b'\n{"index": 3, "leaf_hash": "aGFzaA==", "leaf": 7}'
    code, events, said = ocsf_export(body, tmp_path, monkeypatch, capsys)
    assert code == 1 and len(events) == 3
    assert "line 5 of the queue's export is not a trail entry" in said


@pytest.mark.parametrize(
    ("hostile", "said"),
    [
        (b'{"checkpoint": ["not", "text"]}\n', "the queue's export has no readable checkpoint"),
        (None, "line 2 of the queue's export nests deeper than any trail entry"),
        (None, "line 2 of the queue's export is not a trail entry"),
    ],
)
def test_the_ocsf_export_refuses_a_hostile_header_or_entry_in_words(
    tmp_path, monkeypatch, capsys, hostile: bytes | None, said: str
) -> None:
    """A header whose checkpoint is no text, an entry nested past any limit, a leaf_hash that is no
    hash: each is refused in a sentence, never a traceback."""
    header, *_ = export_body(1).splitlines(keepends=True)
    if hostile is not None:
        body = hostile + b'{"index": 0}\n'
    elif "nests" in said:
        body = header + b"[" * 100_000 + b"]" * 100_000 + b"\n"
    else:
        entry = json.loads(export_body(1).splitlines()[1])
        body = header + json.dumps({**entry, "leaf_hash": 5}).encode() + b"\n"
    code, _, printed = ocsf_export(body, tmp_path, monkeypatch, capsys)
    assert code == 1 and said in printed and "Traceback" not in printed
