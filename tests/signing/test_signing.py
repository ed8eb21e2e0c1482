"""Signing a decision statement and checking it, held against `ssh-keygen -Y sign|verify`."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
import rfc8785
from hypothesis import given, settings
from hypothesis import strategies as st

from reviewer.signing.sshsig import (
    AgentSigner,
    BadSignature,
    BadStatement,
    DecisionStatement,
    KeyFileError,
    KeyFileSigner,
    SigningError,
    SshSignature,
    sign,
    sign_statement,
    signer_for,
    verify_with_keys,
)
from tests.signing.ssh import Agent, make_key, ssh_keygen_sign, ssh_keygen_verify

DIGEST = "a" * 64
OTHER_DIGEST = "b" * 64


def statement(**changes: object) -> DecisionStatement:
    fields: dict[str, object] = {
        "proposal_id": "deskline-merge-0042",
        "revision": 2,
        "plan_sha256": DIGEST,
        "decision": "approve",
        "reviewer": "alice",
        "signed_at": "2026-11-30T09:00:00Z",
    }
    fields.update(changes)
    return DecisionStatement(**fields)  # type: ignore[arg-type]


# --- the statement -----------------------------------------------------------------------------


def test_statement_bytes_are_the_rfc8785_json_of_design_11() -> None:
    assert statement().to_bytes() == rfc8785.dumps(
        {
            "format": "reviewer.decision/v1",
            "proposal_id": "deskline-merge-0042",
            "revision": 2,
            "plan_sha256": DIGEST,
            "decision": "approve",
            "reviewer": "alice",
            "signed_at": "2026-11-30T09:00:00Z",
        }
    )


names = st.from_regex(r"[A-Za-z0-9._-]{1,64}", fullmatch=True)


@settings(max_examples=200)
@given(
    proposal_id=st.from_regex(r"[A-Za-z0-9._-]{1,128}", fullmatch=True),
    revision=st.integers(1, 2**53 - 1),
    plan_sha256=st.from_regex(r"[0-9a-f]{64}", fullmatch=True),
    decision=st.sampled_from(["approve", "reject", "request_changes"]),
    reviewer=names,
)
def test_a_statement_reads_back_as_itself(
    proposal_id: str, revision: int, plan_sha256: str, decision: str, reviewer: str
) -> None:
    made = statement(
        proposal_id=proposal_id,
        revision=revision,
        plan_sha256=plan_sha256,
        decision=decision,
        reviewer=reviewer,
    )
    assert DecisionStatement.parse(made.to_bytes()) == made
    assert made.to_bytes() == rfc8785.dumps(made.to_json())


@pytest.mark.parametrize(
    ("data", "field"),
    [
        (b"not json", "statement"),
        (b"[]", "statement"),
        (rfc8785.dumps({**statement().to_json(), "extra": 1}), "statement.extra"),
        (
            rfc8785.dumps({k: v for k, v in statement().to_json().items() if k != "revision"}),
            "statement.revision",
        ),
        (rfc8785.dumps({**statement().to_json(), "revision": "2"}), "statement.revision"),
        (rfc8785.dumps({**statement().to_json(), "revision": True}), "statement.revision"),
        (rfc8785.dumps({**statement().to_json(), "revision": 0}), "statement.revision"),
        (rfc8785.dumps({**statement().to_json(), "plan_sha256": "A" * 64}), "statement.plan_sha256"),
        (rfc8785.dumps({**statement().to_json(), "decision": "maybe"}), "statement.decision"),
        (rfc8785.dumps({**statement().to_json(), "reviewer": "al ice"}), "statement.reviewer"),
        (
            rfc8785.dumps({**statement().to_json(), "signed_at": "2026-02-30T09:00:00Z"}),
            "statement.signed_at",
        ),
        (rfc8785.dumps({**statement().to_json(), "format": "reviewer.decision/v2"}), "statement.format"),
        (b" " + statement().to_bytes(), "statement"),
        (statement().to_bytes().replace(b'"decision"', b'"decision" '), "statement"),
    ],
)
def test_a_malformed_statement_is_refused_naming_the_field(data: bytes, field: str) -> None:
    with pytest.raises(BadStatement) as refused:
        DecisionStatement.parse(data)
    assert refused.value.field == field
    assert str(refused.value).startswith(field)


def test_names_says_which_field_differs() -> None:
    made = statement()
    assert made.names("deskline-merge-0042", 2, DIGEST, "approve") is None
    assert "plan_sha256" in (made.names("deskline-merge-0042", 2, OTHER_DIGEST, "approve") or "")
    assert "revision" in (made.names("deskline-merge-0042", 3, DIGEST, "approve") or "")
    assert "decision" in (made.names("deskline-merge-0042", 2, DIGEST, "reject") or "")


# --- signing through the agent and with a key file ------------------------------------------


def test_a_key_only_in_the_agent_signs_and_ssh_keygen_verifies_it(keys: Path, agent: Agent) -> None:
    alice = make_key(keys, "alice")
    agent.add(alice)
    alice.private.unlink()  # as with a forwarded agent: no private key on this host
    signer = signer_for(alice.public_file, agent.environ)
    assert isinstance(signer, AgentSigner)

    message = statement().to_bytes()
    signature = sign_statement(statement(), signer)

    allowed = f"alice {alice.public.openssh()}\n"
    assert ssh_keygen_verify(allowed, "alice", signature, message, keys).returncode == 0
    # ed25519 signatures are deterministic: the agent path writes exactly what ssh-keygen writes
    assert signature == ssh_keygen_sign(alice.public_file, message, keys, environ=agent.environ)


@pytest.mark.parametrize(
    ("key_type", "bits"), [("ed25519", None), ("rsa", 2048), ("ecdsa", 256), ("ecdsa", 521)]
)
def test_every_key_type_signs_through_the_agent_and_verifies_both_ways(
    keys: Path, agent: Agent, key_type: str, bits: int | None
) -> None:
    key = make_key(keys, f"k-{key_type}", key_type, bits)
    agent.add(key)
    message = statement().to_bytes()
    allowed = f"alice {key.public.openssh()}\n"

    ours = sign(message, AgentSigner(key.public, agent.environ))
    assert ssh_keygen_verify(allowed, "alice", ours, message, keys).returncode == 0

    theirs = ssh_keygen_sign(key.private, message, keys)
    parsed, signer = verify_with_keys(message, theirs, [key.public])
    assert parsed == statement() and signer == key.public


@pytest.mark.parametrize(("key_type", "bits"), [("ed25519", None), ("rsa", 3072), ("ecdsa", 384)])
def test_a_key_file_signs_and_ssh_keygen_verifies_it(keys: Path, key_type: str, bits: int | None) -> None:
    key = make_key(keys, "file-key", key_type, bits)
    signer = signer_for(key.private)
    assert isinstance(signer, KeyFileSigner)
    assert signer.public_key == key.public
    message = statement().to_bytes()
    signature = sign(message, signer)
    assert (
        ssh_keygen_verify(f"alice {key.public.openssh()}\n", "alice", signature, message, keys).returncode
        == 0
    )
    if key_type == "ed25519":
        assert signature == ssh_keygen_sign(key.private, message, keys)


# --- what verification refuses ------------------------------------------------------------------


def test_a_signature_over_another_digest_revision_or_principal_is_refused(keys: Path) -> None:
    alice = make_key(keys, "alice")
    signature = ssh_keygen_sign(alice.private, statement().to_bytes(), keys)
    assert verify_with_keys(statement().to_bytes(), signature, [alice.public])[0] == statement()
    for other in (
        statement(plan_sha256=OTHER_DIGEST),
        statement(revision=3),
        statement(reviewer="bob"),
        statement(decision="reject"),
        statement(proposal_id="other"),
    ):
        with pytest.raises(BadSignature, match="does not verify"):
            verify_with_keys(other.to_bytes(), signature, [alice.public])
        assert (
            ssh_keygen_verify(
                f"alice,bob {alice.public.openssh()}\n", other.reviewer, signature, other.to_bytes(), keys
            ).returncode
            != 0
        )


def test_a_signature_in_another_namespace_is_refused(keys: Path) -> None:
    alice = make_key(keys, "alice")
    message = statement().to_bytes()
    signature = ssh_keygen_sign(alice.private, message, keys, namespace="git")
    with pytest.raises(BadSignature, match="namespace 'git'"):
        verify_with_keys(message, signature, [alice.public])


def test_a_valid_signature_by_a_key_not_registered_for_the_reviewer_is_refused(keys: Path) -> None:
    alice, mallory = make_key(keys, "alice"), make_key(keys, "mallory")
    message = statement().to_bytes()  # names alice, signed by mallory's key
    signature = ssh_keygen_sign(mallory.private, message, keys)
    with pytest.raises(BadSignature, match="not registered for alice"):
        verify_with_keys(message, signature, [alice.public])


def _armor(raw: bytes) -> str:
    encoded = base64.b64encode(raw).decode()
    return "-----BEGIN SSH SIGNATURE-----\n" + encoded + "\n-----END SSH SIGNATURE-----\n"


def test_malformed_signatures_are_refused_with_one_line_naming_the_field(keys: Path) -> None:
    alice = make_key(keys, "alice")
    message = statement().to_bytes()
    good = ssh_keygen_sign(alice.private, message, keys)
    raw = SshSignature.parse(good).to_bytes()
    damaged = [
        "",
        "hello",
        good.replace("-----BEGIN SSH SIGNATURE-----", ""),
        good[:-40] + "!!!!" + good[-36:],
        _armor(raw[:-10]),
        _armor(raw + b"\0"),
        _armor(b"SSHSIX" + raw[6:]),
        _armor(raw[:-1] + bytes([raw[-1] ^ 1])),  # the last byte of the ed25519 signature
        "x" * 20_000,
    ]
    for bad in damaged:
        with pytest.raises(BadSignature) as refused:
            verify_with_keys(message, bad, [alice.public])
        assert refused.value.field == "signature"
        assert "\n" not in str(refused.value)


# --- clear errors when signing is impossible -----------------------------------------------------


def test_no_agent_is_one_clear_line(keys: Path, tmp_path: Path) -> None:
    alice = make_key(keys, "alice")
    with pytest.raises(SigningError, match=r"^no ssh-agent: SSH_AUTH_SOCK is not set"):
        sign(b"x", AgentSigner(alice.public, {}))
    with pytest.raises(SigningError, match=r"^no ssh-agent answers at SSH_AUTH_SOCK"):
        sign(b"x", AgentSigner(alice.public, {"SSH_AUTH_SOCK": str(tmp_path / "gone.sock")}))


def test_an_agent_without_the_key_is_one_clear_line(keys: Path, agent: Agent) -> None:
    alice, bob = make_key(keys, "alice"), make_key(keys, "bob")
    agent.add(bob)
    with pytest.raises(SigningError, match=r"the ssh-agent does not hold the key SHA256:") as refused:
        sign(b"x", AgentSigner(alice.public, agent.environ))
    fingerprint = subprocess.run(
        ["ssh-keygen", "-l", "-f", str(alice.public_file)], capture_output=True, text=True, check=True
    ).stdout.split()[1]
    assert fingerprint in str(refused.value)


def test_a_key_file_others_can_read_is_refused(keys: Path) -> None:
    alice = make_key(keys, "alice")
    alice.private.chmod(0o644)
    with pytest.raises(KeyFileError, match=r"readable by others \(mode 0644\): run `chmod 600"):
        signer_for(alice.private)


def test_a_passphrase_protected_key_file_points_at_the_agent(keys: Path) -> None:
    private = keys / "locked"
    subprocess.run(
        ["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret phrase", "-f", str(private)], check=True
    )
    with pytest.raises(KeyFileError, match="passphrase: add it to your agent"):
        signer_for(private)


def test_a_file_that_is_no_key_is_refused(keys: Path) -> None:
    junk = keys / "junk"
    junk.write_text("hello\n")
    with pytest.raises(SigningError, match="not an SSH public key"):
        signer_for(junk)
    with pytest.raises(KeyFileError, match="cannot read"):
        signer_for(keys / "missing")
