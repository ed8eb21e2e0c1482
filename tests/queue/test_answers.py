"""The shell's views of the queue's answers (`reviewer.queue.answers`) read what the service sends:
every field a view names is its message's, never required where the message may leave it out, and
defaulted as the message defaults it."""

from __future__ import annotations

import msgspec
import pytest
from pydantic import BaseModel

from reviewer.queue import messages, passkey_messages
from reviewer.queue.answers import VIEWED, StateFields, decoded, error_fields, window_words
from reviewer.queue.messages import DecisionState, WindowState


def message_named(name: str) -> type[BaseModel]:
    model = getattr(messages, name, None) or getattr(passkey_messages, name)
    assert isinstance(model, type) and issubclass(model, BaseModel)
    return model


@pytest.mark.parametrize("view", list(VIEWED), ids=lambda view: view.__name__)
def test_each_view_reads_only_fields_its_message_sends_and_defaults_them_alike(
    view: type[msgspec.Struct],
) -> None:
    model = message_named(VIEWED[view])
    for field in msgspec.structs.fields(view):
        assert field.name in model.model_fields, f"{view.__name__}.{field.name} is not {model.__name__}'s"
        sent = model.model_fields[field.name]
        if "Literal" in repr(sent.annotation):  # the queue's own words: a view takes no other
            assert field.type == sent.annotation, (
                f"{view.__name__}.{field.name} reads more than the queue says"
            )
        if field.required:
            assert sent.is_required(), f"{view.__name__} requires {field.name}, which the queue may leave out"
        else:
            assert not sent.is_required(), f"{view.__name__}.{field.name} has a default the queue never uses"
            default = field.default if field.default is not msgspec.NODEFAULT else field.default_factory()
            assert sent.get_default(call_default_factory=True) == default, field.name


def test_a_state_the_service_writes_is_read_whole_and_worded_as_the_app_words_it() -> None:
    window = WindowState(
        may_run=False, window="year-end freeze", kind="deny", break_glass=["bob"], break_glass_required=2
    )
    state = DecisionState(
        proposal_id="a55aa-close",
        revision=2,
        plan_sha256="0" * 64,
        state="pending",
        approvals=["alice"],
        approvals_required=2,
        window=window,
    )
    read = decoded(state.model_dump_json().encode(), StateFields)
    assert (read.proposal_id, read.revision, read.approvals, read.approvals_required) == (
        "a55aa-close",
        2,
        ["alice"],
        2,
    )
    assert read.window is not None
    assert window_words(read.window) == window.words()
    assert "break glass 1 of 2: bob" in window.words()


def test_a_body_that_is_not_the_queues_refusal_is_none() -> None:
    assert error_fields(b"<html>502 Bad Gateway</html>") is None
    assert error_fields(b"") is None
    assert error_fields(b'{"message": "no code"}') is None
    read = error_fields(b'{"error": "not_pending", "message": "m", "state": "approved", "extra": 1}')
    assert read is not None and (read.error, read.state) == ("not_pending", "approved")


def test_a_listed_row_keeps_who_approved_it_so_far_for_list_json() -> None:
    """A plan gathering its quorum says who approved it in `reviewer list --json`, as the queue
    listed it (no request per row)."""
    from datetime import UTC, datetime

    from reviewer.queue.answers import PageFields
    from reviewer.queue.messages import ProposalPage, ProposalSummary
    from reviewer.queue.overview import listed

    row = ProposalSummary(
        proposal_id="a55aa-close",
        revision=1,
        title="t",
        agent_name="a",
        proposed_by="agent",
        plan_sha256="0" * 64,
        call_count=1,
        submitted_at=datetime(2026, 12, 7, tzinfo=UTC),
        state="pending",
        approvals=["alice"],
    )
    page = decoded(ProposalPage(proposals=[row]).model_dump_json().encode(), PageFields)
    summary = listed(page.proposals[0])
    assert summary.approvals == ["alice"] and summary.as_json()["approvals"] == ["alice"]


def test_a_state_outside_the_queues_words_is_not_read_as_one() -> None:
    """A refusal or a state naming a state the queue never sends (escape codes, say) is not taken
    for one: the refusal is worded as any answer that is not the queue's, the state is refused."""
    hostile = '{"error": "not_pending", "message": "m", "state": "\\u001b]0;pwned\\u0007"}'
    assert error_fields(hostile.encode()) is None
    with pytest.raises(msgspec.ValidationError):
        decoded(
            b'{"proposal_id": "p", "revision": 1, "plan_sha256": "x", "state": "\\u001b[2J"}', StateFields
        )


def test_show_and_the_review_page_read_a_revision_by_one_rule() -> None:
    """The store's record (the page reads it) and the shell's view of the same record sent as JSON
    (`show` reads that) give the same facts of each revision: the latest one's state and approvals,
    an earlier one `superseded`; a revision the record lacks is neither's."""
    from datetime import UTC, datetime

    from reviewer.queue.answers import RecordFields
    from reviewer.queue.messages import ProposalRecord, RevisionInfo
    from reviewer.queue.overview import revision_facts

    submitted = [datetime(2026, 12, 7, 5, minute, tzinfo=UTC) for minute in (1, 2)]
    record = ProposalRecord(
        proposal_id="a55aa-close",
        proposed_by="infra-agent",
        latest=DecisionState(
            proposal_id="a55aa-close",
            revision=2,
            plan_sha256="2" * 64,
            state="approved",
            approvals=["alice", "bob"],
            approvals_required=2,
        ),
        revisions=[
            RevisionInfo(
                revision=number,
                plan_sha256=str(number) * 64,
                title="Close",
                call_count=1,
                submitted_by="infra-agent",
                submitted_at=submitted[number - 1],
                state="superseded" if number == 1 else "approved",
            )
            for number in (1, 2)
        ],
        history=[],
    )
    viewed = decoded(record.model_dump_json().encode(), RecordFields)
    for number in (1, 2):
        assert revision_facts(viewed, number) == revision_facts(record, number)
    first, latest = revision_facts(record, 1), revision_facts(record, 2)
    assert (first.plan_sha256, first.state, first.latest_revision) == ("1" * 64, "superseded", 2)
    assert (latest.state, latest.approvals, latest.approvals_required) == ("approved", ["alice", "bob"], 2)
    assert latest.submitted_at == submitted[1].isoformat() and latest.proposed_by == "infra-agent"
    for shape in (record, viewed):
        with pytest.raises(LookupError):
            revision_facts(shape, 3)
