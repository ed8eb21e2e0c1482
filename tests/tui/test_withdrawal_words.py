"""The words for an approval that stopped counting, as `reviewer show` and the app's chrome give them:
who cast it and what ended it, read past the name the reason starts with (a name is anyone's words),
and made safe to print."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from reviewer.policy.quorum import describe_withdrawals
from reviewer.queue.answers import withdrawals_of
from reviewer.queue.messages import TrailEvent


def withdrawn(actor: str, reason: str, revision: int = 1) -> TrailEvent:
    return TrailEvent(
        seq=9,
        at=datetime(2026, 12, 6, tzinfo=UTC),
        actor=actor,
        event="withdrawn",
        revision=revision,
        plan_sha256="a" * 64,
        reason=reason,
    )


@pytest.mark.parametrize(
    ("actor", "reason", "cause"),
    [
        (
            "alice@example.com",
            "alice@example.com's sign-in ended: out of the reviewers group; ...",
            "sign-in ended",
        ),
        (
            "alice@example.com",
            "alice@example.com's sign-in was ended (revoked on the queue, or ...)",
            "sign-in ended",
        ),
        (
            "sign-in-bot",
            "sign-in-bot's token was revoked; the approval it cast no longer counts",
            "token revoked",
        ),
        ("keyholder", "keyholder's token expired; the approval it cast no longer counts", "token expired"),
        ("bob", "bob's key SHA256:abc was removed; the approval it signed no longer counts", "key removed"),
    ],
)
def test_the_cause_is_read_past_the_name(actor: str, reason: str, cause: str) -> None:
    assert withdrawals_of([withdrawn(actor, reason)], 1) == [(actor, cause)]


def test_only_the_revision_asked_about_is_counted_and_the_words_name_each() -> None:
    history = [
        withdrawn("alice", "alice's sign-in ended: out of the reviewers group"),
        withdrawn("bob", "bob's token expired", revision=2),
        withdrawn("carol", "carol's token was revoked"),
    ]
    assert describe_withdrawals(withdrawals_of(history, 1)) == (
        "2 approvals withdrawn (alice, sign-in ended; carol, token revoked)"
    )
    assert describe_withdrawals(withdrawals_of(history, 2)) == "1 approval withdrawn (bob, token expired)"
