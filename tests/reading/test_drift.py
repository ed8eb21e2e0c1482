"""Drift between revisions and verification of a real run: unit tests and properties that can fail."""

from __future__ import annotations

import copy
import dataclasses
import json
import random
import re
from collections.abc import Callable
from operator import attrgetter
from typing import Any

import msgspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from reviewer.plan import proposal as proposal_module
from reviewer.plan.proposal import Call, CallList, Outcome, Proposal, parse_proposal
from reviewer.reading.drift import MAX_EDITS_FOR_MYERS, ChangedCall, Drift, diff_revisions
from reviewer.reading.verification import compare_execution
from reviewer.sample_api.bulk_plans import bulk_refund_plan, replan
from tests.builders import proposal_document

PLACEHOLDER = re.compile(r"<([A-Za-z_][A-Za-z0-9_.-]*) from call (\d+)>")


def proposal(calls: list[dict[str, Any]], *, revision: int = 1, **fields: Any) -> Proposal:
    """A proposal around `calls` (seq given or numbered from 1)."""
    fields.setdefault("target", {"api": "deskline", "environment": "staging"})
    return msgspec.convert(
        proposal_document(calls, proposal_id="drift-test", revision=revision, **fields), Proposal
    )


# ------------------------------------------------------------------------------------------------
# The forms a proposal reaches drift in: built in code (a list of structs), or parsed from JSON (a
# CallList, compared through its text) as a writer wrote it. Drift must not depend on which.

Form = Callable[[Proposal], Proposal]


def built(plan: Proposal) -> Proposal:
    return plan


def parsing(write: Callable[[Proposal], bytes | str]) -> Form:
    """A form that writes the plan as JSON one way and parses it back, as the app holds a proposal an
    agent sent. The parser refuses a plan without calls; one built in code still diffs, so it stays."""

    def form(plan: Proposal) -> Proposal:
        return parse_proposal(write(plan)) if plan.calls else plan

    return form


parsed = parsing(msgspec.json.encode)
"""msgspec's JSON, compact, each call's seq first."""
parsed_indented = parsing(lambda plan: json.dumps(msgspec.to_builtins(plan), indent=2))
"""Python's json.dumps, indented: `{\\n  "seq": 1,\\n  "tool": ...`, non-ASCII escaped."""
parsed_sorted = parsing(lambda plan: json.dumps(msgspec.to_builtins(plan), sort_keys=True))
"""Keys sorted, so seq is among the others, not first, with spaces after separators."""


FORMS: dict[str, Form] = {
    "built": built,
    "parsed": parsed,
    "parsed-indented": parsed_indented,
    "parsed-sorted": parsed_sorted,
}
each_form = pytest.mark.parametrize("form", FORMS.values(), ids=list(FORMS))


def renumbered(calls: list[dict[str, Any]], shift_from: int, by: int) -> list[dict[str, Any]]:
    """Seqs 1..n again, and every placeholder naming seq >= shift_from moved by `by`: a re-plan."""

    def shift(value: Any) -> Any:
        if isinstance(value, str):
            return PLACEHOLDER.sub(
                lambda m: (
                    m.group(0)
                    if int(m.group(2)) < shift_from
                    else f"<{m.group(1)} from call {int(m.group(2)) + by}>"
                ),
                value,
            )
        if isinstance(value, dict):
            return {key: shift(item) for key, item in value.items()}
        if isinstance(value, list):
            return [shift(item) for item in value]
        return value

    rows = []
    for position, call in enumerate(calls, start=1):
        row = shift({key: item for key, item in call.items() if key != "seq"})
        row["seq"] = position
        rows.append(row)
    return rows


def ticket_calls() -> list[dict[str, Any]]:
    """The reference plan, as the server dry run records it."""
    return [
        {
            "tool": "create_ticket",
            "effect": "create",
            "args": {"title": "Printer on fire"},
            "request": {
                "method": "POST",
                "path": "/v1/tickets",
                "query": {"dryRun": "All"},
                "body": {"title": "Printer on fire"},
            },
            "outcome": {"status": "ok", "http_status": 201, "result": {"id": "tk-4"}},
        },
        *(
            {
                "tool": "update_ticket",
                "effect": "update",
                "args": {"id": ticket, "status": "closed", "mergedInto": "<id from call 1>"},
                "request": {
                    "method": "PATCH",
                    "path": f"/v1/tickets/{ticket}",
                    "query": {"dryRun": "All"},
                    "body": {"status": "closed", "mergedInto": "<id from call 1>"},
                },
                "outcome": {
                    "status": "refused",
                    "http_status": 422,
                    "message": "mergedInto names no ticket: tk-4",
                },
            }
            for ticket in ("t1", "t2")
        ),
        {
            "tool": "delete_ticket",
            "effect": "delete",
            "args": {"id": "t3"},
            "request": {"method": "DELETE", "path": "/v1/tickets/t3", "query": {"dryRun": "All"}},
            "outcome": {
                "status": "refused",
                "http_status": 409,
                "message": "close the ticket before deleting it",
            },
        },
    ]


# ------------------------------------------------------------------------------------------------
# Unit tests


@each_form
def test_a_plan_against_itself_has_no_drift(form: Form) -> None:
    plan = form(proposal(ticket_calls()))
    drift = diff_revisions(plan, plan)
    assert drift.is_empty and drift.summary == "no drift"
    assert drift.unchanged == 4
    assert [drift.status_of_new(index) for index in range(4)] == ["unchanged"] * 4


@each_form
def test_an_inserted_call_is_one_addition_not_a_renumbering(form: Form) -> None:
    calls = ticket_calls()
    inserted = copy.deepcopy(calls[0])
    inserted["args"] = {"title": "Second printer on fire"}
    inserted["request"]["body"] = inserted["args"]
    new_calls = renumbered([inserted, *calls], shift_from=1, by=1)
    drift = diff_revisions(form(proposal(calls)), form(proposal(new_calls, revision=2)))
    assert drift.summary == "1 added"
    assert drift.added == (0,) and drift.unchanged == 4
    assert drift.status_of_new(0) == "added"
    assert [drift.status_of_new(index) for index in range(1, 5)] == ["unchanged"] * 4


@each_form
def test_a_placeholder_that_keeps_its_number_but_names_another_call_is_drift(form: Form) -> None:
    """An insertion before call 1 without renumbering the placeholders: the merges now go elsewhere."""
    calls = ticket_calls()
    inserted = copy.deepcopy(calls[0])
    inserted["args"] = {"title": "Decoy"}
    inserted["request"]["body"] = inserted["args"]
    new_calls = [inserted, *copy.deepcopy(calls)]
    for position, row in enumerate(new_calls, start=1):
        row["seq"] = position
    drift = diff_revisions(form(proposal(calls)), form(proposal(new_calls, revision=2)))
    assert drift.added == (0,)
    assert [pair.new_index for pair in drift.changed] == [2, 3]
    paths = {change.path for change in drift.changed[0].fields}
    assert paths == {"args.mergedInto", "request.body.mergedInto"}
    assert all(change.note == "the placeholder names another call" for change in drift.changed[0].fields)


@each_form
def test_one_changed_argument_is_exactly_that_field(form: Form) -> None:
    plan = bulk_refund_plan(50)
    changed = copy.deepcopy(plan)
    changed["calls"][20]["args"]["amount_cents"] = 123_456
    drift = diff_revisions(form(msgspec.convert(plan, Proposal)), form(msgspec.convert(changed, Proposal)))
    assert drift.summary == "1 changed"
    (pair,) = drift.changed
    assert (pair.old_index, pair.new_index, pair.old_seq, pair.new_seq) == (20, 20, 21, 21)
    assert [(change.path, change.new) for change in pair.fields] == [
        ("args.amount_cents", 123_456),
        ("request.body.amount_cents", 123_456),
    ]
    assert drift.status_of_new(20) == "changed" and drift.pair_of_new(20) is pair


@each_form
def test_true_in_place_of_one_is_drift_but_one_point_zero_is_not(form: Form) -> None:
    """Python holds `True == 1`; JSON does not: a flag turned from 1 to true changes what executes,
    while 1 and 1.0 are one JSON number."""
    plan = bulk_refund_plan(12)
    flagged, refloated = copy.deepcopy(plan), copy.deepcopy(plan)
    plan["calls"][5]["args"]["notify"] = 1
    flagged["calls"][5]["args"]["notify"] = True
    refloated["calls"][5]["args"]["notify"] = 1.0
    base = form(msgspec.convert(plan, Proposal))
    drift = diff_revisions(base, form(msgspec.convert(flagged, Proposal)))
    (pair,) = drift.changed
    assert [(change.path, change.old, change.new) for change in pair.fields] == [
        ("args.notify", 1, True),
        ("request.body.notify", 1, True),
    ]
    assert diff_revisions(base, form(msgspec.convert(refloated, Proposal))).is_empty


@each_form
def test_a_changed_effect_and_path_are_named(form: Form) -> None:
    calls = ticket_calls()
    new_calls = copy.deepcopy(calls)
    new_calls[3]["args"]["id"] = "t9"
    new_calls[3]["request"]["path"] = "/v1/tickets/t9"
    new_calls[2]["effect"] = "delete"
    drift = diff_revisions(form(proposal(calls)), form(proposal(new_calls)))
    assert [[change.path for change in pair.fields] for pair in drift.changed] == [
        ["effect"],
        ["args.id", "request.path"],
    ]


@each_form
def test_outcome_only_changes_are_reported_apart(form: Form) -> None:
    calls = ticket_calls()
    new_calls = copy.deepcopy(calls)
    new_calls[1]["outcome"] = {"status": "ok", "http_status": 200}
    drift = diff_revisions(form(proposal(calls)), form(proposal(new_calls)))
    assert drift.is_empty and not drift.changed
    assert drift.summary == "no drift (1 dry-run outcome changed)"
    (pair,) = drift.outcome_changed
    assert pair.fields == ()
    assert {change.path for change in pair.outcome_fields} == {
        "outcome.status",
        "outcome.http_status",
        "outcome.message",
    }
    assert drift.status_of_new(1) == "unchanged" and drift.pair_of_new(1) is pair


@each_form
def test_target_changes_are_drift(form: Form) -> None:
    calls = ticket_calls()
    drift = diff_revisions(
        form(proposal(calls)),
        form(proposal(calls, target={"api": "deskline", "environment": "production"})),
    )
    assert [(c.path, c.old, c.new) for c in drift.target_changed] == [
        ("target.environment", "staging", "production")
    ]
    assert drift.summary == "target changed" and not drift.is_empty


@each_form
def test_removed_calls_are_listed_where_they_stood(form: Form) -> None:
    calls = ticket_calls()
    new_calls = renumbered([calls[0], calls[1], calls[3]], shift_from=4, by=-1)
    old = form(proposal(calls))
    drift = diff_revisions(old, form(proposal(new_calls)))
    assert drift.summary == "1 removed"
    assert drift.removed == (2,) and drift.removed_positions == (2,)
    assert [call.args for _, call in drift.removed_calls(old)] == [calls[2]["args"]]


@each_form
def test_one_inserted_changed_and_removed_in_a_large_plan(form: Form) -> None:
    plan = bulk_refund_plan(5_000)
    rows = copy.deepcopy(plan["calls"])
    extra = copy.deepcopy(rows[100])
    extra["args"]["customer"] = "cus-new"
    rows.insert(100, extra)
    rows[2_501]["args"]["amount_cents"] = 1
    del rows[4_000]
    second = dict(plan, calls=renumbered(rows, shift_from=1, by=0))
    drift = diff_revisions(form(msgspec.convert(plan, Proposal)), form(msgspec.convert(second, Proposal)))
    assert drift.summary == "1 added, 1 removed, 1 changed"
    assert drift.added == (100,) and drift.removed == (3_999,)
    assert [(p.old_index, p.new_index) for p in drift.changed] == [(2_500, 2_501)]
    assert drift.unchanged == 4_998


@each_form
def test_a_heavily_rewritten_plan_is_anchored_and_stays_consistent(form: Form) -> None:
    """More edits than Myers is allowed: anchors on unique calls align instead; the counts add up."""
    plan = bulk_refund_plan(2_000)
    rows = copy.deepcopy(plan["calls"])
    for row in rows[::5]:
        row["args"]["amount_cents"] += 1
    assert len(rows[::5]) * 2 > MAX_EDITS_FOR_MYERS
    second = dict(plan, calls=rows)
    drift = diff_revisions(form(msgspec.convert(plan, Proposal)), form(msgspec.convert(second, Proposal)))
    assert drift.summary == "400 changed"
    assert {tuple(c.path for c in pair.fields) for pair in drift.changed} == {
        ("args.amount_cents", "request.body.amount_cents")
    }


def scattered_rewrite(
    calls: int, changes: int, *, seed: int = 5
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """A plan, its rewrite, and what drift must find: `changes` amounts changed at random calls,
    a tenth as many outcomes changed at others, three calls inserted and three removed (every seq
    renumbered). No edit touches a neighbour of another, where which of two alike calls changed
    would be a guess. Expected indexes are positions in the old and new plans."""
    plan = bulk_refund_plan(calls)
    rng = random.Random(seed)
    removed: set[int] = set()
    inserted_before: set[int] = set()
    for chosen in (removed, inserted_before):
        while len(chosen) < 3:
            at = rng.randrange(2, calls - 2)
            if not {at - 2, at - 1, at, at + 1, at + 2} & (removed | inserted_before):
                chosen.add(at)
    near_an_edit = {at + offset for at in removed | inserted_before for offset in (-1, 0, 1)}
    touched = rng.sample(sorted(set(range(calls)) - near_an_edit), changes + changes // 10)
    changed, outcome_only = sorted(touched[:changes]), sorted(touched[changes:])
    rows = copy.deepcopy(plan["calls"])
    for index in changed:
        rows[index]["args"] = dict(rows[index]["args"], amount_cents=7, note="rewritten")
        rows[index]["request"]["body"] = rows[index]["args"]
    for index in outcome_only:
        rows[index]["outcome"] = {"status": "refused", "http_status": 409}
    new_rows: list[dict[str, Any]] = []
    added: list[int] = []
    new_index_of: dict[int, int] = {}
    for index, row in enumerate(rows):
        if index in inserted_before:
            extra = copy.deepcopy(row)
            extra["args"] = dict(extra["args"], customer=f"cus-inserted-{index}")
            extra["request"]["body"] = extra["args"]
            added.append(len(new_rows))
            new_rows.append(extra)
        if index not in removed:
            new_index_of[index] = len(new_rows)
            new_rows.append(row)
    second = dict(plan, revision=2, calls=renumbered(new_rows, shift_from=1, by=0))
    expected: dict[str, Any] = {
        "added": tuple(added),
        "removed": tuple(sorted(removed)),
        "changed": [(index, new_index_of[index]) for index in changed],
        "outcome_changed": [(index, new_index_of[index]) for index in outcome_only],
    }
    return plan, second, expected


@each_form
def test_scattered_changes_through_a_large_plan_are_exactly_those_changes(form: Form) -> None:
    """600 changes spread through 5,000 calls, with outcome-only changes, insertions and removals:
    the anchored alignment finds each edit and nothing else, both ways, mirrored."""
    plan, second, expected = scattered_rewrite(5_000, 600)
    old, new = form(msgspec.convert(plan, Proposal)), form(msgspec.convert(second, Proposal))
    drift = diff_revisions(old, new)
    assert drift.summary == "3 added, 3 removed, 600 changed (60 dry-run outcomes changed)"
    assert drift.added == expected["added"] and drift.removed == expected["removed"]
    assert [(pair.old_index, pair.new_index) for pair in drift.changed] == expected["changed"]
    assert {frozenset(change.path for change in pair.fields) for pair in drift.changed} == {
        frozenset({"args.amount_cents", "args.note", "request.body.amount_cents", "request.body.note"})
    }
    assert [(pair.old_index, pair.new_index) for pair in drift.outcome_changed] == expected["outcome_changed"]
    assert all(pair.fields == () for pair in drift.outcome_changed)
    assert drift.unchanged == 5_000 - 3 - 600 - 60
    backward = diff_revisions(new, old)
    assert (backward.added, backward.removed) == (drift.removed, drift.added)
    assert [(pair.new_index, pair.old_index) for pair in backward.changed] == expected["changed"]
    assert diff_revisions(new, new).is_empty


@each_form
def test_a_heavy_rewrite_after_an_insertion_is_not_a_renumbering(form: Form) -> None:
    """Every placeholder renumbered by an insertion at the top, and 150 merges retargeted: one
    addition and exactly those 150 changes."""
    calls: list[dict[str, Any]] = []
    for number in range(400):
        create = copy.deepcopy(ticket_calls()[0])
        create["args"] = {"title": f"Printer {number} on fire"}
        create["request"]["body"] = create["args"]
        update = copy.deepcopy(ticket_calls()[1])
        update["args"]["id"] = f"t{number}"
        update["args"]["mergedInto"] = f"<id from call {2 * number + 1}>"
        update["request"]["path"] = f"/v1/tickets/t{number}"
        update["request"]["body"] = {"status": "closed", "mergedInto": update["args"]["mergedInto"]}
        calls += [create, update]
    rows = copy.deepcopy(calls)
    retargeted = list(range(1, 800, 16)) + list(range(9, 800, 16)) + list(range(5, 800, 16))
    for index in retargeted:
        rows[index]["args"]["status"] = "open"
    inserted = {"tool": "notify", "effect": "other", "args": {"text": "re-plan"}}
    new_calls = renumbered([inserted, *rows], shift_from=1, by=1)
    drift = diff_revisions(form(proposal(calls)), form(proposal(new_calls, revision=2)))
    assert drift.summary == "1 added, 150 changed"
    assert drift.added == (0,)
    assert [(pair.old_index, pair.new_index) for pair in drift.changed] == [
        (index, index + 1) for index in sorted(retargeted)
    ]
    assert {tuple(change.path for change in pair.fields) for pair in drift.changed} == {("args.status",)}


@each_form
def test_a_heavy_rewrite_of_identical_calls_still_adds_up(form: Form) -> None:
    """No call is unique, so nothing anchors: the worst case, paired by what the calls touch."""
    call: dict[str, Any] = {"tool": "refund", "effect": "create", "args": {"amount_cents": 1}}
    calls = [copy.deepcopy(call) for _ in range(3_000)]
    rows = copy.deepcopy(calls)
    for row in rows[3::6]:
        row["args"]["amount_cents"] = 2
    drift = diff_revisions(form(proposal(calls)), form(proposal(rows, revision=2)))
    assert drift.summary == "500 changed"
    assert [pair.new_index for pair in drift.changed] == list(range(3, 3_000, 6))


# ------------------------------------------------------------------------------------------------
# Properties

TICKETS = st.sampled_from(["t1", "t2", "t3", "t4"])


@st.composite
def plans(draw: st.DrawFn, min_size: int = 0) -> list[dict[str, Any]]:
    """Small plans with repeated tools and resources, and placeholders naming earlier calls."""
    size = draw(st.integers(min_size, 12))
    rows: list[dict[str, Any]] = []
    for position in range(size):
        kind = draw(st.sampled_from(["create", "update", "delete", "refund"]))
        row: dict[str, Any]
        if kind == "create":
            row = {
                "tool": "create_ticket",
                "effect": "create",
                "args": {"title": draw(st.sampled_from("ab"))},
            }
        elif kind == "update":
            args: dict[str, Any] = {"id": draw(TICKETS), "status": draw(st.sampled_from(["open", "closed"]))}
            creates = [seq for seq, earlier in enumerate(rows, start=1) if earlier["effect"] == "create"]
            merged = bool(creates) and draw(st.booleans())
            if merged:
                args["mergedInto"] = f"<id from call {draw(st.sampled_from(creates))}>"
            row = {"tool": "update_ticket", "effect": "update", "args": args}
        elif kind == "delete":
            row = {"tool": "delete_ticket", "effect": "delete", "args": {"id": draw(TICKETS)}}
        else:
            row = {"tool": "refund", "effect": "create", "args": {"amount_cents": draw(st.integers(1, 3))}}
        if draw(st.booleans()):
            row["outcome"] = {"status": draw(st.sampled_from(["ok", "refused"]))}
        row["seq"] = position + 1
        rows.append(row)
    return rows


FAST = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
"""60 examples for each of the 8 forms and alignments: about 500 plans per property in a run."""

each_alignment = pytest.mark.parametrize("myers_limit", [MAX_EDITS_FOR_MYERS, 0], ids=["myers", "anchored"])
"""Each property holds whether Myers aligns the revisions or, allowed no edit, leaves every revision
that differs to the anchors on unique calls and the pairing of what lies between them."""


@each_alignment
@each_form
@FAST
@given(plans())
def test_property_a_plan_against_itself_has_no_drift(
    myers_limit: int, form: Form, calls: list[dict[str, Any]]
) -> None:
    plan = form(proposal(calls))
    drift = diff_revisions(plan, form(proposal(copy.deepcopy(calls))), max_edits_for_myers=myers_limit)
    assert drift.is_empty and not drift.outcome_changed and drift.unchanged == len(calls)


@each_alignment
@each_form
@FAST
@given(plans(), st.data())
def test_property_one_inserted_call_anywhere_is_exactly_one_addition(
    myers_limit: int, form: Form, calls: list[dict[str, Any]], data: st.DataObject
) -> None:
    """Even when later placeholders name calls past the insertion and are renumbered for it."""
    at = data.draw(st.integers(0, len(calls)))
    inserted = {"tool": "notify", "effect": "other", "args": {"text": "unique"}}
    new_calls = renumbered([*calls[:at], inserted, *calls[at:]], shift_from=at + 1, by=1)
    drift = diff_revisions(
        form(proposal(calls)), form(proposal(new_calls, revision=2)), max_edits_for_myers=myers_limit
    )
    assert drift.added == (at,)
    assert (drift.removed, drift.changed, drift.outcome_changed) == ((), (), ())
    assert drift.unchanged == len(calls)


@each_alignment
@each_form
@FAST
@given(plans(min_size=1), st.data())
def test_property_one_changed_argument_is_exactly_that_field(
    myers_limit: int, form: Form, calls: list[dict[str, Any]], data: st.DataObject
) -> None:
    at = data.draw(st.integers(0, len(calls) - 1))
    new_calls = copy.deepcopy(calls)
    new_calls[at]["args"]["changed_note"] = "added by the re-plan"
    drift = diff_revisions(form(proposal(calls)), form(proposal(new_calls)), max_edits_for_myers=myers_limit)
    assert drift.summary == "1 changed"
    (pair,) = drift.changed
    assert (pair.old_index, pair.new_index) == (at, at)
    assert [change.path for change in pair.fields] == ["args.changed_note"]


@each_alignment
@each_form
@FAST
@given(plans(), plans())
def test_property_drift_a_to_b_mirrors_b_to_a(
    myers_limit: int, form: Form, a: list[dict[str, Any]], b: list[dict[str, Any]]
) -> None:
    forward = diff_revisions(form(proposal(a)), form(proposal(b)), max_edits_for_myers=myers_limit)
    backward = diff_revisions(form(proposal(b)), form(proposal(a)), max_edits_for_myers=myers_limit)
    assert forward.added == backward.removed and forward.removed == backward.added
    assert forward.unchanged == backward.unchanged
    for mine, theirs in (
        (forward.changed, backward.changed),
        (forward.outcome_changed, backward.outcome_changed),
    ):
        assert sorted((p.old_index, p.new_index) for p in mine) == sorted(
            (p.new_index, p.old_index) for p in theirs
        )
        by_pair = {(p.new_index, p.old_index): p for p in theirs}
        for pair in mine:
            other = by_pair[(pair.old_index, pair.new_index)]
            assert [(c.path, c.old, c.new) for c in pair.fields] == [
                (c.path, c.new, c.old) for c in other.fields
            ]


@each_alignment
@each_form
@FAST
@given(plans(), plans())
def test_property_every_call_is_accounted_for_once(
    myers_limit: int, form: Form, a: list[dict[str, Any]], b: list[dict[str, Any]]
) -> None:
    drift = diff_revisions(form(proposal(a)), form(proposal(b)), max_edits_for_myers=myers_limit)
    paired = len(drift.changed) + len(drift.outcome_changed) + drift.unchanged
    assert paired + len(drift.removed) == len(a)
    assert paired + len(drift.added) == len(b)
    new_indexes = [*drift.added, *(p.new_index for p in (*drift.changed, *drift.outcome_changed))]
    assert len(set(new_indexes)) == len(new_indexes)
    assert all(0 <= index <= len(b) for index in drift.removed_positions)


@each_alignment
@each_form
@FAST
@given(plans(), st.integers(0, 12), st.integers(1, 3))
def test_property_placeholder_renumbering_is_not_drift(
    myers_limit: int, form: Form, calls: list[dict[str, Any]], shift_from: int, by: int
) -> None:
    """Seqs with gaps (another numbering of the same calls), placeholders following: no drift."""
    new_calls = renumbered(calls, shift_from=shift_from + 1, by=by)
    for row in new_calls:
        if row["seq"] > shift_from:
            row["seq"] += by
    drift = diff_revisions(form(proposal(calls)), form(proposal(new_calls)), max_edits_for_myers=myers_limit)
    assert drift.is_empty and not drift.outcome_changed and drift.unchanged == len(calls)


# ------------------------------------------------------------------------------------------------
# Parsed proposals: aligned through their JSON, with the same results as built ones


@each_alignment
@FAST
@given(plans(), plans(), st.sampled_from(list(FORMS)), st.sampled_from(list(FORMS)))
def test_property_drift_does_not_depend_on_the_form_or_the_writer(
    myers_limit: int, a: list[dict[str, Any]], b: list[dict[str, Any]], form_a: str, form_b: str
) -> None:
    """Parsed or built, written compactly, indented, or with keys sorted, one of each on either
    side: the same drift as between the built plans (fields listed in the writer's key order)."""
    expected = diff_revisions(proposal(a), proposal(b), max_edits_for_myers=myers_limit)
    drift = diff_revisions(
        FORMS[form_a](proposal(a)), FORMS[form_b](proposal(b)), max_edits_for_myers=myers_limit
    )
    assert in_path_order(drift) == in_path_order(expected)


def in_path_order(drift: Drift) -> Drift:
    def pair(changed: ChangedCall) -> ChangedCall:
        return dataclasses.replace(
            changed,
            fields=tuple(sorted(changed.fields, key=attrgetter("path"))),
            outcome_fields=tuple(sorted(changed.outcome_fields, key=attrgetter("path"))),
        )

    return dataclasses.replace(
        drift,
        changed=tuple(map(pair, drift.changed)),
        outcome_changed=tuple(map(pair, drift.outcome_changed)),
    )


@FAST
@given(plans(), st.sampled_from(list(FORMS)[1:]), st.sampled_from(list(FORMS)[1:]))
def test_property_the_same_calls_written_otherwise_are_no_drift(
    calls: list[dict[str, Any]], form_a: str, form_b: str
) -> None:
    """Whitespace and key order are not content: every call aligns, decoded where its text differs."""
    drift = diff_revisions(FORMS[form_a](proposal(calls)), FORMS[form_b](proposal(copy.deepcopy(calls))))
    assert drift.is_empty and not drift.outcome_changed and drift.unchanged == len(calls)


def escaped(plan: Proposal) -> Proposal:
    """The plan parsed from JSON that spells every `<` and space of a placeholder as a \\u escape."""
    text = msgspec.json.encode(plan).decode()
    text = PLACEHOLDER.sub(lambda m: m.group(0).replace("<", "\\u003c").replace(" ", "\\u0020"), text)
    return parse_proposal(text)


@pytest.mark.parametrize("old_form", [parsed, escaped], ids=["plain", "escaped"])
def test_a_placeholder_spelled_with_escapes_still_names_its_call(old_form: Form) -> None:
    """A call whose placeholder keeps its number while another call took that number is drift,
    however the JSON spells the placeholder (the text search must not miss `\\u003cid...`)."""
    calls = ticket_calls()
    inserted = copy.deepcopy(calls[0])
    inserted["args"] = {"title": "Decoy"}
    inserted["request"]["body"] = inserted["args"]
    new_calls = [inserted, *copy.deepcopy(calls)]
    for position, row in enumerate(new_calls, start=1):
        row["seq"] = position
    old, new = proposal(calls), proposal(new_calls, revision=2)
    written = escaped(old).calls
    assert isinstance(written, CallList)
    assert b"\\u003cid\\u0020from\\u0020call" in bytes(written.raw(1))
    drift = diff_revisions(old_form(old), escaped(new))
    assert drift == diff_revisions(old, new)
    assert [pair.new_index for pair in drift.changed] == [2, 3]


class CountingDecoder:
    """Stands in for the call decoder of `reviewer.plan.proposal`, counting the calls it decodes."""

    def __init__(self, decoder: msgspec.json.Decoder[Call]) -> None:
        self.decoder = decoder
        self.decoded = 0

    def decode(self, data: bytes) -> Call:
        self.decoded += 1
        return self.decoder.decode(data)


@pytest.mark.parametrize("write", [msgspec.json.encode, lambda plan: json.dumps(plan, indent=2)])
@pytest.mark.parametrize("edit", ["one changed", "inserted, changed, removed, renumbered"])
def test_large_parsed_revisions_are_aligned_without_decoding_their_calls(
    edit: str, write: Callable[[Any], bytes | str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """20,000 calls on each side, written compactly or indented: only the calls around an edit
    (and a few seqs) are decoded."""
    plan = bulk_refund_plan(20_000)
    if edit == "one changed":
        second = copy.deepcopy(plan)
        second["calls"][12_345]["args"]["amount_cents"] = 1
        summary = "1 changed"
    else:
        second = replan(plan)
        summary = "1 added, 1 removed, 1 changed"
    old, new = parse_proposal(write(plan)), parse_proposal(write(second))
    assert isinstance(old.calls, CallList) and isinstance(new.calls, CallList)
    counter = CountingDecoder(proposal_module._call_decoder)
    monkeypatch.setattr(proposal_module, "_call_decoder", counter)
    drift = diff_revisions(old, new)
    assert drift.summary == summary and drift.unchanged == 19_998 + (edit == "one changed")
    assert counter.decoded < 100, f"{counter.decoded:,} calls decoded"


# ------------------------------------------------------------------------------------------------
# Verification of a real run (the reference scenario)


def real_calls() -> list[Call]:
    """What the real run did: create answered tk-4, both merges ok, the delete refused with 409."""
    rows = [
        {
            "tool": "create_ticket",
            "effect": "create",
            "args": {"title": "Printer on fire"},
            "request": {"method": "POST", "path": "/v1/tickets", "body": {"title": "Printer on fire"}},
            "outcome": {"status": "ok", "http_status": 201, "result": {"id": "tk-4"}},
        },
        *(
            {
                "tool": "update_ticket",
                "effect": "update",
                "args": {"id": ticket, "status": "closed", "mergedInto": "tk-4"},
                "request": {
                    "method": "PATCH",
                    "path": f"/v1/tickets/{ticket}",
                    "body": {"status": "closed", "mergedInto": "tk-4"},
                },
                "outcome": {"status": "ok", "http_status": 200, "result": {"id": ticket}},
            }
            for ticket in ("t1", "t2")
        ),
        {
            "tool": "delete_ticket",
            "effect": "delete",
            "args": {"id": "t3"},
            "request": {"method": "DELETE", "path": "/v1/tickets/t3"},
            "outcome": {
                "status": "refused",
                "http_status": 409,
                "message": "close the ticket before deleting it",
            },
        },
    ]
    return [msgspec.convert(dict(row, seq=seq), Call) for seq, row in enumerate(rows, start=1)]


def test_reference_scenario_naive_one_of_four_resolved_three_of_four_delete_refused() -> None:
    verification = compare_execution(proposal(ticket_calls()), real_calls())
    assert verification.naive_identical == 1
    assert verification.matching_once_resolved == 3
    assert [check.status for check in verification.checks] == [
        "same",
        "same once placeholders resolve",
        "same once placeholders resolve",
        "refused",
    ]
    resolved = verification.checks[1].fields
    assert [(c.path, c.new) for c in resolved] == [("<id from call 1>", "tk-4")] * len(resolved)
    assert verification.checks[3].http_status == 409
    assert verification.not_executed == ()
    assert verification.summary.startswith(
        "naive: 1 of 4 identical; placeholders resolved: 3 of 4 match; refused: 1"
    )


def test_verification_names_a_different_field_and_a_call_not_in_the_plan() -> None:
    real = real_calls()
    real[1] = msgspec.structs.replace(real[1], args={**(real[1].args or {}), "status": "open"})
    stray = msgspec.convert(
        {"seq": 9, "tool": "delete_customer", "effect": "delete", "args": {"id": "c1"}}, Call
    )
    verification = compare_execution(proposal(ticket_calls()), [*real[:2], stray])
    assert [check.status for check in verification.checks] == ["same", "different", "not in the plan"]
    assert [change.path for change in verification.checks[1].fields] == ["args.status"]
    assert verification.not_executed == (2, 3)
    assert verification.matching_once_resolved == 1


@pytest.mark.parametrize(
    "outcome", [{"status": "error", "http_status": 500}, {"status": "error"}, {"status": "recorded"}, None]
)
def test_a_real_call_that_failed_is_not_counted_as_a_match(outcome: dict[str, Any] | None) -> None:
    """A 5xx, an error, a call only recorded, or one reported without any answer: not a match."""
    real = real_calls()
    answer = None if outcome is None else msgspec.convert(outcome, Outcome)
    real[1] = msgspec.structs.replace(real[1], outcome=answer)
    verification = compare_execution(proposal(ticket_calls()), real)
    assert [check.status for check in verification.checks] == [
        "same",
        "refused",
        "same once placeholders resolve",
        "refused",
    ]
    assert (verification.naive_identical, verification.matching_once_resolved) == (1, 2)


def test_a_real_call_sent_and_never_answered_is_unknown_not_refused() -> None:
    """The API may have performed it: the screen must not say it failed, nor count it a match."""
    real = real_calls()
    unknown = msgspec.convert({"status": "unknown", "message": "ReadTimeout"}, Outcome)
    real[1] = msgspec.structs.replace(real[1], outcome=unknown)
    verification = compare_execution(proposal(ticket_calls()), real)
    assert verification.checks[1].status == "unknown"
    assert verification.matching_once_resolved == 2
    assert "unknown: 1" in verification.summary


@pytest.mark.parametrize("placeholder_in_path", [True, False])
def test_a_placeholder_inside_a_path_resolves(placeholder_in_path: bool) -> None:
    plan_calls = ticket_calls()[:1] + [
        {
            "tool": "close_ticket",
            "effect": "update",
            "args": {"id": "<id from call 1>"},
            "request": {"method": "POST", "path": "/v1/tickets/<id from call 1>/close"},
        }
    ]
    real = real_calls()[:1] + [
        msgspec.convert(
            {
                "seq": 2,
                "tool": "close_ticket",
                "effect": "update",
                "args": {"id": "tk-4" if placeholder_in_path else "tk-5"},
                "request": {"method": "POST", "path": "/v1/tickets/tk-4/close"},
                "outcome": {"status": "ok", "http_status": 200},
            },
            Call,
        )
    ]
    check = compare_execution(proposal(plan_calls), real).checks[1]
    assert check.status == ("same once placeholders resolve" if placeholder_in_path else "different")
