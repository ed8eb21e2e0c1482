"""The executor's check: enough distinct principals of its allowed-signers file signed this exact plan."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.signed_approvals import SignedStatement, check_signed_approvals
from reviewer.signing.sshsig import DecisionStatement, Signer, sign, sign_statement, signer_for
from tests.signing.ssh import Agent, make_key

PROPOSAL, REVISION, DIGEST = "deskline-merge-0042", 3, "c" * 64


def signed(signer: Signer, reviewer: str, **changes: object) -> SignedStatement:
    fields: dict[str, object] = {
        "proposal_id": PROPOSAL,
        "revision": REVISION,
        "plan_sha256": DIGEST,
        "decision": "approve",
        "reviewer": reviewer,
        "signed_at": "2026-11-30T09:00:00Z",
    }
    fields.update(changes)
    statement = DecisionStatement(**fields)  # type: ignore[arg-type]
    return SignedStatement(statement.to_bytes().decode(), sign_statement(statement, signer))


@pytest.fixture
def team(keys: Path) -> dict[str, Signer]:
    return {name: signer_for(make_key(keys, name).private) for name in ("alice", "bob", "carol", "mallory")}


@pytest.fixture
def allowed(team: dict[str, Signer]) -> AllowedSigners:
    return AllowedSigners.parse(
        "".join(f"{name} {team[name].public_key.openssh()}\n" for name in ("alice", "bob", "carol"))
    )


def check(allowed: AllowedSigners, required: int, *statements: SignedStatement):  # type: ignore[no-untyped-def]
    return check_signed_approvals(allowed, required, PROPOSAL, REVISION, DIGEST, statements)


def test_two_distinct_signers_authorize_a_quorum_of_two(
    keys: Path, agent: Agent, allowed: AllowedSigners, team: dict[str, Signer]
) -> None:
    bob_in_agent = make_key(keys, "bob-laptop")
    agent.add(bob_in_agent)
    bob_in_agent.private.unlink()
    both = AllowedSigners.parse(
        f"alice {team['alice'].public_key.openssh()}\nbob {bob_in_agent.public.openssh()}\n"
    )
    alice = signed(team["alice"], "alice")
    bob = signed(signer_for(bob_in_agent.public_file, agent.environ), "bob")

    verdict = check(both, 2, alice, bob)
    assert verdict.authorized and verdict.signers == ("alice", "bob")
    assert verdict.explain() == "2 of 2 signed approvals (alice, bob)"
    assert not check(both, 2, alice).authorized
    assert check(both, 2, alice).explain() == "1 of 2 signed approvals (alice)"


def test_the_same_person_twice_counts_once(allowed: AllowedSigners, team: dict[str, Signer]) -> None:
    first = signed(team["alice"], "alice")
    again = signed(team["alice"], "alice", signed_at="2026-11-30T09:05:00Z")
    verdict = check(allowed, 2, first, again)
    assert not verdict.authorized and verdict.signers == ("alice",)
    assert "counts once" in verdict.explain()


def test_one_key_listed_under_two_names_counts_once(team: dict[str, Signer]) -> None:
    shared = AllowedSigners.parse(f"alice,alice-admin {team['alice'].public_key.openssh()}\n")
    verdict = check(shared, 2, signed(team["alice"], "alice"), signed(team["alice"], "alice-admin"))
    assert not verdict.authorized and verdict.signers == ("alice",)


@pytest.mark.parametrize(
    "changes",
    [{"plan_sha256": "d" * 64}, {"revision": REVISION - 1}, {"proposal_id": "another-proposal"}],
)
def test_a_signature_over_another_plan_does_not_count(
    allowed: AllowedSigners, team: dict[str, Signer], changes: dict[str, object]
) -> None:
    verdict = check(allowed, 1, signed(team["alice"], "alice", **changes))
    assert not verdict.authorized
    assert "names another decision" in verdict.explain()


def test_a_row_written_into_the_queue_by_hand_authorizes_nothing(
    allowed: AllowedSigners, team: dict[str, Signer]
) -> None:
    """What an intruder with the queue's database can produce: statements without a valid signature
    from a key the executor trusts."""
    honest = signed(team["alice"], "alice")
    forged_by_other_key = signed(team["mallory"], "bob")
    unsigned = SignedStatement(honest.statement.replace("alice", "carol"), honest.signature)
    garbage = SignedStatement(signed(team["bob"], "bob").statement, "-----BEGIN SSH SIGNATURE-----\nAAAA\n")
    empty = SignedStatement(signed(team["bob"], "bob").statement, "")
    for forged in (forged_by_other_key, unsigned, garbage, empty):
        verdict = check(allowed, 1, forged)
        assert not verdict.authorized, forged
        assert verdict.signers == ()
    assert check(allowed, 2, honest, forged_by_other_key, unsigned).signers == ("alice",)


def test_a_signature_in_another_namespace_does_not_count(
    allowed: AllowedSigners, team: dict[str, Signer]
) -> None:
    good = signed(team["alice"], "alice")
    git_signature = sign(good.statement.encode(), team["alice"], namespace="git")
    verdict = check(allowed, 1, SignedStatement(good.statement, git_signature))
    assert not verdict.authorized and "namespace 'git'" in verdict.explain()


def test_a_signed_rejection_refuses_whatever_else_was_signed(
    allowed: AllowedSigners, team: dict[str, Signer]
) -> None:
    verdict = check(
        allowed,
        2,
        signed(team["alice"], "alice"),
        signed(team["carol"], "carol"),
        signed(team["bob"], "bob", decision="reject"),
    )
    assert not verdict.authorized and verdict.rejected_by == ("bob",)
    assert verdict.explain() == "refused: a signed rejection by bob"


def test_a_malformed_statement_is_not_counted_and_says_why(
    allowed: AllowedSigners, team: dict[str, Signer]
) -> None:
    verdict = check(allowed, 1, SignedStatement('{"format":"x"}', ""))
    assert not verdict.authorized and "statement" in verdict.explain()


def test_zero_required_signatures_is_a_configuration_error(allowed: AllowedSigners) -> None:
    with pytest.raises(ValueError, match="at least one"):
        check(allowed, 0)
