"""The decision rules as plain functions of rows: no database, no HTTP."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewer.queue.messages import DecisionState
from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.errors import (
    BadRequest,
    ClaimRefused,
    Conflict,
    ExecutionRefused,
    Forbidden,
    IdempotencyMismatch,
    NotFound,
    NotPending,
    StaleRevision,
    Unauthorized,
)

NOW = 1_000.0
DIGEST = "a" * 64


def row(**changes: Any) -> dict[str, Any]:
    base = {
        "proposal_id": "p",
        "owner": "agent",
        "latest_revision": 2,
        "plan_sha256": DIGEST,
        "pending_expires_at": NOW + 10,
        "decision": None,
        "decided_by": None,
        "decided_at": None,
        "reason": None,
        "approval_expires_at": None,
        "claim_id": None,
        "claimed_by": None,
        "claimed_at": None,
        "lease_expires_at": None,
        "executed_at": None,
    }
    return {**base, **changes}


ALICE = Identity(1, "alice", "reviewer")
AGENT = Identity(2, "agent", "agent")


@pytest.mark.parametrize(
    ("changes", "state"),
    [
        ({}, "pending"),
        ({"pending_expires_at": NOW}, "expired"),
        ({"decision": "approve", "approval_expires_at": NOW + 1}, "approved"),
        ({"decision": "approve", "approval_expires_at": NOW}, "expired"),
        ({"decision": "reject"}, "rejected"),
        (
            {
                "decision": "approve",
                "approval_expires_at": NOW - 5,
                "claimed_at": NOW - 7,
                "lease_expires_at": NOW,
            },
            "claimed",
        ),
        (
            {
                "decision": "approve",
                "approval_expires_at": NOW - 5,
                "claimed_at": NOW - 7,
                "executed_at": NOW - 6,
            },
            "executed",
        ),
    ],
)
def test_the_state_of_a_row(changes: dict[str, Any], state: str) -> None:
    assert rules.state_of(row(**changes), NOW) == state


def test_a_stale_revision_is_412_before_the_proposer_check_and_before_409() -> None:
    decided = row(owner="alice", decision="approve", decided_by="bob", approval_expires_at=NOW + 5)
    with pytest.raises(StaleRevision):
        rules.check_decision(decided, ALICE, 1, DIGEST, NOW)
    with pytest.raises(StaleRevision):
        rules.check_decision(decided, ALICE, 2, "b" * 64, NOW)
    with pytest.raises(Forbidden, match="you proposed this"):
        rules.check_decision(decided, ALICE, 2, DIGEST, NOW)
    with pytest.raises(NotPending, match="already approved by bob"):
        rules.check_decision(
            row(decision="approve", decided_by="bob", approval_expires_at=NOW + 5), ALICE, 2, DIGEST, NOW
        )
    rules.check_decision(row(), ALICE, 2, DIGEST, NOW)


def test_the_proposer_check_ignores_case() -> None:
    with pytest.raises(Forbidden):
        rules.check_decision(row(owner="ALICE"), ALICE, 2, DIGEST, NOW)


def test_another_agent_is_told_nothing_exists() -> None:
    with pytest.raises(NotFound):
        rules.require_visible(row(owner="someone"), AGENT, "p")
    with pytest.raises(NotFound):
        rules.require_visible(None, ALICE, "p")
    assert rules.require_visible(row(owner="Agent"), AGENT, "p")["owner"] == "Agent"
    assert rules.require_visible(row(owner="someone"), ALICE, "p")["owner"] == "someone"


def test_submission_numbering() -> None:
    assert rules.submission_outcome(None, AGENT, "p", 1, DIGEST, None, NOW) is None
    with pytest.raises(Conflict, match="next revision of 'p' is 1"):
        rules.submission_outcome(None, AGENT, "p", 2, DIGEST, None, NOW)
    again = rules.submission_outcome(row(), AGENT, "p", 2, DIGEST, DIGEST, NOW)
    assert again is not None and again.state == "pending"
    older = rules.submission_outcome(row(), AGENT, "p", 1, "c" * 64, "c" * 64, NOW)
    assert older is not None and older.state == "superseded"
    with pytest.raises(Conflict, match="is 3 and revision 2 is stored with another plan"):
        rules.submission_outcome(row(), AGENT, "p", 2, "d" * 64, DIGEST, NOW)
    with pytest.raises(Conflict, match="belongs to another agent"):
        rules.submission_outcome(row(owner="other"), AGENT, "p", 3, DIGEST, None, NOW)


def test_a_claim_needs_a_current_unclaimed_approval() -> None:
    approved = row(decision="approve", decided_by="bob", approval_expires_at=NOW + 5)
    rules.check_claim(approved, 2, DIGEST, NOW)
    with pytest.raises(StaleRevision):
        rules.check_claim(approved, 1, DIGEST, NOW)
    held = {"claimed_by": "agent", "claimed_at": NOW - 1, "lease_expires_at": NOW + 60}
    for changes, words in (
        ({}, "no reviewer has approved it yet"),
        ({"decision": "reject", "decided_by": "bob"}, "bob rejected it"),
        ({"decision": "approve", "approval_expires_at": NOW}, "expired"),
        ({"decision": "approve", "approval_expires_at": NOW + 5, **held}, "a run by agent already holds"),
    ):
        with pytest.raises(ClaimRefused, match=words):
            rules.check_claim(row(**changes), 2, DIGEST, NOW)


def test_a_claimed_revision_cannot_be_replanned_until_its_lease_ends() -> None:
    held = row(decision="approve", claimed_by="agent", claimed_at=NOW - 1, lease_expires_at=NOW + 1)
    with pytest.raises(ClaimRefused, match="running under a claim by agent"):
        rules.submission_outcome(held, AGENT, "p", 3, "e" * 64, None, NOW)
    assert (
        rules.submission_outcome({**held, "lease_expires_at": NOW}, AGENT, "p", 3, "e" * 64, None, NOW)
        is None
    )


def test_a_report_belongs_to_its_own_unreported_claim_and_names_its_revision() -> None:
    claim = {"claim_id": "c" * 32, "revision": 2, "plan_sha256": DIGEST}
    assert rules.check_report(claim, False, "p", "c" * 32, 2, DIGEST) is claim
    with pytest.raises(ExecutionRefused, match="must name its claim"):
        rules.check_report(claim, False, "p", None, 2, DIGEST)
    with pytest.raises(ExecutionRefused, match="is yours"):
        rules.check_report(None, False, "p", "d" * 32, 2, DIGEST)
    with pytest.raises(ExecutionRefused, match="already reported"):
        rules.check_report(claim, True, "p", "c" * 32, 2, DIGEST)
    with pytest.raises(StaleRevision):
        rules.check_report(claim, False, "p", "c" * 32, 1, DIGEST)
    rules.require_open_claim({"claim_id": "c" * 32, "reported": False}, "p")
    with pytest.raises(ExecutionRefused, match="no claim"):
        rules.require_open_claim(None, "p")
    with pytest.raises(ExecutionRefused, match="already reported"):
        rules.require_open_claim({"claim_id": "c" * 32, "reported": True}, "p")


def test_a_revoked_or_vanished_token_cannot_write() -> None:
    rules.require_active_token({"revoked_at": None})
    for gone in ({"revoked_at": NOW}, None):
        with pytest.raises(Unauthorized):
            rules.require_active_token(gone)


def test_an_idempotency_key_with_another_body_is_refused() -> None:
    assert rules.earlier_answer(None, "f", "decision", DecisionState) is None
    with pytest.raises(IdempotencyMismatch):
        rules.earlier_answer({"request_sha256": "other", "answer": "{}"}, "f", "decision", DecisionState)


def test_a_name_keeps_its_role_and_one_active_token() -> None:
    revoked_agent = {"name": "Bot", "role": "agent", "revoked_at": NOW}
    with pytest.raises(Conflict, match="keeps its role for life"):
        rules.check_new_token("bot", "reviewer", [revoked_agent])
    rules.check_new_token("bot", "agent", [revoked_agent])
    with pytest.raises(Conflict, match="revoke it first"):
        rules.check_new_token("BOT", "agent", [{**revoked_agent, "revoked_at": None}])


@given(st.text(max_size=80))
def test_a_token_name_is_accepted_exactly_when_it_is_1_to_64_plain_ascii_word_characters(name: str) -> None:
    allowed = 1 <= len(name) <= 64 and all(c.isascii() and (c.isalnum() or c in "._-") for c in name)
    if allowed:
        assert rules.check_token_name(name) == name
    else:
        with pytest.raises(BadRequest) as refused:
            rules.check_token_name(name)
        assert "\x1b" not in refused.value.message


def test_only_an_approval_cast_before_its_key_was_removed_and_before_the_decision_is_withdrawn() -> None:
    from datetime import UTC, datetime, timedelta

    from reviewer.service.signed_decisions import CastDecision, KeyRemoval, without_removed_keys

    start = datetime(2026, 11, 30, 9, tzinfo=UTC)

    def approval(who: str, minutes: int, key: str) -> CastDecision:
        return CastDecision(who, "approve", None, start + timedelta(minutes=minutes), "s", "sig", key)

    cast = [
        approval("bob", 0, "SHA256:laptop"),
        approval("Carol", 1, "SHA256:carol"),
        approval("bob", 9, "SHA256:laptop"),
    ]
    removals = [KeyRemoval("bob", "SHA256:laptop", start + timedelta(minutes=5))]
    kept, withdrawn = without_removed_keys(cast, removals, decided_at=None)
    assert [item.approval for item in withdrawn] == [cast[0]]  # the one at 9 was signed after a re-add
    assert kept == cast[1:]
    assert without_removed_keys(cast, removals, decided_at=start + timedelta(minutes=2)) == (cast, [])
    other = [KeyRemoval("carol", "SHA256:laptop", start + timedelta(minutes=5))]
    assert without_removed_keys(cast, other, decided_at=None) == (cast, [])


def test_a_name_held_by_another_role_is_named_with_its_article_for_a_token_and_a_sign_in() -> None:
    auditor = {"name": "Audit", "role": "auditor", "revoked_at": None}
    metrics = {"name": "scrape", "role": "metrics", "revoked_at": NOW}
    with pytest.raises(Conflict, match="'Audit' was used for an auditor token, .* for the reviewer token"):
        rules.check_new_token("audit", "reviewer", [auditor])
    with pytest.raises(Conflict, match="'scrape' was used for a metrics token, .*; it cannot decide"):
        rules.check_name_free("scrape@example.com", "reviewer", [metrics], signs_in=True)
    held = {"name": "carol@example.com", "role": "reviewer", "revoked_at": None}
    with pytest.raises(Conflict, match="another active token is named 'carol@example.com'; .* before carol"):
        rules.check_name_free("carol", "reviewer", [held], signs_in=True)
    rules.check_name_free("carol", "reviewer", [{**held, "revoked_at": NOW}], signs_in=True)


def test_a_route_open_to_several_roles_names_them_all_when_it_refuses() -> None:
    from reviewer.service.deps import require_role
    from reviewer.service.errors import Forbidden

    auditor = Identity(token_id=1, name="audit", role="auditor")
    require_role(auditor, ("reviewer", "auditor"), "read the trail's entries")
    with pytest.raises(
        Forbidden,
        match=r"only a reviewer or auditor token may read the trail's entries; this token \(bot\) is an "
        "agent",
    ):
        require_role(
            Identity(token_id=2, name="bot", role="agent"),
            ("reviewer", "auditor"),
            "read the trail's entries",
        )
    with pytest.raises(Forbidden, match="only a metrics token may read the queue's metrics"):
        require_role(auditor, "metrics", "read the queue's metrics")
