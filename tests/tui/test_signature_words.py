"""How the queue screen words a revision's signed decisions: an SSH signature checked here, a
passkey's assertion (which carries no key) read for the decision it names and marked as the queue's
check, and one that names another revision refused."""

from __future__ import annotations

from datetime import UTC, datetime

from reviewer.plan.proposal import parse_proposal
from reviewer.queue.messages import DecisionSignature
from reviewer.signing.sshsig import DecisionStatement
from reviewer.tui.model.sources import QueueItem
from tests.builders import proposal_document
from tests.queue_harness import body
from tests.signing.authenticator import Authenticator

DIGEST = "c" * 64


def item_signed_by_passkey(revision_named: int) -> QueueItem:
    plan = parse_proposal(body(proposal_document([{"tool": "t", "effect": "update", "args": {}}])), "plan")
    statement = DecisionStatement(
        "test-plan", revision_named, DIGEST, "approve", "alice", "2026-12-06T03:00:00Z"
    )
    phone = Authenticator()
    signed = DecisionSignature(
        reviewer="alice",
        decision="approve",
        statement=statement.to_bytes().decode(),
        signature=phone.assert_over(statement.to_bytes()).to_text(),
        key_fingerprint=f"passkey:{phone.registered().credential_id}",
        at=datetime(2026, 12, 6, 3, tzinfo=UTC),
    )
    return QueueItem("test-plan", "approved", {1: plan}, {1: DIGEST}, signatures=[signed])


def test_a_passkeys_decision_reads_as_the_queues_check_of_that_decision() -> None:
    [(words, fine)] = item_signed_by_passkey(1).signature_words()
    assert fine and words == "alice approved passkey Y3JlZGVudGlh… (checked by the queue)"


def test_a_passkeys_statement_naming_another_revision_is_marked() -> None:
    [(words, fine)] = item_signed_by_passkey(2).signature_words()
    assert not fine and words.startswith("alice ✗ names another decision (statement.revision is 2, not 1)")
