"""Tests of the proposal format v1: the plan digest against hand-written canonical JSON, and every limit."""

from __future__ import annotations

import copy
import hashlib
import json
from typing import Any

import pytest

from reviewer.plan.proposal import (
    MAX_BODY_BYTES,
    MAX_CALLS,
    MAX_DEPTH,
    MAX_SAFE_INTEGER,
    MAX_STRING_CHARS,
    ProposalError,
    canonical_plan,
    is_destructive,
    parse_proposal,
    plan_sha256,
)

MINIMAL: dict[str, Any] = {
    "format": "reviewer.proposal/v1",
    "proposal_id": "deskline-merge-0042",
    "revision": 1,
    "title": "Merge t1 and t2 into a new ticket, delete t3",
    "agent": {"name": "deskline-agent"},
    "created_at": "2026-10-15T09:00:00Z",
    "target": {"api": "deskline"},
    "dry_run": {"via": "server"},
    "calls": [
        {"seq": 1, "tool": "get_ticket", "effect": "read", "args": {"id": "t1"}},
        {"seq": 2, "tool": "delete_ticket", "effect": "delete", "args": {"id": "t3"}},
    ],
}


def proposal_with(**changes: Any) -> dict[str, Any]:
    proposal = copy.deepcopy(MINIMAL)
    proposal.update(changes)
    return proposal


def parse(document: dict[str, Any]) -> Any:
    return parse_proposal(json.dumps(document), "test.json")


def rejection(document: dict[str, Any] | bytes | str) -> str:
    """The message a rejected proposal gets; fails the test if it is accepted."""
    data = json.dumps(document) if isinstance(document, dict) else document
    with pytest.raises(ProposalError) as caught:
        parse_proposal(data, "test.json")
    message = str(caught.value)
    assert message.startswith("test.json: "), "the message names the source"
    return message


# --- the digest -----------------------------------------------------------------------------------

DIGEST_INPUT = """{
  "format": "reviewer.proposal/v1", "proposal_id": "deskline-merge-0042", "revision": 3,
  "title": "Merge", "task": "not part of the plan", "agent": {"name": "deskline-agent", "run_id": "run-7"},
  "created_at": "2026-10-15T09:00:00Z",
  "target": {"environment": null, "base_url": "http://127.0.0.1:8080", "api": "deskline"},
  "dry_run": {"via": "server", "write_requests": 2, "writes_kept": 0},
  "calls": [
    {"seq": 1, "tool": "create_ticket", "effect": "create",
     "args": {"title": "Printer on fire", "amount": 100.0, "ratio": 1e-7, "big": 1e21, "half": 0.5,
              "zero": -0.0, "max": 9007199254740991, "note": "caf\\u00e9\\u001f\\u2028\\u007f/\\"q\\"\\\\"},
     "request": {"method": "POST", "path": "/v1/tickets", "query": {"dryRun": "All"},
                 "body": {"title": "Printer on fire"}},
     "outcome": {"status": "ok", "http_status": 201, "result": {"id": "tk-4"}}},
    {"seq": 2, "tool": "update_ticket", "effect": "update",
     "args": {"status": "closed", "id": "t1", "mergedInto": "<id from call 1>"},
     "request": null,
     "outcome": {"status": "refused", "http_status": 422, "message": "mergedInto names no ticket: tk-4"}}
  ]
}"""

# Written by hand from RFC 8785: keys sorted, no whitespace, 100.0 -> 100, 1e21 -> 1e+21, -0.0 -> 0,
# controls below U+0020 as lowercase \\u00XX, everything else (é, U+2028, DEL, /) raw, only " and \\
# escaped; the outcome, and every key that is null or absent, left out.
DIGEST_CANONICAL = (
    '{"calls":['
    '{"args":{"amount":100,"big":1e+21,"half":0.5,"max":9007199254740991,'
    '"note":"café\\u001f\u2028\u007f/\\"q\\"\\\\","ratio":1e-7,"title":"Printer on fire","zero":0},'
    '"effect":"create",'
    '"request":{"body":{"title":"Printer on fire"},"method":"POST","path":"/v1/tickets",'
    '"query":{"dryRun":"All"}},'
    '"seq":1,"tool":"create_ticket"},'
    '{"args":{"id":"t1","mergedInto":"<id from call 1>","status":"closed"},'
    '"effect":"update","seq":2,"tool":"update_ticket"}'
    '],"target":{"api":"deskline","base_url":"http://127.0.0.1:8080"}}'
)


def test_digest_is_sha256_of_hand_written_canonical_json() -> None:
    proposal = parse_proposal(DIGEST_INPUT)
    assert canonical_plan(proposal).decode() == DIGEST_CANONICAL
    assert plan_sha256(proposal) == hashlib.sha256(DIGEST_CANONICAL.encode()).hexdigest()


def test_digest_orders_keys_by_utf16_code_units() -> None:
    """U+1F600 is D83D DE00 in UTF-16, so it sorts before U+FB01 although its code point is larger."""
    document = proposal_with(
        calls=[
            {"seq": 1, "tool": "tag", "effect": "other", "args": {"\ufb01": 2, "\U0001f600": 1, "id": 0.25}}
        ]
    )
    canonical = (
        '{"calls":[{"args":{"id":0.25,"\U0001f600":1,"\ufb01":2},"effect":"other","seq":1,"tool":"tag"}],'
        '"target":{"api":"deskline"}}'
    )
    proposal = parse(document)
    assert canonical_plan(proposal).decode() == canonical
    assert plan_sha256(proposal) == hashlib.sha256(canonical.encode()).hexdigest()


def test_digest_ignores_outcomes_and_what_is_not_executed() -> None:
    reference = json.loads(DIGEST_INPUT)
    changed = copy.deepcopy(reference)
    changed["calls"][0]["outcome"] = {"status": "error", "message": "timeout"}
    del changed["calls"][1]["outcome"]
    changed.update(title="Another title", task=None, revision=9, created_at="2027-01-01T00:00:00Z")
    changed["dry_run"] = {"via": "record"}
    changed["agent"] = {"name": "someone-else"}
    assert plan_sha256(parse(changed)) == plan_sha256(parse(reference))


def test_digest_treats_null_and_missing_optional_keys_alike() -> None:
    with_nulls = proposal_with(
        target={"api": "deskline", "base_url": None, "environment": None},
        calls=[
            {"seq": 1, "tool": "ping", "effect": "read", "args": None, "request": None, "outcome": None},
            {
                "seq": 2,
                "tool": "delete_ticket",
                "effect": "delete",
                "request": {"method": "DELETE", "path": "/v1/tickets/t3", "query": None, "body": None},
            },
        ],
    )
    without = proposal_with(
        target={"api": "deskline"},
        calls=[
            {"seq": 1, "tool": "ping", "effect": "read"},
            {
                "seq": 2,
                "tool": "delete_ticket",
                "effect": "delete",
                "request": {"method": "DELETE", "path": "/v1/tickets/t3"},
            },
        ],
    )
    assert plan_sha256(parse(with_nulls)) == plan_sha256(parse(without))


@pytest.mark.parametrize(
    "change",
    [
        lambda plan: plan["calls"][1]["args"].update(id="t4"),
        lambda plan: plan["calls"][1].update(effect="update"),
        lambda plan: plan["calls"][1].update(tool="archive_ticket"),
        lambda plan: plan["calls"][1].update(seq=3),
        lambda plan: plan["target"].update(environment="production"),
        lambda plan: plan["calls"][1].update(request={"method": "DELETE", "path": "/v1/tickets/t3"}),
    ],
)
def test_digest_changes_with_what_would_execute(change: Any) -> None:
    changed = copy.deepcopy(MINIMAL)
    change(changed)
    assert plan_sha256(parse(changed)) != plan_sha256(parse(MINIMAL))


@pytest.mark.parametrize("astral_key", [False, True], ids=["msgspec", "rfc8785 reference"])
def test_the_destructive_flag_is_part_of_the_digest(astral_key: bool) -> None:
    """What a reviewer approves is what runs: `destructive` raises what a policy asks and what the screen
    counts, so clearing it after approval must change the digest the approval names. Written as false it
    digests as absent, so the plans made before the flag existed keep their digests."""
    plan = copy.deepcopy(MINIMAL)
    if astral_key:  # the slower reference path, which a key outside the Basic Multilingual Plane takes
        plan["calls"][0]["args"]["\U0001f600"] = 1
    marked = copy.deepcopy(plan)
    marked["calls"][0]["destructive"] = True
    written_false = copy.deepcopy(plan)
    written_false["calls"][0]["destructive"] = False
    assert b'"destructive":true' in canonical_plan(parse(marked))
    assert plan_sha256(parse(marked)) != plan_sha256(parse(plan))
    assert plan_sha256(parse(written_false)) == plan_sha256(parse(plan))


# --- limits and errors ----------------------------------------------------------------------------


def test_body_over_the_size_limit_is_refused_before_decoding() -> None:
    message = rejection(b" " * (MAX_BODY_BYTES + 1))
    assert f"{MAX_BODY_BYTES:,} bytes" in message


def test_string_over_the_length_limit_names_its_field() -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][1]["args"]["note"] = "x" * (MAX_STRING_CHARS + 1)
    message = rejection(document)
    assert "$.calls[1].args.note" in message
    assert f"{MAX_STRING_CHARS + 1:,} characters" in message


def test_title_over_the_length_limit_is_refused() -> None:
    assert "$.title" in rejection(proposal_with(title="x" * (MAX_STRING_CHARS + 1)))


def test_string_at_the_length_limit_is_accepted() -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][0]["args"]["note"] = "x" * MAX_STRING_CHARS
    assert len(parse(document).calls[0].args["note"]) == MAX_STRING_CHARS


def nested(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {"leaf": 1}
    for _ in range(levels - 1):
        value = {"a": value}
    return value


def test_nesting_up_to_the_limit_is_accepted_and_one_more_is_refused() -> None:
    # The proposal is level 1, `calls` 2, a call 3, its args 4: args may hold MAX_DEPTH - 3 levels.
    accepted = copy.deepcopy(MINIMAL)
    accepted["calls"][0]["args"] = nested(MAX_DEPTH - 3)
    parse(accepted)
    refused = copy.deepcopy(MINIMAL)
    refused["calls"][0]["args"] = nested(MAX_DEPTH - 2)
    message = rejection(refused)
    assert f"nests deeper than {MAX_DEPTH} levels" in message
    assert "$.calls[0].args.a" in message


def test_pathological_nesting_is_an_error_not_a_crash() -> None:
    head = json.dumps(proposal_with(calls=[]))[: -len("[]}")]
    body = head + '[{"seq": 1, "tool": "t", "effect": "other", "args": ' + '{"a":' * 100_000 + "1"
    body += "}" * 100_000 + "}]}"
    assert "nests deeper" in rejection(body)


def test_call_count_over_the_limit_is_refused() -> None:
    head = json.dumps(proposal_with(calls=[]))[: -len("[]}")].encode()
    calls = b",".join(b'{"seq":%d,"tool":"t","effect":"read"}' % seq for seq in range(1, MAX_CALLS + 2))
    message = rejection(head + b"[" + calls + b"]}")
    assert f"{MAX_CALLS + 1:,} calls" in message and "$.calls" in message


@pytest.mark.parametrize("integer", [MAX_SAFE_INTEGER + 1, -(MAX_SAFE_INTEGER + 1), 10**30])
def test_integer_beyond_2_to_the_53_is_refused_not_rounded(integer: int) -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][1]["args"]["amount_cents"] = integer
    message = rejection(document)
    assert "$.calls[1].args.amount_cents" in message and "2^53" in message


def test_integer_beyond_2_to_the_53_in_a_request_body_list_is_refused() -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][0]["request"] = {"method": "POST", "path": "/x", "body": {"ids": [1, 2**60]}}
    assert "$.calls[0].request.body.ids[1]" in rejection(document)


def test_largest_safe_integer_is_accepted_and_digested_exactly() -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][1]["args"]["amount_cents"] = MAX_SAFE_INTEGER
    document["calls"][1]["args"]["refund_cents"] = -MAX_SAFE_INTEGER
    proposal = parse(document)
    assert proposal.calls[1].args["amount_cents"] == 2**53 - 1
    assert b'"amount_cents":9007199254740991' in canonical_plan(proposal)
    assert b'"refund_cents":-9007199254740991' in canonical_plan(proposal)


def test_seq_above_2_to_the_53_is_refused() -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][1]["seq"] = 2**53
    assert "$.calls[1].seq" in rejection(document)


@pytest.mark.parametrize("second_seq", [1, 0, -4])
def test_seq_not_increasing_is_refused(second_seq: int) -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][1]["seq"] = second_seq
    assert "$.calls[1].seq" in rejection(document)


@pytest.mark.parametrize("proposal_id", ["", "../etc/passwd", "has space", "x" * 129, "tab\there", "é"])
def test_bad_proposal_id_is_refused(proposal_id: str) -> None:
    assert "$.proposal_id" in rejection(proposal_with(proposal_id=proposal_id))


def test_a_proposal_id_ending_in_a_newline_is_refused() -> None:
    """The pattern's `$` matches before a final newline in Python: an id no URL path could name."""
    assert "a proposal_id holds only" in rejection(proposal_with(proposal_id="planted\n"))


def test_longest_proposal_id_is_accepted() -> None:
    assert parse(proposal_with(proposal_id="a." + "x" * 126)).proposal_id.endswith("x")


def test_unknown_field_in_a_call_is_refused_by_name() -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][1]["dry_run_flag"] = False
    message = rejection(document)
    assert "$.calls[1]" in message and "dry_run_flag" in message


def test_unknown_top_level_field_is_refused_by_name() -> None:
    assert "approved_by" in rejection(proposal_with(approved_by="the agent itself"))


@pytest.mark.parametrize(
    ("change", "path"),
    [
        (lambda plan: plan["calls"][1].update(tool=5), "$.calls[1].tool"),
        (lambda plan: plan["calls"][0].update(effect="destroy"), "$.calls[0].effect"),
        (lambda plan: plan["calls"][0].update(args=["t1"]), "$.calls[0].args"),
        (lambda plan: plan["calls"][1].update(outcome={"status": "maybe"}), "$.calls[1].outcome.status"),
        (
            lambda plan: plan["calls"][1].update(outcome={"status": "ok", "http_status": 999}),
            "$.calls[1].outcome.http_status",
        ),
        (lambda plan: plan["dry_run"].update(via="prod"), "$.dry_run.via"),
        (lambda plan: plan["dry_run"].update(writes_kept=-1), "$.dry_run.writes_kept"),
        (lambda plan: plan.update(revision=0), "$.revision"),
        (lambda plan: plan.update(format="reviewer.proposal/v2"), "$.format"),
        (lambda plan: plan["agent"].pop("name"), "$.agent"),
        (lambda plan: plan.update(created_at="yesterday"), "$.created_at"),
    ],
)
def test_wrong_value_names_the_field(change: Any, path: str) -> None:
    document = copy.deepcopy(MINIMAL)
    change(document)
    assert f"test.json: {path}" in rejection(document)


@pytest.mark.parametrize(
    "data", [b"", b"{", b'{"format": "reviewer.proposal/v1",}', b"\xff\xfe{}", "nul\x00"]
)
def test_invalid_json_is_an_error_not_a_crash(data: bytes | str) -> None:
    rejection(data)


def test_a_proposal_within_every_limit_parses_whole() -> None:
    proposal = parse(MINIMAL)
    assert [call.seq for call in proposal.calls] == [1, 2]
    assert proposal.calls[1].effect == "delete"


def test_a_built_proposal_hashes_like_its_json() -> None:
    """A proposal an agent builds in code carries plain floats; its digest must still be RFC 8785's
    (100.0 written as 100, 1e21 as 1e+21), the same as the queue computes from the JSON it receives."""
    import msgspec

    from reviewer.plan.proposal import Call, Proposal, dumps, parse_proposal, plan_sha256

    built = msgspec.convert(
        {
            "format": "reviewer.proposal/v1",
            "proposal_id": "floats",
            "revision": 1,
            "title": "t",
            "agent": {"name": "a"},
            "created_at": "2026-10-15T09:00:00Z",
            "target": {"api": "x"},
            "dry_run": {"via": "record"},
            "calls": [{"seq": 1, "tool": "t", "effect": "update", "args": {"a": 100.0, "b": 1e21, "c": 0.5}}],
        },
        Proposal,
    )
    assert isinstance(built.calls[0], Call) and type(built.calls[0].args["a"]) is float
    assert plan_sha256(built) == plan_sha256(parse_proposal(dumps(built)))


def test_a_proposal_without_calls_is_refused() -> None:
    from reviewer.plan.proposal import ProposalError, parse_proposal

    with pytest.raises(ProposalError, match=r"\$\.calls: a proposal needs at least one call"):
        parse_proposal(
            b'{"format": "reviewer.proposal/v1", "proposal_id": "p", "revision": 1, "title": "t",'
            b' "agent": {"name": "a"}, "created_at": "2026-10-15T09:00:00Z", "target": {"api": "x"},'
            b' "dry_run": {"via": "record"}, "calls": []}'
        )


# --- the cheap scan, the cost bound, and bytes that are not UTF-8 ------------------------------------

from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from reviewer.plan.proposal import (  # noqa: E402
    MAX_CALL_VALUES,
    MAX_JSON_VALUES,
    CallList,
    ProposalNotJSON,
    check_calls,
    json_values_at_most,
    scan_proposal,
)


def with_call_args(args_json: bytes, calls: int = 1) -> bytes:
    """A proposal whose calls all carry `args_json` verbatim (built as bytes: too large for json.dumps)."""
    head = json.dumps({key: value for key, value in MINIMAL.items() if key != "calls"})[:-1].encode()
    one = b'{"seq": %d, "tool": "t", "effect": "other", "args": ' + args_json + b"}"
    return head + b', "calls": [' + b",".join(one % (seq + 1) for seq in range(calls)) + b"]}"


def test_the_scan_lists_header_and_count_and_leaves_the_calls_to_check_calls() -> None:
    document = copy.deepcopy(MINIMAL)
    document["calls"][1]["seq"] = "2"
    proposal = scan_proposal(json.dumps(document), "test.json")
    assert (proposal.proposal_id, proposal.title, len(proposal.calls)) == (
        "deskline-merge-0042",
        MINIMAL["title"],
        2,
    )
    assert proposal.calls[0].tool == "get_ticket", "a good call is readable before the checks"
    assert proposal.calls[1].tool.startswith("(unreadable call: $.seq: Expected `int`"), (
        "a bad call reads as a stand-in that says so, not an exception in the middle of a paint"
    )
    with pytest.raises(ProposalError, match=r"test\.json: \$\.calls\[1\]\.seq: Expected `int`"):
        check_calls(proposal, "test.json")


@pytest.mark.parametrize("where", ["title", "call"])
def test_invalid_utf8_anywhere_is_not_json(where: str) -> None:
    """msgspec checks UTF-8 only in what it decodes, and the scan leaves calls raw: the scan checks it."""
    data = json.dumps(MINIMAL).encode()
    marker = b"Merge t1" if where == "title" else b'"t3"'
    data = data.replace(marker, marker[:-1] + b"\xff" + marker[-1:])
    with pytest.raises(ProposalNotJSON, match=r"test\.json: is not UTF-8: byte 0xff at offset [\d,]+"):
        parse_proposal(data, "test.json")


def test_utf8_split_across_the_scans_chunks_is_accepted() -> None:
    title = "é" * (1024 * 1024)  # two bytes each: the 1 MB chunks end inside characters
    proposal = parse_proposal(json.dumps(proposal_with(title=title[:1_000_000]), ensure_ascii=False))
    assert proposal.title == title[:1_000_000]


def test_a_call_of_millions_of_empty_arrays_is_refused_with_its_count() -> None:
    """The shape that took the app to 1.6 GB (32 MB of `[]` in one call's arguments), just over the
    cap: the call, its seq, tool, effect, args and list, and the arrays."""
    data = with_call_args(b'{"x": [' + b",".join([b"[]"] * (MAX_CALL_VALUES + 1)) + b"]}")
    message = rejection(data)
    assert f"$.calls[0]: holds {MAX_CALL_VALUES + 7:,} JSON values" in message
    assert f"at most {MAX_CALL_VALUES:,}" in message


def test_a_proposal_over_the_total_value_cap_is_refused() -> None:
    per_call = MAX_CALL_VALUES - 10
    calls = MAX_JSON_VALUES // per_call + 1
    data = with_call_args(b"[" + b",".join([b"0"] * per_call) + b"]", calls)
    assert f"at most {MAX_JSON_VALUES:,} are allowed" in rejection(data)


def test_commas_and_brackets_inside_strings_do_not_count() -> None:
    """A CSV upload is one string however many commas it holds: the bound strips strings before it
    refuses."""
    csv = "[{," * 200_000  # 600,000 to count in 600,000 bytes: both over the cap
    data = with_call_args(json.dumps({"csv": csv}).encode())
    assert json_values_at_most(data, MAX_CALL_VALUES) == 19  # 13 in the header, 6 in the call
    assert parse_proposal(data).calls[0].args == {"csv": csv}


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-1000, 1000) | st.text(alphabet=',[]{}:"\\ ab', max_size=6),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(st.text(alphabet=',[]{}"a', max_size=3), children, max_size=4)
    ),
    max_leaves=30,
)


def count_values(value: Any) -> int:
    if isinstance(value, list):
        return 1 + sum(map(count_values, value))
    if isinstance(value, dict):
        return 1 + sum(map(count_values, value.values()))
    return 1


@given(json_values, st.booleans())
@settings(max_examples=300, deadline=None)
def test_the_value_count_is_exact_once_over_the_cap_and_never_below_it(value: Any, pretty: bool) -> None:
    data = json.dumps(value, indent=1 if pretty else None, separators=None if pretty else (",", ":")).encode()
    assert json_values_at_most(data, cap=0) == count_values(value) or (
        pretty and json_values_at_most(data, cap=0) > count_values(value)
    ), "exact, except that white space inside an empty container may only overcount"
    assert json_values_at_most(data, cap=10**9) >= count_values(value)


def test_reading_calls_keeps_a_bounded_number_of_bytes_decoded(monkeypatch: pytest.MonkeyPatch) -> None:
    """Calls read are kept decoded up to a budget of their JSON's bytes: a tenth of the budget and
    of the calls' size show the same bound ten times faster."""
    monkeypatch.setattr(CallList, "_RECENT_BYTES", CallList._RECENT_BYTES // 10)
    big_args = b'{"x": [' + b",".join([b"[]"] * 10_000) + b"]}"
    proposal = parse_proposal(with_call_args(big_args, 8))
    calls = proposal.calls
    assert isinstance(calls, CallList)
    for index in range(len(calls)):
        assert len(calls[index].args["x"]) == 10_000
    assert len(calls._recent) < len(calls), "every large call was kept decoded"


@pytest.mark.parametrize(
    ("effect", "flagged", "expected"),
    [("delete", False, True), ("update", True, True), ("create", True, True), ("update", False, False)],
)
def test_a_call_is_destructive_when_it_deletes_or_is_flagged(
    effect: str, flagged: bool, expected: bool
) -> None:
    """The one test the analysis, its ratios, its first destructive row and the policy's counts share."""
    assert is_destructive(effect, flagged) is expected
