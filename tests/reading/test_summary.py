"""One reading of a revision: what the queue stores at submission reads back the same, money to the
cent; the counts and the one-line sentence are worded one way for every reader; agent text in them
is shown, never passed to a terminal or a page as it came."""

from __future__ import annotations

import json
from decimal import Decimal

from reviewer.plan.proposal import parse_proposal
from reviewer.reading.summary import (
    MAX_ALARMS,
    NamedAlarm,
    PlanReading,
    counts_words,
    effects_words,
    from_stored,
    one_line,
    read_plan,
    stored,
)
from reviewer.reading.totals import Total
from reviewer.service.store.events import reading_document
from tests.builders import proposal_document


def refunds(environment: str) -> PlanReading:
    calls = [
        {"tool": "create_refund", "effect": "create", "args": {"amount_cents": cents, "currency": "EUR"}}
        for cents in (1250, 1)
    ] + [{"tool": "delete_ticket", "effect": "delete", "args": {"id": "t3"}}]
    document = proposal_document(calls, target={"api": "billing", "environment": environment})
    return read_plan(parse_proposal(json.dumps(document)))


def test_a_stored_reading_reads_back_the_same_to_the_cent() -> None:
    reading = refunds("production")
    assert reading.totals == (Total("EUR", Decimal("12.51"), 2, Decimal("12.51")),)
    again = from_stored(stored(reading))
    assert again == reading and again.totals[0].amount == Decimal("12.51")
    assert (again.creates, again.deletes, again.calls) == (2, 1, 3) and "deletes" in again.alarm_names


def test_counts_are_worded_one_way_every_write_effect_even_at_zero() -> None:
    reading = PlanReading(
        api="x", calls=6, creates=1, updates=2, deletes=0, reads=1, unknown=1, destructive=1
    )
    assert (
        counts_words(reading)
        == "6 calls, 1 create, 2 update, 0 delete, 1 effect unknown, 1 read, 1 more destructive"
    )
    assert effects_words(reading) == "1 create, 2 updates, 1 call of unknown effect, 1 read"
    none = PlanReading(api="x", calls=0, creates=0, updates=0, deletes=0, reads=0, unknown=0, destructive=0)
    assert effects_words(none) == "no calls"


def test_the_sentence_shows_hidden_characters_and_counts_the_alarms_it_leaves_out() -> None:
    reading = refunds("prod\x1b[31muction")
    line = one_line(reading)
    assert "\x1b" not in line and line.startswith("2 creates, 1 delete in prod")
    assert "moving EUR 12.51 (2 calls)" in line
    many = PlanReading(
        api="x",
        calls=1,
        creates=1,
        updates=0,
        deletes=0,
        reads=0,
        unknown=0,
        destructive=0,
        alarms=tuple(NamedAlarm(f"a{n}", f"alarm {n}") for n in range(MAX_ALARMS)),
        more_alarms=2,
    )
    assert one_line(many).endswith("alarm 0; alarm 1; alarm 2 (+19 more alarms)")


def test_the_waiting_event_counts_what_the_list_counts() -> None:
    reading = refunds("staging")
    document = reading_document(reading)
    assert document["counts"] == {"creates": 2, "updates": 0, "deletes": 1, "other": 0, "destructive": 1}
    assert [alarm["name"] for alarm in document["alarms"]] == list(reading.alarm_names)
    assert document["summary"] == one_line(reading)
