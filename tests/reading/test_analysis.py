"""Tests of the analysis: section 2's reading of each outcome, placeholders, ratios, extremes, alarms."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.plan.proposal import Proposal, ProposalError, dumps, parse_proposal, scan_proposal
from reviewer.plan.sanitize import has_hidden
from reviewer.reading.analysis import (
    PLACEHOLDER,
    Analysis,
    Extremes,
    NumericField,
    Placeholder,
    Verdict,
    value_has_hidden,
)
from reviewer.tui.model.sources import EXECUTION_SUFFIX
from tests.builders import proposal_document

SAMPLES = Path(__file__).resolve().parents[2] / "sample_proposals"


def sample(name: str) -> Analysis:
    return Analysis(parse_proposal((SAMPLES / name).read_bytes(), name))


def plan(calls: list[dict[str, Any]], via: str = "server", **changes: Any) -> Analysis:
    """A small proposal around `calls`, checked by the real parser; its dry run proven to have kept
    nothing (a log of kept writes read for the dry run's window) unless `dry_run` says otherwise."""
    changes.setdefault("dry_run", {"via": via, "writes_kept": 0})
    return Analysis(parse_proposal(json.dumps(proposal_document(calls, via=via, **changes)), "test"))


def unchecked_plan(calls: list[dict[str, Any]], via: str = "server", **changes: Any) -> Analysis:
    """A proposal as the terminal app paints it before its calls are checked (`scan_proposal`): the
    check refuses a placeholder naming no earlier call, but the rows must read it right meanwhile."""
    changes.setdefault("dry_run", {"via": via, "writes_kept": 0})
    return Analysis(scan_proposal(json.dumps(proposal_document(calls, via=via, **changes)), "test"))


def call(seq: int, tool: str = "update_ticket", effect: str = "update", **fields: Any) -> dict[str, Any]:
    return {"seq": seq, "tool": tool, "effect": effect, **fields}


def refused(http_status: int = 422) -> dict[str, Any]:
    return {"status": "refused", "http_status": http_status}


OK = {"status": "ok"}


# --- the reference scenario ---------------------------------------------------------------


def test_server_dry_run_of_the_reference_scenario_reads_exactly_as_the_design_says() -> None:
    analysis = sample("deskline-merge.server.json")
    rows = [analysis.row(index) for index in range(len(analysis))]
    assert [row.verdict for row in rows] == [
        Verdict.VALIDATED,
        Verdict.CHAIN_NOISE,
        Verdict.CHAIN_NOISE,
        Verdict.REAL_REFUSAL,
    ]
    create, close_t1, close_t2, delete_t3 = rows
    assert (create.http_status, create.depends_on, create.destructive) == (201, (), False)
    assert (close_t1.http_status, close_t1.message) == (422, "mergedInto names no ticket: tk-4")
    assert close_t1.depends_on == close_t2.depends_on == (1,)
    assert close_t1.unresolved == ()
    assert (delete_t3.http_status, delete_t3.message) == (409, "close the ticket before deleting it")
    assert delete_t3.destructive and delete_t3.depends_on == ()
    assert [row.resource for row in rows] == [
        "/v1/tickets",
        "/v1/tickets/t1",
        "/v1/tickets/t2",
        "/v1/tickets/t3",
    ]
    assert [(row.method, row.path) for row in rows[2:]] == [
        ("PATCH", "/v1/tickets/t2"),
        ("DELETE", "/v1/tickets/t3"),
    ]


def test_fake_dry_run_of_the_reference_scenario_validates_nothing() -> None:
    analysis = sample("deskline-merge.fake.json")
    assert {analysis.row(index).verdict for index in range(len(analysis))} == {Verdict.NOT_VALIDATED}
    assert analysis.row(3).destructive
    assert analysis.alarms == ("1 delete: ticket", "nothing was validated (fake dry run)")


def test_recorded_reference_scenario_is_all_recorded() -> None:
    analysis = sample("deskline-merge.record.json")
    assert [analysis.row(index).verdict for index in range(len(analysis))] == [Verdict.RECORDED] * 4
    assert analysis.ratios.recorded == 4
    assert analysis.alarms == ("1 delete: ticket", "nothing was validated (recorded only)")


def test_reference_scenario_ratios() -> None:
    ratios = sample("deskline-merge.server.json").ratios
    assert (ratios.calls, ratios.creates, ratios.updates, ratios.deletes, ratios.reads, ratios.other) == (
        4,
        1,
        2,
        1,
        0,
        0,
    )
    assert (ratios.validated, ratios.chain_noise, ratios.real_refusals, ratios.not_validated) == (1, 2, 1, 0)
    assert (ratios.write_requests, ratios.writes_kept) == (4, 0)
    assert ratios.resources == 4
    assert ratios.depends_on_placeholders == 2
    assert ratios.unresolved_placeholders == 0
    assert ratios.destructive_share == 0.25


def test_reference_scenario_alarms_the_real_refusal_and_names_the_delete() -> None:
    assert sample("deskline-merge.server.json").alarms == ("1 real refusal", "1 delete: ticket")


def test_the_alarms_name_every_kind_a_plan_deletes() -> None:
    """The Kubernetes sample's three production deletes, named in the alarm line, in plan order."""
    alarms = sample("k8s-shop-scale-down.server.json").alarms
    assert "3 deletes: persistent_volume_claim, namespace, persistent_volume" in alarms


def test_many_deletes_of_one_kind_are_counted_and_many_kinds_are_cut() -> None:
    calls = [
        {"seq": seq, "tool": "delete_ticket", "effect": "delete", "args": {"id": f"t{seq}"}}
        for seq in range(1, 1_001)
    ] + [
        {"seq": 1_000 + seq, "tool": tool, "effect": "delete", "args": {}}
        for seq, tool in enumerate(("remove_user", "drop_table", "purge", "delete_[b]x[/b]"), start=1)
    ]
    alarms = plan(calls).alarms
    assert "1,004 deletes: ticket ×1,000, user, table, 2 more kinds" in alarms


def test_kinds_told_apart_only_past_what_the_alarm_shows_are_counted_as_one() -> None:
    """Each kind is clipped and made safe once, then counted: two tools differing only past the
    40 characters shown read as one kind deleted twice, never as the same words listed twice."""
    calls = [
        {"seq": seq, "tool": f"delete_{'x' * 45}{end}", "effect": "delete", "args": {}}
        for seq, end in ((1, "a"), (2, "b"))
    ]
    assert f"2 deletes: {'x' * 27}… (+19 chars) ×2" in plan(calls).alarms


def test_a_refusal_of_a_resource_an_earlier_call_writes_is_chain_noise() -> None:
    """Close t3, then delete t3: the server's dry run judged the delete against a t3 still open
    (409), but the real run closes it first, so the refusal says nothing about the real run."""
    analysis = plan(
        [
            call(
                1,
                args={"id": "t3", "status": "closed"},
                outcome=OK,
                request={"method": "PATCH", "path": "/v1/tickets/t3"},
            ),
            call(
                2,
                "delete_ticket",
                "delete",
                args={"id": "t3"},
                outcome=refused(409),
                request={"method": "DELETE", "path": "/v1/tickets/t3"},
            ),
        ]
    )
    delete = analysis.row(1)
    assert delete.verdict is Verdict.CHAIN_NOISE
    assert delete.written_before == 1 and delete.depends_on == ()
    assert (analysis.ratios.chain_noise, analysis.ratios.real_refusals) == (1, 0)
    assert "1 real refusal" not in analysis.alarms


@pytest.mark.parametrize(
    ("first_effect", "first_path"),
    [("read", "/v1/tickets/t3"), ("update", "/v1/tickets/t4")],
    ids=["an earlier read", "another resource"],
)
def test_a_refusal_no_earlier_write_explains_stays_real(first_effect: str, first_path: str) -> None:
    analysis = plan(
        [
            call(1, "get_ticket", first_effect, outcome=OK, request={"method": "GET", "path": first_path}),
            call(
                2,
                "delete_ticket",
                "delete",
                outcome=refused(409),
                request={"method": "DELETE", "path": "/v1/tickets/t3"},
            ),
        ]
    )
    assert analysis.row(1).verdict is Verdict.REAL_REFUSAL
    assert analysis.row(1).written_before is None
    assert analysis.ratios.real_refusals == 1


def test_a_later_write_does_not_explain_an_earlier_refusal() -> None:
    analysis = plan(
        [
            call(
                1,
                "delete_ticket",
                "delete",
                outcome=refused(409),
                request={"method": "DELETE", "path": "/v1/tickets/t3"},
            ),
            call(2, outcome=OK, request={"method": "PATCH", "path": "/v1/tickets/t3"}),
        ]
    )
    assert analysis.row(0).verdict is Verdict.REAL_REFUSAL
    assert analysis.ratios.real_refusals == 1


def test_a_fake_refusal_is_never_explained_by_an_earlier_write() -> None:
    analysis = plan(
        [call(1, args={"id": "t3"}, outcome=OK), call(2, args={"id": "t3"}, outcome=refused())],
        via="fake",
    )
    assert analysis.row(1).verdict is Verdict.FAKE_REFUSAL


def test_placeholders_show_their_provenance_in_the_arguments() -> None:
    row = sample("deskline-merge.server.json").row(1)
    assert row.args_summary == "id=t1, status=closed, mergedInto=⟨id from #1 create_ticket⟩"
    assert row.placeholders == (
        Placeholder(
            text="<id from call 1>", field="id", call_seq=1, source_tool="create_ticket", resolvable=True
        ),
    )  # once, although the request body repeats it
    assert row.placeholders[0].provenance() == "⟨id from #1 create_ticket⟩"


def test_fake_reference_scenario_resources_come_from_tool_and_id() -> None:
    analysis = sample("deskline-merge.fake.json")
    resources = [analysis.row(index).resource for index in range(4)]
    assert resources == ["create_ticket", "update_ticket:t1", "update_ticket:t2", "delete_ticket:t3"]


# --- placeholders ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("named", "in_seq", "seqs"),
    [(5, 2, [1, 2, 5]), (2, 2, [1, 2]), (3, 4, [1, 2, 4]), (9, 2, [1, 2])],
    ids=["later call", "itself", "missing call", "beyond the plan"],
)
def test_placeholder_naming_no_earlier_call_is_unresolved(named: int, in_seq: int, seqs: list[int]) -> None:
    calls = [call(seq, "create_ticket", "create", outcome=OK) for seq in seqs]
    calls[seqs.index(in_seq)] = call(
        in_seq, args={"mergedInto": f"<id from call {named}>"}, outcome=refused()
    )
    analysis = unchecked_plan(calls)
    row = analysis.row(seqs.index(in_seq))
    (placeholder,) = row.placeholders
    assert row.unresolved == (placeholder,)
    assert not placeholder.resolvable and placeholder.source_tool is None
    assert placeholder.provenance() == f"⟨id from #{named} — no earlier call⟩"
    assert row.depends_on == ()
    assert row.verdict is Verdict.REAL_REFUSAL, "no earlier create explains this refusal"
    assert f"mergedInto=⟨id from #{named} — no earlier call⟩" == row.args_summary
    assert analysis.ratios.unresolved_placeholders == 1
    assert "1 placeholder names no earlier call" in analysis.alarms


def test_placeholders_in_request_path_query_and_body_count() -> None:
    analysis = unchecked_plan(
        [
            call(1, "create_upload", "create", outcome=OK),
            call(2, "create_ticket", "create", outcome=OK),
            call(
                3,
                args={"note": "plain"},
                request={
                    "method": "PATCH",
                    "path": "/v1/tickets/<id from call 2>",
                    "query": {"attach": "<url from call 1>"},
                    "body": {"nested": [{"deep": "see <id from call 7> and <id from call 2>"}]},
                },
                outcome=refused(),
            ),
        ]
    )
    row = analysis.row(2)
    assert [p.text for p in row.placeholders] == ["<id from call 2>", "<url from call 1>", "<id from call 7>"]
    assert row.depends_on == (1, 2)
    assert [p.provenance() for p in row.unresolved] == ["⟨id from #7 — no earlier call⟩"]
    assert row.verdict is Verdict.CHAIN_NOISE
    assert row.resource == "/v1/tickets/<id from call 2>"


def test_placeholder_pattern_takes_ascii_digits_only() -> None:
    assert PLACEHOLDER.fullmatch("<id from call 12>")
    assert PLACEHOLDER.fullmatch("<spec.uid from call 3>")
    assert not PLACEHOLDER.fullmatch("<id from call ٣>")
    assert not PLACEHOLDER.fullmatch("<1id from call 3>")
    assert not PLACEHOLDER.fullmatch("<id from call >")


def test_placeholder_with_another_field_names_it() -> None:
    analysis = plan(
        [call(1, "create_upload", "create", outcome=OK), call(2, args={"a": "<url from call 1>"})]
    )
    assert analysis.row(1).args_summary == "a=⟨url from #1 create_upload⟩"


def test_drifting_revisions_renumber_placeholders_to_the_same_create() -> None:
    """The insertion in revision 2 renumbers `<id from call 1>` to `<id from call 2>`: still the create."""
    for name, create_seq in (("deskline-triage.rev1.json", 1), ("deskline-triage.rev2.json", 2)):
        analysis = sample(name)
        provenances = {
            placeholder.provenance()
            for index in range(len(analysis))
            for placeholder in analysis.row(index).placeholders
        }
        assert provenances == {f"⟨id from #{create_seq} create_ticket⟩"}, name
        assert analysis.ratios.depends_on_placeholders == 3


# --- verdicts, in general -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("via", "outcome", "expected"),
    [
        ("server", OK, Verdict.VALIDATED),
        ("server", refused(409), Verdict.REAL_REFUSAL),
        ("server", {"status": "error", "message": "timeout"}, Verdict.ERROR),
        ("server", None, Verdict.NO_OUTCOME),
        ("fake", OK, Verdict.NOT_VALIDATED),
        ("fake", refused(400), Verdict.FAKE_REFUSAL),
        ("fake", {"status": "error"}, Verdict.ERROR),
        ("transport", OK, Verdict.NOT_VALIDATED),
        ("transport", refused(400), Verdict.FAKE_REFUSAL),
        ("transport", None, Verdict.NO_OUTCOME),
        ("record", {"status": "recorded"}, Verdict.RECORDED),
        ("record", OK, Verdict.RECORDED),
        ("record", None, Verdict.RECORDED),
    ],
)
def test_verdict_by_who_answered(via: str, outcome: dict[str, Any] | None, expected: Verdict) -> None:
    fields: dict[str, Any] = {} if outcome is None else {"outcome": outcome}
    assert plan([call(1, args={"id": "t1"}, **fields)], via=via).row(0).verdict is expected


@pytest.mark.parametrize("writes_kept", [None, 2])
def test_a_server_ok_nothing_proved_dry_is_unproven_and_says_so(writes_kept: int | None) -> None:
    """No log of kept writes read for the dry run (or one that found kept writes): the server's ok says only
    that it accepted the call; an API that drops an unknown parameter answers ok and writes."""
    dry_run = {"via": "server", "write_requests": 2, "writes_kept": writes_kept}
    analysis = plan(
        [call(1, outcome=OK), call(2, "delete_ticket", "delete", outcome=refused(409))], dry_run=dry_run
    )
    assert [analysis.row(index).verdict for index in range(2)] == [Verdict.UNPROVEN, Verdict.REAL_REFUSAL]
    assert (analysis.ratios.validated, analysis.ratios.unproven) == (0, 1)
    unproven_alarm = "the server accepted 1 call, but nothing proved the API honoured the dry-run parameter"
    if writes_kept is None:
        assert "unproven_dry_run" in analysis.alarm_names
        assert any(alarm.startswith(unproven_alarm) for alarm in analysis.alarms)
    else:  # the kept writes' own alarm says more
        assert analysis.alarm_names[0] == "writes_kept" and "unproven_dry_run" not in analysis.alarm_names


def test_a_call_marked_destructive_counts_with_the_deletes_whatever_its_effect() -> None:
    analysis = plan([call(1, outcome=OK, destructive=True), call(2, "open_ticket", "create", outcome=OK)])
    assert analysis.row(0).destructive and not analysis.row(1).destructive
    assert (analysis.ratios.deletes, analysis.ratios.destructive) == (0, 1)
    assert analysis.ratios.destructive_percent() == "50%"
    assert analysis.extremes.first_destructive == analysis.row(0)


def test_a_server_ok_is_validated_once_the_audit_log_proved_nothing_kept() -> None:
    dry_run = {"via": "server", "write_requests": 1, "writes_kept": 0}
    analysis = plan([call(1, outcome=OK)], dry_run=dry_run)
    assert analysis.row(0).verdict is Verdict.VALIDATED and analysis.ratios.validated == 1
    assert "unproven_dry_run" not in analysis.alarm_names


SANDBOX_PROOF = {
    "url": "https://sandbox.example/v1/tickets",
    "query": {"dryRun": "All"},
    "checked_at": "2026-03-01T09:30:00Z",
}


def dry_request(query: dict[str, str]) -> dict[str, Any]:
    return {"method": "PATCH", "path": "/v1/tickets/t1", "query": query}


@pytest.mark.parametrize(
    ("query", "writes_kept", "expected"),
    [
        ({"dryRun": "All"}, None, Verdict.VALIDATED),
        ({"dryRun": "All", "force": "true"}, None, Verdict.VALIDATED),
        ({"dryRun": "None"}, None, Verdict.UNPROVEN),
        ({}, None, Verdict.UNPROVEN),
        ({"dryRun": "All"}, 1, Verdict.UNPROVEN),
    ],
)
def test_a_sandbox_check_proves_only_the_calls_carrying_its_parameter(
    query: dict[str, str], writes_kept: int | None, expected: Verdict
) -> None:
    """A sandbox check proves the parameter it sent: a call sent without it (or with another value) is
    not proven by it, and an audit log that counted kept writes outweighs it."""
    dry_run = {"via": "server", "write_requests": 1, "writes_kept": writes_kept, "sandbox": SANDBOX_PROOF}
    analysis = plan([call(1, outcome=OK, request=dry_request(query))], dry_run=dry_run)
    assert analysis.row(0).verdict is expected
    assert analysis.ratios.validated == (expected is Verdict.VALIDATED)
    assert ("unproven_dry_run" in analysis.alarm_names) == (
        expected is Verdict.UNPROVEN and writes_kept is None
    )


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("query", {}),
        ("url", "https://user:pw@sandbox.example/v1/tickets"),
        ("url", "https://sandbox.example/v1/tickets?token=abc"),
        ("url", "https://sandbox.example/v1/tickets#x"),
        ("url", "javascript:alert(1)"),
    ],
    ids=["empty query", "user info", "query", "fragment", "not http"],
)
def test_a_hand_written_sandbox_proof_that_proves_everything_or_shows_a_secret_is_refused(
    field: str, value: Any
) -> None:
    """An empty `query` would prove every call (all of nothing); a `url` is shown on screen, so one
    holding a user, password or query is refused like the check itself refuses it."""
    dry_run = {"via": "server", "write_requests": 1, "sandbox": {**SANDBOX_PROOF, field: value}}
    with pytest.raises(ProposalError, match="sandbox"):
        plan([call(1, outcome=OK, request=dry_request({}))], dry_run=dry_run)


def test_a_sandbox_proof_built_without_a_query_proves_nothing() -> None:
    """A proof made in code skips the decoder's length check: it still proves no call."""
    analysis = plan(
        [call(1, outcome=OK, request=dry_request({}))],
        dry_run={"via": "server", "write_requests": 1, "sandbox": SANDBOX_PROOF},
    )
    proof = analysis.proposal.dry_run.sandbox
    assert proof is not None
    proof.query = {}
    assert analysis.row(0).verdict is Verdict.UNPROVEN


def test_fake_refusal_of_a_call_with_a_placeholder_is_still_a_fake_refusal() -> None:
    analysis = plan(
        [
            call(1, "create_ticket", "create", outcome=OK),
            call(2, args={"m": "<id from call 1>"}, outcome=refused()),
        ],
        via="fake",
    )
    assert analysis.row(1).verdict is Verdict.FAKE_REFUSAL
    assert "1 call refused by the fake: the shape is wrong" in analysis.alarms


# --- rows -----------------------------------------------------------------------------------------


def test_rows_are_cached_and_indexed_like_a_list() -> None:
    analysis = sample("deskline-merge.server.json")
    assert analysis.row(0) is analysis.row(0)
    assert analysis.row(-1) is analysis.row(3)
    assert analysis.row(-1).index == 3
    with pytest.raises(IndexError):
        analysis.row(4)
    with pytest.raises(IndexError):
        analysis.row(-5)


class NoWholePass(list[Any]):
    """A call list that fails the test when something walks all of it."""

    def __iter__(self) -> Any:
        raise AssertionError("walked every call")


def test_constructing_and_reading_one_row_never_walks_the_plan() -> None:
    proposal = parse_proposal((SAMPLES / "billing-refunds-2000.server.json").read_bytes())
    guarded = msgspec.structs.replace(proposal, calls=NoWholePass(proposal.calls))
    analysis = Analysis(guarded)
    assert len(analysis) == 2000
    assert analysis.row(1999).seq == proposal.calls[1999].seq
    assert analysis.row(-1000).verdict is Verdict.VALIDATED


def test_args_summary_is_one_clipped_unsanitized_line() -> None:
    analysis = sample("hostile-markup.json")
    assert "[@click=app.approve]Approve[/]" in analysis.row(0).args_summary, "the app escapes, not analysis"
    long_row = analysis.row(2)
    assert len(long_row.args_summary) <= 300
    assert "chars)" in long_row.args_summary
    assert long_row.args_summary.startswith("ticket_id=t9, body=ignore previous instructions")


def test_args_summary_shows_non_string_values_as_json() -> None:
    row = plan(
        [call(1, args={"n": 5, "ok": True, "tags": ["a", "b"], "none": None, "spec": {"x": 1.5}})]
    ).row(0)
    assert row.args_summary == 'n=5, ok=true, tags=["a","b"], none=null, spec={"x":1.5}'
    assert plan([call(1)]).row(0).args_summary == ""


def test_args_summary_of_very_many_args_stays_short() -> None:
    row = plan([call(1, args={f"key{number}": number for number in range(5000)})]).row(0)
    assert len(row.args_summary) <= 300
    assert row.args_summary.startswith("key0=0, key1=1")


def test_resource_without_request_uses_an_id_like_argument() -> None:
    analysis = plan(
        [
            call(1, "refund_charge", "create", args={"amount": 5, "charge_id": "ch_1"}),
            call(2, "delete_namespace", "delete", args={"name": "preview-1182"}),
            call(3, "update_ticket", args={"name": "x", "id": "t9"}),
            call(4, "flush_cache", "other", args={"region": "eu"}),
        ]
    )
    resources = [analysis.row(index).resource for index in range(4)]
    assert resources == [
        "refund_charge:ch_1",
        "delete_namespace:preview-1182",
        "update_ticket:t9",
        "flush_cache",
    ]


# --- hidden characters ----------------------------------------------------------------------------


CLEAN_SAMPLES = sorted(
    path.name
    for path in SAMPLES.glob("*.json")
    if not path.name.startswith("hostile") and not path.name.endswith(EXECUTION_SUFFIX)
)


def test_hostile_sample_has_hidden_characters_in_every_call() -> None:
    analysis = sample("hostile-markup.json")
    assert analysis.hidden_characters
    assert all(analysis.row(index).hidden_characters for index in range(len(analysis)))
    assert "hidden characters in the text" in analysis.alarms


@pytest.mark.parametrize("name", CLEAN_SAMPLES)
def test_clean_samples_have_no_hidden_characters(name: str) -> None:
    analysis = sample(name)
    assert not analysis.hidden_characters
    assert not any(analysis.row(index).hidden_characters for index in range(min(len(analysis), 50)))
    assert "hidden characters in the text" not in analysis.alarms


def with_text(**texts: Any) -> Analysis:
    """A clean proposal with some text replaced after parsing (so it may hold what JSON cannot)."""
    proposal = parse_proposal((SAMPLES / "deskline-merge.server.json").read_bytes())
    agent = texts.pop("agent", None)
    args = texts.pop("args", None)
    if agent is not None:
        proposal = msgspec.structs.replace(
            proposal, agent=msgspec.structs.replace(proposal.agent, name=agent)
        )
    if args is not None:
        calls = list(proposal.calls)
        calls[3] = msgspec.structs.replace(calls[3], args=args)
        proposal = msgspec.structs.replace(proposal, calls=calls)
    return Analysis(msgspec.structs.replace(proposal, **texts))


@pytest.mark.parametrize(
    "changes",
    [
        {"title": "routine\u200bcleanup"},
        {"task": "tidy \u202eesrever"},
        {"agent": "agent\x1b[1A"},
        {"args": {"id\x07": "t3"}},
        {"args": {"id": "t3", "why": ["ok", {"x": "a\rb"}]}},
        {"args": {"id": "t3", "why": "\\\x1b"}},
        {"args": {"id": "t3", "why": "\U000e0041"}},
        {"args": {"id": "t3", "why": "\ud800"}},
    ],
)
def test_hidden_characters_are_found_anywhere(changes: dict[str, Any]) -> None:
    analysis = with_text(**copy.deepcopy(changes))
    assert analysis.hidden_characters
    if "args" in changes:
        assert analysis.row(3).hidden_characters and not analysis.row(2).hidden_characters


@pytest.mark.parametrize(
    "changes",
    [
        {"title": "a literal \\u001b is not an escape"},
        {"task": "C:\\new\\folder\\build\\run"},
        {"args": {"id": "t3", "why": "\\\\b and \\r and \\f"}},
        {"args": {"id": "t3", "why": "tab\tand\nnewline"}},
        {"args": {"id": "t3", "why": "café — 5 € ’quoted’ 日本語 😀"}},
    ],
)
def test_lookalikes_of_hidden_characters_are_not_flagged(changes: dict[str, Any]) -> None:
    assert not with_text(**changes).hidden_characters


JSON_TRAPS = ["\\", "\\u001b", "\\b", "\\r", "\x1b", "\b", "\r", "\f", "\t", "\n", "\u202e", "\x85"]
text_with_json_traps = st.lists(
    st.one_of(st.characters(exclude_categories=()), st.sampled_from(JSON_TRAPS))
).map("".join)


@settings(max_examples=300)
@given(text_with_json_traps)
def test_json_scan_agrees_with_the_sanitizer(text: str) -> None:
    """The fast scan of JSON text must answer exactly what `has_hidden` says of every raw string."""
    expected = has_hidden(text)
    assert value_has_hidden(text) is expected
    assert value_has_hidden({text: 1}) is expected
    assert value_has_hidden([{"k": ["x", text]}]) is expected
    assert with_text(title=text).hidden_characters is expected


# --- ratios, extremes, alarms on the samples ------------------------------------------------------


def test_refund_outlier_is_found() -> None:
    analysis = sample("billing-refunds.outlier.json")
    amounts = [
        ((call.args or {})["amount_cents"], call.seq)
        for call in analysis.proposal.calls
        if call.tool == "create_refund"
    ]
    biggest, biggest_seq = max(amounts)
    field = next(field for field in analysis.extremes.numeric if field.name == "amount_cents")
    assert analysis.extremes.numeric[0] is field, "fields with outliers come first"
    assert field.count == len(amounts) == 36
    assert (field.maximum, field.maximum_seqs) == (biggest, (biggest_seq,))
    assert field.minimum == min(amounts)[0]
    (outlier,) = field.outliers
    assert (outlier.seq, outlier.value) == (biggest_seq, biggest)
    assert 900 <= outlier.times_median <= 1100
    assert outlier.times_median == pytest.approx(biggest / field.median)


def test_kubernetes_replica_typo_and_deletes() -> None:
    analysis = sample("k8s-shop-scale-down.server.json")
    replicas = next(field for field in analysis.extremes.numeric if field.name == "replicas")
    assert [(outlier.seq, outlier.value) for outlier in replicas.outliers] == [(6, 40.0)]
    assert replicas.median == 4.0 and replicas.minimum_seqs == (4,)
    first = analysis.extremes.first_destructive
    assert first is not None and (first.seq, first.tool) == (7, "delete_persistent_volume_claim")
    assert analysis.ratios.deletes == 3 and analysis.ratios.real_refusals == 1
    assert analysis.row(8).verdict is Verdict.REAL_REFUSAL and analysis.row(8).http_status == 403
    assert analysis.alarms == (
        "1 real refusal",
        "3 deletes: persistent_volume_claim, namespace, persistent_volume",
        "1 value far outside the rest (worst: replicas of #6, 10× the median)",
    )


def test_an_outlier_is_an_alarm_and_hostile_field_names_in_it_are_escaped() -> None:
    refunds = sample("billing-refunds.outlier.json")
    assert refunds.alarms == ("1 value far outside the rest (worst: amount_cents of #25, 1,010× the median)",)
    hostile = plan(
        [call(seq, args={"amount\u202e\x1b[2J": 10_000 if seq == 5 else 10}) for seq in range(1, 7)]
    )
    (alarm,) = (alarm for alarm in hostile.alarms if "far outside" in alarm)
    assert "\u202e" not in alarm and "\x1b" not in alarm and "amount\\u202e\\x1b[2J" in alarm


def test_writes_kept_is_the_first_alarm() -> None:
    analysis = sample("crm-dedupe.writes-kept.json")
    assert analysis.ratios.writes_kept == 3
    assert analysis.alarms[0] == "dry run kept 3 writes: the API ignored the dry-run flag"


def test_large_plan_extremes() -> None:
    analysis = sample("billing-refunds-2000.server.json")
    refunds = sum(call.tool == "create_refund" for call in analysis.proposal.calls)
    extremes = analysis.extremes
    assert extremes.most_touched == ("/v1/refunds", refunds)
    assert extremes.first_destructive is None
    assert analysis.ratios.calls == 2000 and analysis.ratios.validated == 2000
    assert analysis.alarms == ()


def test_most_touched_only_when_something_is_touched_twice() -> None:
    analysis = plan([call(seq, args={"id": f"t{seq}"}) for seq in (1, 2, 3)])
    assert analysis.extremes.most_touched is None
    twice = plan([call(1, args={"id": "t1"}), call(2, args={"id": "t2"}), call(3, args={"id": "t1"})])
    assert twice.extremes.most_touched == ("update_ticket:t1", 2)


@pytest.mark.parametrize(
    ("deletes", "calls", "words"),
    [
        (0, 2000, "0%"),
        (1, 2000, "<1%"),
        (19, 2000, "<1%"),
        (20, 2000, "1%"),
        (1, 4, "25%"),
        (1999, 2000, ">99%"),
        (2000, 2000, "100%"),
        (0, 0, "–"),
    ],
)
def test_destructive_share_never_rounds_a_delete_away(deletes: int, calls: int, words: str) -> None:
    from reviewer.reading.analysis import share_percent

    assert share_percent(deletes, calls) == words


def test_every_outlier_row_is_known_not_only_the_five_listed() -> None:
    values = [10] * 20 + [100_000 + seq for seq in range(8)]
    analysis = plan([call(seq, args={"amount": value}) for seq, value in enumerate(values, start=1)])
    assert [analysis.has_outlier(index) for index in range(len(values))] == [False] * len(values), (
        "unknown until the extremes are computed"
    )
    (field,) = analysis.extremes.numeric
    assert len(field.outliers) == 5
    assert analysis.extremes.outlier_seqs == frozenset(range(21, 29))
    assert [index for index in range(len(values)) if analysis.has_outlier(index)] == list(range(20, 28))


@pytest.mark.parametrize(
    "fields",
    [
        {"tool": "d\u0435lete_ticket"},
        {"args": {"tick\u0435t": "t3"}},
        {"args": {"spec": {"r\u0435plicas": 3}}},
        {"effect": "delete", "request": {"method": "DELETE", "path": "/v1/tick\u0435ts/t3"}},
        {"args": {"note": "cafe\u0301"}},
    ],
    ids=["tool", "arg key", "nested key", "path", "not NFC"],
)
def test_lookalike_names_and_unnormalized_text_are_flagged(fields: dict[str, Any]) -> None:
    analysis = plan([call(1, "create_ticket", "create", outcome=OK), {**call(2, outcome=OK), **fields}])
    assert [analysis.row(index).lookalike for index in range(2)] == [False, True]
    assert "look-alike letters in a name, or text not in NFC" in analysis.alarms


def test_plain_text_in_another_script_is_not_a_lookalike() -> None:
    analysis = plan([call(1, args={"note": "закрыть заявку", "café": "oui"}, outcome=OK)])
    assert not analysis.row(0).lookalike
    assert analysis.alarms == ()


def test_an_unnormalized_title_is_flagged() -> None:
    analysis = plan([call(1, outcome=OK)], title="Re\u0301sume\u0301 cleanup")
    assert analysis.lookalike_text and not analysis.row(0).lookalike


def test_largest_payload_is_the_hostile_long_comment() -> None:
    analysis = sample("hostile-markup.json")
    comment = analysis.proposal.calls[2]
    assert analysis.extremes.largest_payload == (3, len(dumps(comment.args)) + len(dumps(comment.request)))


def test_alarms_come_worst_first() -> None:
    analysis = unchecked_plan(
        [
            call(1, "delete_ticket", "delete", args={"id": "t3"}, outcome=refused(409)),
            call(2, args={"id": "t1", "m": "<id from call 3>", "n": "<id from call 4>"}, outcome=OK),
            call(3, args={"id": "t2"}, outcome={"status": "error", "message": "timeout"}),
        ],
        title="hidden\u200b",
        dry_run={"via": "server", "write_requests": 3, "writes_kept": 1},
    )
    assert analysis.alarms == (
        "dry run kept 1 write: the API ignored the dry-run flag",
        "1 real refusal",
        "1 call failed in the dry run",
        "1 delete: ticket",
        "hidden characters in the text",
        "2 placeholders name no earlier call",
    )


def test_empty_plan() -> None:
    """The parser refuses a plan without calls; a proposal built in code can still have none."""
    with pytest.raises(ProposalError, match="at least one call"):
        plan([])
    built = msgspec.structs.replace(plan([call(1)]).proposal, calls=[])
    analysis = Analysis(built)
    assert len(analysis) == 0
    assert analysis.ratios.calls == 0 and analysis.ratios.destructive_share == 0.0
    assert analysis.extremes == Extremes(
        numeric=(), first_destructive=None, most_touched=None, largest_payload=None
    )
    assert analysis.alarms == ()


# --- numeric fields -------------------------------------------------------------------------------


def numeric(values: list[Any], name: str = "amount") -> NumericField:
    analysis = plan([call(seq, args={name: value}) for seq, value in enumerate(values, start=1)])
    (field,) = analysis.extremes.numeric
    return field


def test_outlier_rule_above_and_below_the_median() -> None:
    field = numeric([100, 100, 100, 100, 100_000, 1, 100, -5])
    assert field.median == 100
    assert [(outlier.seq, outlier.times_median) for outlier in field.outliers] == [
        (8, -0.05),
        (5, 1000.0),
        (6, 0.01),
    ]


def test_no_outliers_with_few_values_or_a_zero_median() -> None:
    assert numeric([1, 1, 1, 1000]).outliers == ()
    assert numeric([0, 0, 0, 5, 1000]).outliers == ()
    assert numeric([5000, 600, 9000, 4000, 4400]).outliers == (), "a tenth of the median is everyday"


def test_at_most_five_outliers_worst_first() -> None:
    field = numeric([10] * 10 + [200, 5000, 300, 100_000, 400, 1000, 0])
    assert [outlier.value for outlier in field.outliers] == [0, 100_000, 5000, 1000, 400]


def test_min_and_max_name_the_first_three_calls_holding_them() -> None:
    field = numeric([7, 3, 9, 3, 3, 3, 9])
    assert (field.minimum, field.minimum_seqs) == (3, (2, 4, 5))
    assert (field.maximum, field.maximum_seqs) == (9, (3, 7))
    assert field.count == 7


def test_numeric_fields_are_named_by_path_and_sorted() -> None:
    analysis = plan(
        [
            call(
                seq, args={"spec": {"replicas": replicas}, "lines": [{"cents": 5}, {"cents": 7}], "dry": True}
            )
            for seq, replicas in enumerate([3, 3, 3, 3, 300], start=1)
        ]
    )
    fields = {field.name: field for field in analysis.extremes.numeric}
    assert set(fields) == {"spec.replicas", "lines[].cents"}, "booleans are not numbers"
    assert [field.name for field in analysis.extremes.numeric] == ["spec.replicas", "lines[].cents"]
    assert fields["lines[].cents"].count == 10
    assert fields["lines[].cents"].minimum_seqs == (1, 2, 3)


# --- properties -----------------------------------------------------------------------------------

VIAS = ["server", "fake", "transport", "record"]
EFFECTS = ["create", "update", "delete", "read", "other"]
OUTCOMES = [None, OK, refused(), {"status": "error"}, {"status": "recorded"}]


@st.composite
def random_plans(draw: st.DrawFn) -> tuple[str, list[dict[str, Any]], int | None]:
    seqs = sorted(draw(st.sets(st.integers(1, 40), min_size=1, max_size=12)))
    calls = []
    for seq in seqs:
        named = draw(st.lists(st.integers(0, 45), max_size=3))
        args: dict[str, Any] = {
            f"ref{number}": f"<id from call {target}>" for number, target in enumerate(named)
        }
        args["amount"] = draw(st.integers(-10, 10_000))
        fields: dict[str, Any] = {"args": args}
        outcome = draw(st.sampled_from(OUTCOMES))
        if outcome is not None:
            fields["outcome"] = outcome
        if draw(st.booleans()):
            fields["request"] = {"method": "POST", "path": f"/v1/x/<id from call {draw(st.integers(0, 45))}>"}
        calls.append(call(seq, draw(st.sampled_from(["a", "b"])), draw(st.sampled_from(EFFECTS)), **fields))
    return draw(st.sampled_from(VIAS)), calls, draw(st.sampled_from([None, 0, 1]))


def expected_verdict(via: str, call: dict[str, Any], chained: bool, writes_kept: int | None) -> Verdict:
    """Section 2's table, written out again independently of the implementation."""
    outcome = call.get("outcome")
    if via == "record":
        return Verdict.RECORDED
    if outcome is None:
        return Verdict.NO_OUTCOME
    status = outcome["status"]
    if status == "error":
        return Verdict.ERROR
    if status == "recorded":
        return Verdict.RECORDED
    if via == "server":
        if status == "ok":
            return Verdict.VALIDATED if writes_kept == 0 else Verdict.UNPROVEN
        return Verdict.CHAIN_NOISE if chained else Verdict.REAL_REFUSAL
    return Verdict.NOT_VALIDATED if status == "ok" else Verdict.FAKE_REFUSAL


@settings(max_examples=200, deadline=None)
@given(random_plans())
def test_rows_and_ratios_agree_with_the_rules(
    generated: tuple[str, list[dict[str, Any]], int | None],
) -> None:
    via, calls, writes_kept = generated
    analysis = unchecked_plan(calls, via=via, dry_run={"via": via, "writes_kept": writes_kept})
    ratios = analysis.ratios
    seqs = {call["seq"] for call in calls}
    rows = [analysis.row(index) for index in range(len(analysis))]
    written: set[str] = set()
    for row, source in zip(rows, calls, strict=True):
        resource = source["request"]["path"] if "request" in source else source["tool"]
        written_earlier = resource in written
        if source["effect"] != "read":
            written.add(resource)
        named = {int(match.group(2)) for match in PLACEHOLDER.finditer(json.dumps(source.get("args")))}
        if "request" in source:
            named |= {int(PLACEHOLDER.search(source["request"]["path"]).group(2))}  # type: ignore[union-attr]
        earlier = {seq for seq in named if seq < row.seq and seq in seqs}
        assert row.depends_on == tuple(sorted(earlier))
        assert {p.call_seq for p in row.unresolved} == named - earlier
        assert row.verdict is expected_verdict(via, source, bool(earlier) or written_earlier, writes_kept)
        assert row.destructive is (source["effect"] == "delete")

    effect_counts = (ratios.creates, ratios.updates, ratios.deletes, ratios.reads, ratios.other)
    assert sum(effect_counts) == ratios.calls == len(calls)
    verdict_counts = {
        Verdict.VALIDATED: ratios.validated,
        Verdict.UNPROVEN: ratios.unproven,
        Verdict.NOT_VALIDATED: ratios.not_validated,
        Verdict.REAL_REFUSAL: ratios.real_refusals,
        Verdict.CHAIN_NOISE: ratios.chain_noise,
        Verdict.FAKE_REFUSAL: ratios.fake_refusals,
        Verdict.RECORDED: ratios.recorded,
        Verdict.ERROR: ratios.errors,
        Verdict.NO_OUTCOME: ratios.no_outcome,
    }
    assert sum(verdict_counts.values()) == ratios.calls
    for verdict, count in verdict_counts.items():
        assert count == sum(row.verdict is verdict for row in rows), verdict
    assert ratios.depends_on_placeholders == sum(bool(row.depends_on) for row in rows)
    assert ratios.unresolved_placeholders == sum(len(row.unresolved) for row in rows)
    assert ratios.resources == len({row.resource for row in rows if row.effect != "read"})
    assert 0.0 <= ratios.destructive_share <= 1.0
    if rows:
        amounts = analysis.extremes.numeric[0]
        assert amounts.count == len(rows)
        assert amounts.minimum <= amounts.median <= amounts.maximum
        assert len(amounts.outliers) <= 5


def test_analysis_of_a_proposal_built_in_python() -> None:
    """The app may hold structs it built itself; nothing requires the JSON round trip."""
    proposal = msgspec.convert(json.loads((SAMPLES / "deskline-merge.server.json").read_text()), Proposal)
    assert Analysis(proposal).row(1).verdict is Verdict.CHAIN_NOISE


def test_the_median_of_numbers_near_the_float_limit_stays_finite() -> None:
    from reviewer.reading.analysis import _median

    assert _median([1e308, 1e308]) == 1e308
    assert _median([1e308, 1e308, 1e308, 1e308, -1e308, 1e308]) == 1e308
    assert _median([3.0, 1.0, 2.0]) == 2.0


def test_numeric_fields_past_the_cap_are_counted_and_raise_an_alarm() -> None:
    """Each distinct numeric field costs memory however few numbers it holds: past the cap they are
    counted, not summarised, and the reviewer is told their outliers are not shown."""
    from reviewer.reading.analysis import MAX_NUMERIC_FIELDS

    wide = {f"k{index}": index for index in range(MAX_NUMERIC_FIELDS + 25)}
    analysis = plan([call(1, args=wide), call(2, args={"k0": 1, "other": 5})])
    extremes = analysis.extremes
    assert len(extremes.numeric) == MAX_NUMERIC_FIELDS
    assert extremes.unsummarised_fields == 26, "25 past the cap in call 1 and `other` in call 2"
    assert {field.name: field.count for field in extremes.numeric}["k0"] == 2, "known fields still count"
    assert any("26 more numeric fields than the 2,000 summarised" in alarm for alarm in analysis.alarms)


@given(
    st.lists(
        st.one_of(st.integers(-5, 5).map(float), st.floats(-1e308, 1e308, allow_nan=False)),
        min_size=2,
        max_size=300,
    ),
    st.integers(2, 64),
)
@settings(max_examples=400, deadline=None)
def test_the_median_without_a_sorted_copy_is_the_sorted_median(
    numbers: list[float], sample_size: int
) -> None:
    """Above SORTED_MEDIAN_MAX numbers the median keeps only those near the middle: it must be the
    same number, duplicates, skewed samples and values near the float limit included."""
    from array import array

    from reviewer.reading.analysis import _median

    held = array("d", numbers)
    assert _median(held, sorted_up_to=0, sample_size=sample_size) == _median(numbers)


def test_the_parser_refuses_a_placeholder_naming_no_earlier_call() -> None:
    """What the rows flag while the app checks, the check refuses: the queue never stores such a plan."""
    with pytest.raises(ProposalError, match=r"\$.calls\[1\]: <id from call 5> names no earlier call"):
        plan([call(1, outcome=OK), call(2, args={"mergedInto": "<id from call 5>"})])
