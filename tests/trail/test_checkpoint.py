"""Checkpoints as C2SP signed notes: the Go sumdb/note and signed-note spec's published notes, an
OpenSSH key as ssh-keygen makes it, and the refusals a verifier owes."""

from __future__ import annotations

import base64
import subprocess
from pathlib import Path

import pytest
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

from reviewer.trail import checkpoint
from reviewer.trail.checkpoint import CheckpointError

GO_TEXT = (
    "If you think cryptography is the answer to your problem,\nthen you don't know what your problem is.\n"
)
GO_SIGNER = "AYEKFALVFGyNhPJEMzD1QIDr+Y7hfZx09iUvxdXHKDFz"  # PRIVATE+KEY+PeterNeumann+c74f20a3+...
GO_VERIFIER = "ARpc2QcUPDhMQegwxbzhKqiBfsVkmqq/LDE4izWy10TW"  # PeterNeumann+c74f20a3+...
GO_NOTE = (
    GO_TEXT + "\n\u2014 PeterNeumann "
    "x08go/ZJkuBS9UG/SffcvIAQxVBtiFupLLr8pAcElZInNIuGUgYN1FFYC2pZSNXgKvqfqdngotpRZb6KE6RyyBwJnAM=\n"
)
SPEC_VERIFIER = "AekyeRrm56hApGFkyQR4ZCbV54Id2LKaANYcrnKv3U2k"  # example.com/foo+530d903a+...
SPEC_NOTE = (
    "This is an example message.\n\n\u2014 example.com/foo "
    "Uw2QOkn8srV1yJGh2VYRlL1Tnagv1YEq6TfXppzi2ONncAlTgK7Ztg1ERYNZXsYjOBH3mFXmRKuwHjG1Yu72IneyaQM=\n"
)


def ed25519_key(encoded: str) -> bytes:
    raw = base64.b64decode(encoded)
    assert raw[0] == 1  # the signed-note spec's Ed25519 type byte
    return raw[1:]


def test_a_note_signs_and_opens_exactly_as_go_s_sumdb_note_and_the_spec_say() -> None:
    key = Ed25519PrivateKey.from_private_bytes(ed25519_key(GO_SIGNER))
    assert checkpoint.sign_note(key, "PeterNeumann", GO_TEXT) == GO_NOTE
    assert checkpoint.key_id("PeterNeumann", key.public_key()).hex() == "c74f20a3"
    peter = Ed25519PublicKey.from_public_bytes(ed25519_key(GO_VERIFIER))
    assert checkpoint.open_note(GO_NOTE, peter, "PeterNeumann") == GO_TEXT
    spec = Ed25519PublicKey.from_public_bytes(ed25519_key(SPEC_VERIFIER))
    assert checkpoint.open_note(SPEC_NOTE, spec, "example.com/foo") == "This is an example message.\n"
    with pytest.raises(CheckpointError, match="no signature by the key given"):
        checkpoint.open_note(GO_NOTE, spec, "example.com/foo")


def test_a_checkpoint_made_with_an_ssh_keygen_key_verifies_with_its_pub_file(tmp_path: Path) -> None:
    path = tmp_path / "trail_key"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(path)], check=True)
    key = checkpoint.load_private_key(path)
    signed = checkpoint.sign(key, 6, bytes(range(32)))
    origin, size, root, blank, signature = signed.text.split("\n")[:5]
    assert (size, base64.b64decode(root), blank) == ("6", bytes(range(32)), "")
    assert origin.startswith("reviewer.trail/") and signature.startswith(f"\u2014 {origin} ")
    public = checkpoint.load_public_key(path.with_suffix(".pub"))
    assert checkpoint.verify(signed.text, public) == signed
    forged = signed.text.replace("\n6\n", "\n7\n")
    with pytest.raises(CheckpointError, match="does not verify"):
        checkpoint.verify(forged, public)
    with pytest.raises(CheckpointError, match="no signature by the key given"):
        checkpoint.verify(signed.text, Ed25519PrivateKey.generate().public_key())


def test_keys_that_cannot_sign_are_refused_in_one_line(tmp_path: Path) -> None:
    encrypted, rsa = tmp_path / "encrypted", tmp_path / "rsa"
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "secret", "-f", str(encrypted)], check=True)
    subprocess.run(["ssh-keygen", "-q", "-t", "rsa", "-b", "2048", "-N", "", "-f", str(rsa)], check=True)
    with pytest.raises(CheckpointError, match="is encrypted"):
        checkpoint.load_private_key(encrypted)
    with pytest.raises(CheckpointError, match="not an Ed25519 key"):
        checkpoint.load_private_key(rsa)
    with pytest.raises(CheckpointError, match="not an Ed25519 public key"):
        checkpoint.load_public_key(rsa.with_suffix(".pub"))
    with pytest.raises(CheckpointError, match="cannot read"):
        checkpoint.load_private_key(tmp_path / "missing")
    with pytest.raises(CheckpointError, match="not an OpenSSH public key"):
        checkpoint.load_public_key(rsa)  # the private half where the .pub belongs
    with pytest.raises(CheckpointError, match="not an OpenSSH private key"):
        checkpoint.load_private_key(rsa.with_suffix(".pub"))


@pytest.mark.parametrize(
    "note",
    [
        "origin\n6\n" + "A" * 44 + "\n",  # no signatures
        "origin\nsix\n" + "A" * 44 + "\n\n\u2014 origin AAAAAAAA\n",
        "origin\n06\n" + "A" * 44 + "\n\n\u2014 origin AAAAAAAA\n",
        "origin\n6\nnot-base64\n\n\u2014 origin AAAAAAAA\n",
        "origin\n6\n" + "A" * 44 + "\n\nnot a signature\n",
        "x" * 70_000,
    ],
)
def test_what_is_not_a_checkpoint_is_refused(note: str) -> None:
    with pytest.raises(CheckpointError):
        checkpoint.parse(note)
