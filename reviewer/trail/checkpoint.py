"""Checkpoints: a log's size and root as a C2SP `tlog-checkpoint`, signed as a C2SP signed note with
an Ed25519 key kept in OpenSSH's format (as `ssh-keygen -t ed25519` writes it).

A checkpoint's text is three lines (origin, size, base64 root) and a blank line; each signature
line that follows is `— NAME BASE64(KEY_ID || SIGNATURE)`, where the key id is the first four bytes
of SHA-256(NAME, a newline, 0x01, the 32-byte public key). The origin names the log and is the
signing key's name, so a checkpoint of one queue never passes for another's. cryptography is
imported where a key is read, written or checked: a queue without a trail key never loads it.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from reviewer.trail.merkle import decoded_hash

if TYPE_CHECKING:
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

SIGNATURE_PREFIX: Final = "\u2014 "
"""An em dash and a space start every signature line of a signed note."""
ED25519_ALGORITHM: Final = b"\x01"
ORIGIN_PREFIX: Final = "reviewer.trail/"
MAX_CHECKPOINT_BYTES: Final = 64 * 1024
"""Far more than any checkpoint's three lines and signatures; a larger one is refused unread."""


class CheckpointError(ValueError):
    """A key or a checkpoint that cannot be used; the message names which and why."""


def _raw(public: Ed25519PublicKey) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return public.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)


def origin_for(public: Ed25519PublicKey) -> str:
    """The origin a queue's log has when its operator names none: one per key."""
    return ORIGIN_PREFIX + hashlib.sha256(_raw(public)).hexdigest()[:16]


def key_id(name: str, public: Ed25519PublicKey) -> bytes:
    return hashlib.sha256(name.encode() + b"\n" + ED25519_ALGORITHM + _raw(public)).digest()[:4]


def openssh_public(public: Ed25519PublicKey) -> str:
    """`ssh-ed25519 AAAA...`, the line a `.pub` file holds."""
    from cryptography.hazmat.primitives import serialization

    return public.public_bytes(serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH).decode()


def load_private_key(path: Path) -> Ed25519PrivateKey:
    """An unencrypted OpenSSH Ed25519 private key (`ssh-keygen -t ed25519 -N ''`)."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

    try:
        data = path.read_bytes()
    except OSError as error:
        raise CheckpointError(f"cannot read the trail key {path}: {error.strerror}") from None
    try:
        key = serialization.load_ssh_private_key(data, password=None)
    except TypeError:
        raise CheckpointError(
            f"{path} is encrypted; a service signs unattended, so give it a key without a passphrase "
            "(ssh-keygen -t ed25519 -N '' -f FILE) and protect the file instead"
        ) from None
    except (ValueError, binascii.Error, UnsupportedAlgorithm):
        raise CheckpointError(
            f"{path} is not an OpenSSH private key (ssh-keygen -t ed25519 makes one)"
        ) from None
    if not isinstance(key, Ed25519PrivateKey):
        raise CheckpointError(f"{path} is not an Ed25519 key; make one with ssh-keygen -t ed25519")
    return key


def parse_public_key(text: str, source: str) -> Ed25519PublicKey:
    """An `ssh-ed25519 AAAA... [comment]` line, as a `.pub` file or a queue's answer holds it."""
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey

    try:
        key = serialization.load_ssh_public_key(text.strip().encode())
    except (ValueError, binascii.Error, UnicodeEncodeError, UnsupportedAlgorithm):
        raise CheckpointError(
            f"{source} is not an OpenSSH public key (the .pub file ssh-keygen writes)"
        ) from None
    if not isinstance(key, Ed25519PublicKey):
        raise CheckpointError(f"{source} is not an Ed25519 public key")
    return key


def load_public_key(path: Path) -> Ed25519PublicKey:
    try:
        text = path.read_text(errors="replace")
    except OSError as error:
        raise CheckpointError(f"cannot read the key {path}: {error.strerror}") from None
    return parse_public_key(text, str(path))


@dataclass(frozen=True)
class Checkpoint:
    """A log's size and root, as one signed note names them."""

    origin: str
    size: int
    root: bytes
    text: str
    """The whole signed note, as it was read or written."""

    def describe(self) -> str:
        return f"checkpoint of {self.origin} at {self.size} entries (root {self.root.hex()[:16]}...)"


def body(origin: str, size: int, root: bytes) -> str:
    return f"{origin}\n{size}\n{base64.b64encode(root).decode()}\n"


def sign_note(key: Ed25519PrivateKey, name: str, text: str) -> str:
    """A C2SP signed note: `text` (ending in a newline), a blank line, and one signature line."""
    signature = key.sign(text.encode())
    encoded = base64.b64encode(key_id(name, key.public_key()) + signature).decode()
    return f"{text}\n{SIGNATURE_PREFIX}{name} {encoded}\n"


def _split_note(note: str, source: str) -> tuple[str, list[tuple[str, bytes]]]:
    """A signed note's text and its signature lines (name, key id and signature), unverified."""
    if len(note) > MAX_CHECKPOINT_BYTES:
        raise CheckpointError(f"{source} is over {MAX_CHECKPOINT_BYTES} bytes: not a checkpoint")
    text, separator, signatures = note.rpartition("\n\n")
    if not separator or not note.endswith("\n"):
        raise CheckpointError(f"{source} is not a signed note: no blank line before its signatures")
    found: list[tuple[str, bytes]] = []
    for line in signatures.removesuffix("\n").split("\n"):
        if not line.startswith(SIGNATURE_PREFIX):
            raise CheckpointError(f"{source}: a line after the blank line is not a signature")
        name, _, encoded = line[len(SIGNATURE_PREFIX) :].rpartition(" ")
        try:
            signature = base64.b64decode(encoded, validate=True)
        except binascii.Error:
            raise CheckpointError(f"{source}: a signature is not base64") from None
        if len(signature) < 5:
            raise CheckpointError(f"{source}: a signature is too short")
        found.append((name, signature))
    return text + "\n", found


def open_note(note: str, public: Ed25519PublicKey, name: str, source: str = "the note") -> str:
    """The text of a signed note, once a signature by `public` under `name` verifies. Signatures by
    other keys are ignored, as the signed-note spec says; a bad one by this key is refused."""
    from cryptography.exceptions import InvalidSignature

    text, signatures = _split_note(note, source)
    wanted = key_id(name, public)
    for signer, signature in signatures:
        if signer != name or signature[:4] != wanted:
            continue
        try:
            public.verify(signature[4:], text.encode())
        except InvalidSignature:
            raise CheckpointError(f"{source}: its signature by the key given does not verify") from None
        return text
    raise CheckpointError(f"{source} carries no signature by the key given for {name}")


def sign(key: Ed25519PrivateKey, size: int, root: bytes, origin: str | None = None) -> Checkpoint:
    """The signed checkpoint of a log of `size` entries with this `root`."""
    origin = origin or origin_for(key.public_key())
    return Checkpoint(origin, size, root, sign_note(key, origin, body(origin, size, root)))


def parse(note: str, source: str = "the checkpoint") -> Checkpoint:
    """A signed checkpoint's origin, size and root, its signatures unverified."""
    text, _ = _split_note(note, source)
    lines = text.split("\n")
    if len(lines) < 4:
        raise CheckpointError(f"{source} is not a checkpoint: it needs an origin, a size and a root hash")
    origin, size_text, root_text = lines[:3]
    if not origin or not origin.isprintable() or any(c.isspace() for c in origin):
        raise CheckpointError(f"{source} has no usable origin line")
    if not size_text.isascii() or not size_text.isdigit() or (size_text.startswith("0") and size_text != "0"):
        raise CheckpointError(f"{source}: the size line is not a decimal number")
    root = decoded_hash(root_text)
    if root is None:
        raise CheckpointError(f"{source}: the root line is not a base64 SHA-256 hash")
    return Checkpoint(origin, int(size_text), root, note)


def verify(note: str, public: Ed25519PublicKey, source: str = "the checkpoint") -> Checkpoint:
    """The checkpoint, once a signature by `public` under the checkpoint's origin verifies."""
    checkpoint = parse(note, source)
    open_note(note, public, checkpoint.origin, source)
    return checkpoint
