"""The policy and allowed-signers files the signing page shows whole are files the code accepts."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.policy import parse_policy

PAGE = Path(__file__).resolve().parents[2] / "docs" / "signing-and-policies.md"


def _block(starting_with: str) -> str:
    for block in re.findall(r"```[a-z]*\n(.*?)```", PAGE.read_text(encoding="utf-8"), re.S):
        text = textwrap.dedent(block)
        if text.startswith(starting_with):
            return text
    raise AssertionError(f"no block starting with {starting_with!r} in {PAGE.name}")


def test_the_documented_policy_parses_as_described() -> None:
    policy = parse_policy(_block("# Who must approve what"), "the documented policy")
    production = policy.rule_for("production")
    assert production.approvals == 2 and production.signatures
    assert production.reviewers == frozenset({"alice", "bob", "carol"})
    assert policy.rule_for("staging").signatures and not policy.rule_for("dev").signatures


def test_the_documented_allowed_signers_file_parses() -> None:
    signers = AllowedSigners.parse(_block("# allowed_signers"), "the documented allowed signers")
    assert [signer.principals for signer in signers.signers] == [
        ("alice",),
        ("bob",),
        ("carol", "carol@example.com"),
    ]
