"""Allowed-signers files read as `ssh-keygen -Y verify` reads them."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pytest

from reviewer.signing.allowed_signers import AllowedSigners, AllowedSignersError, match_pattern_list
from reviewer.signing.sshsig import NAMESPACE, sign, signer_for
from tests.signing.ssh import make_key, ssh_keygen_verify

MESSAGE = b"a statement"


@pytest.mark.parametrize(
    ("template", "principal"),
    [
        ("alice {key}", "alice"),
        ("alice {key}", "bob"),
        ("alice,bob {key} laptop", "bob"),
        ('"alice,bob" {key}', "bob"),
        ("*@example.com {key}", "alice@example.com"),
        ("*@example.com,!mallory@example.com {key}", "mallory@example.com"),
        ("al?ce {key}", "alice"),
        ("Alice {key}", "alice"),
        ('alice namespaces="reviewer-decision@v1" {key}', "alice"),
        ('alice namespaces="git,file" {key}', "alice"),
        ('alice namespaces="reviewer-*" {key}', "alice"),
        ("alice cert-authority {key}", "alice"),
        ('alice valid-before="20200101" {key}', "alice"),
        ('alice valid-after="20200101Z" {key}', "alice"),
        ('alice valid-after="29990101" {key}', "alice"),
        ("# alice {key}\nbob {key}", "alice"),
        ("\n\n   bob {key}\nalice {key}", "alice"),
    ],
)
def test_our_reading_agrees_with_ssh_keygen(keys: Path, template: str, principal: str) -> None:
    alice = make_key(keys, "alice")
    text = template.format(key=alice.public.openssh()) + "\n"
    signature = sign(MESSAGE, signer_for(alice.private))
    reference = ssh_keygen_verify(text, principal, signature, MESSAGE, keys).returncode == 0
    ours = AllowedSigners.parse(text).allows(principal, alice.public, NAMESPACE, datetime.now(UTC))
    assert ours == reference


def test_another_key_for_the_same_principal_is_not_allowed(keys: Path) -> None:
    alice, mallory = make_key(keys, "alice"), make_key(keys, "mallory")
    signers = AllowedSigners.parse(f"alice {alice.public.openssh()}\nmallory {mallory.public.openssh()}\n")
    assert signers.allows("alice", alice.public, NAMESPACE)
    assert not signers.allows("alice", mallory.public, NAMESPACE)


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("alice\n", "line 1: expected"),
        ("# comment\n\nalice ssh-ed25519 !!!!\n", "line 3: the key: the key's base64 is damaged"),
        ('bob {key}\nalice frobnicate="1" {key}\n', "line 2: unknown option 'frobnicate'"),
        ('alice valid-after="yesterday" {key}\n', "line 1: the time 'yesterday'"),
        ('"alice {key}\n', "line 1: a quote is not closed"),
        ("alice ssh-dss AAAAB3NzaC1kc3MAAACBAP\n", "line 1: the key"),
    ],
)
def test_a_broken_file_names_the_line(keys: Path, text: str, problem: str) -> None:
    alice = make_key(keys, "alice")
    with pytest.raises(AllowedSignersError, match=problem.replace("(", r"\(")):
        AllowedSigners.parse(text.format(key=alice.public.openssh()), "team_signers")


def test_a_missing_file_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(AllowedSignersError, match="cannot read the allowed-signers file"):
        AllowedSigners.read(tmp_path / "nope")


def test_pattern_lists_follow_openssh() -> None:
    assert match_pattern_list("alice", ("alice",))
    assert not match_pattern_list("alice", ("ALICE",))
    assert match_pattern_list("a.b", ("a?b",))
    assert not match_pattern_list("a.b", ("a[.]b",))
    assert not match_pattern_list("x", ("*", "!x"))
    assert not match_pattern_list("x", ("!x",))
