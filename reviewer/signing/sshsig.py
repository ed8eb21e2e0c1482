"""Signed decisions: the statement a reviewer signs, and OpenSSH SSHSIG signing and verification.

An approval signed with the reviewer's own SSH key can be checked by whatever executes it without
believing the queue: the statement names exactly one proposal, revision and digest, and the
signature is the one `ssh-keygen -Y sign -n reviewer-decision@v1` makes, so `ssh-keygen -Y verify`
with an allowed-signers file checks it too. Signing goes through the ssh-agent (`ssh_agent.py`), so a
forwarded key never leaves the laptop, or through a key file; verification uses `cryptography`
(ed25519, RSA with SHA-2, ECDSA P-256/384/521), whose results the tests hold against `ssh-keygen`.
No Textual and nothing of the service here: the terminal app, the command line, the queue and the
executor all share this one module.
"""

from __future__ import annotations

import base64
import hashlib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final, Literal, Protocol

from reviewer import json_text
from reviewer.plan.proposal import PROPOSAL_ID_PATTERN, canonical_json
from reviewer.signing._ssh_agent import (
    SSH_AGENT_RSA_SHA2_512,
    AgentConnection,
    AgentError,
    KeyNotInAgent,
    agent_socket_path,
)
from reviewer.signing._ssh_wire import WireError, WireReader, encode_mpint, encode_string, encode_uint32
from reviewer.signing.basics import MAX_SIGNATURE_CHARS, MAX_STATEMENT_BYTES
from reviewer.signing.basics import SigningError as SigningError  # every signing module raises it from here

if TYPE_CHECKING:  # cryptography loads with the first key read, or signature checked or made
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
    from cryptography.hazmat.primitives.hashes import HashAlgorithm

    VerifyingKey = ed25519.Ed25519PublicKey | rsa.RSAPublicKey | ec.EllipticCurvePublicKey
    SigningKey = ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey

NAMESPACE: Final = "reviewer-decision@v1"
STATEMENT_FORMAT: Final = "reviewer.decision/v1"
REVIEWER_NAME_PATTERN: Final = r"^[A-Za-z0-9._%+@-]{1,254}$"
"""Who a signed decision names: a token name (1 to 64 of `[A-Za-z0-9._-]`), or the name the team's
OpenID provider gives a person (an email address); plain ASCII, so no look-alike letter hides in it."""

DecisionKind = Literal["approve", "reject", "request_changes"]

_SSHSIG_MAGIC: Final = b"SSHSIG"
_SSHSIG_VERSION: Final = 1
_ARMOR_BEGIN: Final = "-----BEGIN SSH SIGNATURE-----"
_ARMOR_END: Final = "-----END SSH SIGNATURE-----"
_ARMOR_WIDTH: Final = 70

_HASHES: Final = {"sha256": "SHA256", "sha512": "SHA512"}
"""Each hash below by the name of its class in `cryptography.hazmat.primitives.hashes` (`_hash`)."""
_ECDSA_HASHES: Final = {
    "ecdsa-sha2-nistp256": "SHA256",
    "ecdsa-sha2-nistp384": "SHA384",
    "ecdsa-sha2-nistp521": "SHA512",
}
_RSA_SIGNATURE_HASHES: Final = {
    "rsa-sha2-256": "SHA256",
    "rsa-sha2-512": "SHA512",
}
SUPPORTED_KEY_TYPES: Final = ("ssh-ed25519", "ssh-rsa", *_ECDSA_HASHES)
_MIN_RSA_BITS: Final = 1024
"""OpenSSH's own floor for RSA keys."""

_PROPOSAL_ID: Final = re.compile(PROPOSAL_ID_PATTERN)
_REVIEWER_NAME: Final = re.compile(REVIEWER_NAME_PATTERN)
_SHA256_HEX: Final = re.compile(r"^[0-9a-f]{64}$")
SIGNED_AT_FORMAT: Final = "%Y-%m-%dT%H:%M:%SZ"
"""When a statement was signed: UTC, in whole seconds (`2026-11-30T09:00:00Z`)."""
_SIGNED_AT: Final = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")


class KeyFileError(SigningError):
    """A key file that cannot be used: missing, readable by others, encrypted, or not a key."""


class BadStatement(SigningError):
    """Bytes that are not a canonical decision statement."""


class BadSignature(SigningError):
    """A signature that is malformed, made in another namespace, or does not verify."""


# --- the statement -----------------------------------------------------------------------------


@dataclass(frozen=True)
class DecisionStatement:
    """What a reviewer signs: one decision on one revision of one plan, by name, at a time.

    The bytes signed are the RFC 8785 JSON of these fields plus `format`; `parse` accepts only bytes
    that are exactly that encoding, so a statement has one byte form and nothing rides along unsigned.
    """

    proposal_id: str
    revision: int
    plan_sha256: str
    decision: DecisionKind
    reviewer: str
    signed_at: str

    def __post_init__(self) -> None:
        _check_statement_fields(self)

    def to_json(self) -> dict[str, Any]:
        return {
            "format": STATEMENT_FORMAT,
            "proposal_id": self.proposal_id,
            "revision": self.revision,
            "plan_sha256": self.plan_sha256,
            "decision": self.decision,
            "reviewer": self.reviewer,
            "signed_at": self.signed_at,
        }

    def to_bytes(self) -> bytes:
        return canonical_json(self.to_json())

    @classmethod
    def parse(cls, data: bytes | str) -> DecisionStatement:
        raw = data.encode() if isinstance(data, str) else data
        if len(raw) > MAX_STATEMENT_BYTES:
            raise BadStatement(f"statement: {len(raw):,} bytes; at most {MAX_STATEMENT_BYTES:,}", "statement")
        try:
            value = json_text.loads(raw)
        except ValueError as error:
            raise BadStatement(f"statement: not JSON ({error})", "statement") from error
        if not isinstance(value, dict):
            raise BadStatement("statement: not a JSON object", "statement")
        expected = {"format", "proposal_id", "revision", "plan_sha256", "decision", "reviewer", "signed_at"}
        for key in sorted(expected - value.keys()):
            raise BadStatement(f"statement.{key}: missing", f"statement.{key}")
        for key in sorted(value.keys() - expected):
            raise BadStatement(f"statement.{key}: not a field of {STATEMENT_FORMAT}", f"statement.{key}")
        if value["format"] != STATEMENT_FORMAT:
            raise BadStatement(f"statement.format: must be {STATEMENT_FORMAT!r}", "statement.format")
        statement = cls(
            proposal_id=value["proposal_id"],
            revision=value["revision"],
            plan_sha256=value["plan_sha256"],
            decision=value["decision"],
            reviewer=value["reviewer"],
            signed_at=value["signed_at"],
        )
        if statement.to_bytes() != raw:
            raise BadStatement(
                "statement: not in RFC 8785 canonical form (sorted keys, no spaces)", "statement"
            )
        return statement

    @classmethod
    def now(
        cls,
        proposal_id: str,
        revision: int,
        plan_sha256: str,
        decision: DecisionKind,
        reviewer: str,
        clock: datetime | None = None,
    ) -> DecisionStatement:
        """A statement signed at `clock` (now by default), in whole seconds, UTC."""
        moment = (clock or datetime.now(UTC)).astimezone(UTC)
        return cls(proposal_id, revision, plan_sha256, decision, reviewer, moment.strftime(SIGNED_AT_FORMAT))

    def names(self, proposal_id: str, revision: int, plan_sha256: str, decision: DecisionKind) -> str | None:
        """None when the statement is about exactly this decision; otherwise what differs."""
        for field, mine, theirs in (
            ("proposal_id", self.proposal_id, proposal_id),
            ("revision", self.revision, revision),
            ("plan_sha256", self.plan_sha256, plan_sha256),
            ("decision", self.decision, decision),
        ):
            if mine != theirs:
                return f"statement.{field} is {mine!r}, not {theirs!r}"
        return None


def _check_statement_fields(statement: DecisionStatement) -> None:
    def bad(field: str, problem: str) -> BadStatement:
        return BadStatement(f"statement.{field}: {problem}", f"statement.{field}")

    if not isinstance(statement.proposal_id, str) or not _PROPOSAL_ID.match(statement.proposal_id):
        raise bad("proposal_id", "must match [A-Za-z0-9._-]{1,128}")
    revision = statement.revision
    if not isinstance(revision, int) or isinstance(revision, bool) or not 1 <= revision <= 2**53 - 1:
        raise bad("revision", "must be an integer from 1")
    if not isinstance(statement.plan_sha256, str) or not _SHA256_HEX.match(statement.plan_sha256):
        raise bad("plan_sha256", "must be 64 lowercase hex digits")
    if statement.decision not in ("approve", "reject", "request_changes"):
        raise bad("decision", "must be 'approve', 'reject' or 'request_changes'")
    if not isinstance(statement.reviewer, str) or not _REVIEWER_NAME.match(statement.reviewer):
        raise bad("reviewer", "must be a reviewer's name: 1 to 254 of [A-Za-z0-9._%+@-]")
    if not isinstance(statement.signed_at, str) or not _SIGNED_AT.match(statement.signed_at):
        raise bad("signed_at", "must be a UTC time like 2026-11-30T09:00:00Z")
    try:
        datetime.strptime(statement.signed_at, SIGNED_AT_FORMAT)
    except ValueError as error:
        raise bad("signed_at", "is not a real date and time") from error


# --- public keys -------------------------------------------------------------------------------


@dataclass(frozen=True)
class PublicKey:
    """An SSH public key: its wire blob (what SSHSIG and the agent name it by) and its type."""

    key_type: str
    blob: bytes

    @classmethod
    def from_blob(cls, blob: bytes, field: str = "key") -> PublicKey:
        try:
            key_type = WireReader(blob, "the public key").text()
        except WireError as error:
            raise SigningError(f"{field}: {error}", field) from error
        key = cls(key_type, blob)
        key.verifying_key(field)  # refuses unsupported types and malformed blobs now, not at verify time
        return key

    @classmethod
    def from_openssh(cls, line: str, field: str = "key") -> PublicKey:
        """From `ssh-ed25519 AAAA... comment` (a `.pub` file's line)."""
        parts = line.strip().split()
        if len(parts) < 2:
            raise SigningError(f"{field}: not an SSH public key (expected `TYPE BASE64 [COMMENT]`)", field)
        try:
            blob = base64.b64decode(parts[1], validate=True)
        except ValueError as error:
            raise SigningError(f"{field}: the key's base64 is damaged", field) from error
        key = cls.from_blob(blob, field)
        if key.key_type != parts[0]:
            raise SigningError(f"{field}: says {parts[0]} but holds a {key.key_type} key", field)
        return key

    @classmethod
    def from_file(cls, path: Path) -> PublicKey:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise KeyFileError(f"cannot read the public key {path}: {_reason(error)}") from error
        return cls.from_openssh(text, str(path))

    def openssh(self) -> str:
        """`TYPE BASE64`, the form of a `.pub` file and an allowed-signers line."""
        return f"{self.key_type} {base64.b64encode(self.blob).decode()}"

    @property
    def fingerprint(self) -> str:
        """`SHA256:...`, as `ssh-keygen -l` and `ssh-add -l` print it."""
        digest = base64.b64encode(hashlib.sha256(self.blob).digest()).decode().rstrip("=")
        return f"SHA256:{digest}"

    def verifying_key(self, field: str = "key") -> VerifyingKey:
        from cryptography.exceptions import UnsupportedAlgorithm
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

        if self.key_type not in SUPPORTED_KEY_TYPES:
            raise SigningError(
                f"{field}: {self.key_type} keys are not supported (use ed25519, RSA or ECDSA)", field
            )
        try:
            loaded = serialization.load_ssh_public_key(self.openssh().encode())
        except (ValueError, UnsupportedAlgorithm) as error:
            raise SigningError(f"{field}: a malformed {self.key_type} key", field) from error
        if isinstance(loaded, rsa.RSAPublicKey) and loaded.key_size < _MIN_RSA_BITS:
            raise SigningError(f"{field}: an RSA key of {loaded.key_size} bits is too small", field)
        if not isinstance(loaded, ed25519.Ed25519PublicKey | rsa.RSAPublicKey | ec.EllipticCurvePublicKey):
            raise SigningError(f"{field}: {self.key_type} keys are not supported", field)
        return loaded


# --- the SSHSIG format -------------------------------------------------------------------------


def signed_data(message: bytes, namespace: str = NAMESPACE, hash_algorithm: str = "sha512") -> bytes:
    """The bytes a key really signs for SSHSIG: the magic, the namespace and the message's hash."""
    from cryptography.hazmat.primitives import hashes

    digest = hashes.Hash(_hash(_HASHES[hash_algorithm]))
    digest.update(message)
    return (
        _SSHSIG_MAGIC
        + encode_string(namespace)
        + encode_string(b"")
        + encode_string(hash_algorithm)
        + encode_string(digest.finalize())
    )


@dataclass(frozen=True)
class SshSignature:
    """A parsed SSHSIG: who signed (the key in it), in which namespace, with which hash."""

    public_key: PublicKey
    namespace: str
    hash_algorithm: str
    signature_blob: bytes

    def to_bytes(self) -> bytes:
        return (
            _SSHSIG_MAGIC
            + encode_uint32(_SSHSIG_VERSION)
            + encode_string(self.public_key.blob)
            + encode_string(self.namespace)
            + encode_string(b"")
            + encode_string(self.hash_algorithm)
            + encode_string(self.signature_blob)
        )

    def armored(self) -> str:
        """The text `ssh-keygen -Y sign` writes, byte for byte."""
        encoded = base64.b64encode(self.to_bytes()).decode()
        lines = [encoded[start : start + _ARMOR_WIDTH] for start in range(0, len(encoded), _ARMOR_WIDTH)]
        return "\n".join([_ARMOR_BEGIN, *lines, _ARMOR_END]) + "\n"

    @classmethod
    def parse(cls, armored: str, field: str = "signature") -> SshSignature:
        def bad(problem: str) -> BadSignature:
            return BadSignature(f"{field}: {problem}", field)

        if not isinstance(armored, str):
            raise bad("must be the text of an SSH signature")
        if len(armored) > MAX_SIGNATURE_CHARS:
            raise bad(f"{len(armored):,} characters; at most {MAX_SIGNATURE_CHARS:,}")
        lines = armored.strip().splitlines()
        if len(lines) < 3 or lines[0].strip() != _ARMOR_BEGIN or lines[-1].strip() != _ARMOR_END:
            raise bad(f"not an SSH signature (expected {_ARMOR_BEGIN} ... {_ARMOR_END})")
        try:
            raw = base64.b64decode("".join(line.strip() for line in lines[1:-1]), validate=True)
        except ValueError as error:
            raise bad("the signature's base64 is damaged") from error
        reader = WireReader(raw, "the signature")
        try:
            if reader.take(len(_SSHSIG_MAGIC)) != _SSHSIG_MAGIC:
                raise bad("not an SSHSIG blob (the magic is missing)")
            version = reader.uint32()
            if version != _SSHSIG_VERSION:
                raise bad(f"SSHSIG version {version}; only version 1 is known")
            key_blob = reader.string()
            namespace = reader.text()
            reader.string()  # reserved: OpenSSH ignores its content, and so must we to agree with it
            hash_algorithm = reader.text()
            signature_blob = reader.string()
            reader.expect_end()
        except WireError as error:
            raise bad(str(error)) from error
        if hash_algorithm not in _HASHES:
            raise bad(f"hash {hash_algorithm!r}; only sha256 and sha512 are allowed")
        return cls(PublicKey.from_blob(key_blob, field), namespace, hash_algorithm, signature_blob)

    def verify(self, message: bytes, namespace: str = NAMESPACE, field: str = "signature") -> PublicKey:
        """The signing key when this is a valid signature over `message` in `namespace`; else `BadSignature`.

        Says nothing about whether the key is trusted: the caller holds it against registered keys
        or an allowed-signers file.
        """
        from cryptography.exceptions import InvalidSignature

        if self.namespace != namespace:
            raise BadSignature(f"{field}: made for namespace {self.namespace!r}, not {namespace!r}", field)
        try:
            reader = WireReader(self.signature_blob, "the signature")
            signature_format = reader.text()
            signature = reader.string()
            reader.expect_end()
        except WireError as error:
            raise BadSignature(f"{field}: {error}", field) from error
        data = signed_data(message, namespace, self.hash_algorithm)
        key = self.public_key.verifying_key(field)
        try:
            _verify_raw(key, self.public_key.key_type, signature_format, signature, data)
        except (InvalidSignature, WireError, ValueError) as error:
            raise BadSignature(f"{field}: does not verify for this statement and key", field) from error
        return self.public_key


def _verify_raw(
    key: VerifyingKey, key_type: str, signature_format: str, signature: bytes, data: bytes
) -> None:
    """Raises when `signature` (of `signature_format`) is not `key`'s over `data`."""
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
    from cryptography.hazmat.primitives.asymmetric.utils import encode_dss_signature

    if isinstance(key, ed25519.Ed25519PublicKey):
        if signature_format != "ssh-ed25519":
            raise ValueError(signature_format)
        key.verify(signature, data)
    elif isinstance(key, rsa.RSAPublicKey):
        if signature_format not in _RSA_SIGNATURE_HASHES:  # SSHSIG refuses SHA-1 `ssh-rsa`
            raise ValueError(signature_format)
        key.verify(signature, data, padding.PKCS1v15(), _hash(_RSA_SIGNATURE_HASHES[signature_format]))
    else:
        if signature_format != key_type:
            raise ValueError(signature_format)
        reader = WireReader(signature, "the ECDSA signature")
        r, s = reader.mpint(), reader.mpint()
        reader.expect_end()
        key.verify(encode_dss_signature(r, s), data, ec.ECDSA(_hash(_ECDSA_HASHES[key_type])))


# --- signing -----------------------------------------------------------------------------------


class Signer(Protocol):
    """Something that signs with one SSH key: the agent holding it, or its private key file."""

    @property
    def public_key(self) -> PublicKey: ...

    def sign_blob(self, data: bytes) -> bytes:
        """The SSH signature blob (`string format, string signature`) over `data`."""
        ...


class AgentSigner:
    """Signs through the ssh-agent at `SSH_AUTH_SOCK`; the private key never touches this host."""

    def __init__(self, public_key: PublicKey, environ: dict[str, str] | None = None) -> None:
        self._public_key = public_key
        self._environ = environ

    @property
    def public_key(self) -> PublicKey:
        return self._public_key

    def sign_blob(self, data: bytes) -> bytes:
        key = self._public_key
        flags = SSH_AGENT_RSA_SHA2_512 if key.key_type == "ssh-rsa" else 0
        with AgentConnection(agent_socket_path(self._environ)) as agent:
            if key.blob not in {blob for blob, _comment in agent.identities()}:
                raise KeyNotInAgent(
                    f"the ssh-agent does not hold the key {key.fingerprint}: add it with `ssh-add`, "
                    "or connect with `ssh -A` from the machine that has it"
                )
            return agent.sign(key.blob, data, flags)


class KeyFileSigner:
    """Signs with an unencrypted OpenSSH private key file, refused like ssh does if others can read it."""

    def __init__(self, path: Path) -> None:
        from cryptography.hazmat.primitives import serialization

        self._path = path
        self._private_key = _load_private_key(path)
        public = self._private_key.public_key().public_bytes(
            serialization.Encoding.OpenSSH, serialization.PublicFormat.OpenSSH
        )
        self._public_key = PublicKey.from_openssh(public.decode(), str(path))

    @property
    def public_key(self) -> PublicKey:
        return self._public_key

    def sign_blob(self, data: bytes) -> bytes:
        from cryptography.hazmat.primitives import hashes
        from cryptography.hazmat.primitives.asymmetric import ec, ed25519, padding, rsa
        from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

        key = self._private_key
        if isinstance(key, ed25519.Ed25519PrivateKey):
            return encode_string("ssh-ed25519") + encode_string(key.sign(data))
        if isinstance(key, rsa.RSAPrivateKey):
            return encode_string("rsa-sha2-512") + encode_string(
                key.sign(data, padding.PKCS1v15(), hashes.SHA512())
            )
        key_type = self._public_key.key_type
        r, s = decode_dss_signature(key.sign(data, ec.ECDSA(_hash(_ECDSA_HASHES[key_type]))))
        return encode_string(key_type) + encode_string(encode_mpint(r) + encode_mpint(s))


def _hash(name: str) -> HashAlgorithm:
    """A hash of `_HASHES` (or of the key types' tables) by its class's name."""
    from cryptography.hazmat.primitives import hashes

    algorithm: HashAlgorithm = getattr(hashes, name)()
    return algorithm


def _load_private_key(path: Path) -> SigningKey:
    from cryptography.exceptions import UnsupportedAlgorithm
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa

    try:
        mode = path.stat().st_mode
        if mode & 0o077 and path.stat().st_uid == os.getuid():
            raise KeyFileError(
                f"the key file {path} is readable by others (mode {stat.S_IMODE(mode):04o}): "
                f"run `chmod 600 {path}`"
            )
        data = path.read_bytes()
    except OSError as error:
        raise KeyFileError(f"cannot read the key file {path}: {_reason(error)}") from error
    try:
        key = serialization.load_ssh_private_key(data, password=None)
    except TypeError as error:
        raise KeyFileError(
            f"the key file {path} is protected by a passphrase: add it to your agent with `ssh-add {path}` "
            f"and configure its public key ({path}.pub) instead"
        ) from error
    except (ValueError, UnsupportedAlgorithm) as error:
        raise KeyFileError(f"{path} is not an OpenSSH private key of a supported type") from error
    if not isinstance(key, ed25519.Ed25519PrivateKey | rsa.RSAPrivateKey | ec.EllipticCurvePrivateKey):
        raise KeyFileError(f"{path}: only ed25519, RSA and ECDSA keys can sign")
    return key


def signer_for(path: Path, environ: dict[str, str] | None = None) -> Signer:
    """The signer a configured key names: a public key (`.pub`) signs through the agent, as git's
    `user.signingKey` does; a private key file signs by itself."""
    try:
        head = path.read_bytes()[:64]
    except OSError as error:
        raise KeyFileError(f"cannot read the key {path}: {_reason(error)}") from error
    if head.startswith(b"-----BEGIN"):
        return KeyFileSigner(path)
    return AgentSigner(PublicKey.from_file(path), environ)


def sign(message: bytes, signer: Signer, namespace: str = NAMESPACE) -> str:
    """An armored SSHSIG over `message`, as `ssh-keygen -Y sign -n NAMESPACE` makes (sha512)."""
    try:
        signature_blob = signer.sign_blob(signed_data(message, namespace))
    except AgentError as error:
        raise SigningError(str(error)) from error
    return SshSignature(signer.public_key, namespace, "sha512", signature_blob).armored()


def sign_statement(statement: DecisionStatement, signer: Signer) -> str:
    return sign(statement.to_bytes(), signer)


def verify_with_keys(
    statement: bytes | str, signature: str, keys: Iterable[PublicKey]
) -> tuple[DecisionStatement, PublicKey]:
    """The statement and the key that signed it, when one of `keys` made a valid signature over it."""
    parsed = DecisionStatement.parse(statement)
    signed = SshSignature.parse(signature)
    signer = signed.verify(parsed.to_bytes())
    if signer.blob not in {key.blob for key in keys}:
        raise BadSignature(
            f"signature: made with the key {signer.fingerprint}, which is not registered for "
            f"{parsed.reviewer}",
            "signature",
        )
    return parsed, signer


def _reason(error: BaseException) -> str:
    if isinstance(error, OSError) and error.strerror:
        return error.strerror.lower()
    return str(error)
