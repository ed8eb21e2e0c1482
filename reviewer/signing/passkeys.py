"""Decisions bound by a reviewer's passkey: the WebAuthn assertion over a decision statement, its one
text form (what the trail keeps in a decision's `signature`), and its check against registered
public keys, by the queue and offline by an executor (`reviewer passkey export` writes the file).

The challenge the browser signs is the SHA-256 of the statement's exact bytes (section 11's RFC 8785
JSON), so an assertion approves that one proposal, revision, digest and decision by that reviewer,
and nothing else. The ceremonies, the COSE keys and the signature are the `webauthn` library's; user
verification is always required. The library is imported where an assertion is first read or
checked: a queue that serves no review page, and an executor without passkeys, never load it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from reviewer import json_text
from reviewer.plan.proposal import canonical_json
from reviewer.signing.sshsig import DecisionStatement, SigningError

ASSERTION_FORMAT: Final = "reviewer.passkey-assertion/v1"
PASSKEYS_FORMAT: Final = "reviewer.passkeys/v1"
MAX_ASSERTION_CHARS: Final = 8 * 1024
"""Far above an assertion (authenticator data, client data, an ECDSA or RSA signature, an id)."""
MAX_PASSKEYS: Final = 10_000
"""Passkeys one file may list: a bound for a hostile file, far above a team's."""
_ASSERTION_FIELDS: Final = ("authenticator_data", "client_data_json", "credential_id", "signature")
_PASSKEY_FIELDS: Final = ("reviewer", "credential_id", "public_key", "rp_id", "origin")


class BadAssertion(SigningError):
    """An assertion that is malformed, from a passkey not registered for the reviewer, or that does
    not verify."""


def statement_challenge(statement: bytes) -> bytes:
    """What the browser is asked to sign: the SHA-256 of the statement's exact bytes."""
    return hashlib.sha256(statement).digest()


@dataclass(frozen=True)
class PasskeyAssertion:
    """What `navigator.credentials.get()` returned, each part base64url as the browser gave it."""

    credential_id: str
    authenticator_data: str
    client_data_json: str
    signature: str

    @classmethod
    def from_browser(cls, credential: Any) -> PasskeyAssertion:
        """From the JSON of a `PublicKeyCredential` (`id`, `response.authenticatorData`, ...)."""
        if not isinstance(credential, dict) or not isinstance(credential.get("response"), dict):
            raise BadAssertion("assertion: not a passkey's answer (id and response)", "assertion")
        response = credential["response"]
        return cls._checked(
            {
                "credential_id": credential.get("id"),
                "authenticator_data": response.get("authenticatorData"),
                "client_data_json": response.get("clientDataJSON"),
                "signature": response.get("signature"),
            }
        )

    @classmethod
    def parse(cls, text: str) -> PasskeyAssertion:
        """From the text `to_text` wrote (a decision's `signature`)."""
        if len(text) > MAX_ASSERTION_CHARS:
            raise BadAssertion(f"signature: {len(text):,} characters; at most {MAX_ASSERTION_CHARS:,}")
        try:
            value = json_text.loads(text.encode())
        except ValueError as error:
            raise BadAssertion(f"signature: not a passkey assertion ({error})", "signature") from None
        if not isinstance(value, dict) or value.get("format") != ASSERTION_FORMAT:
            raise BadAssertion(f"signature: not a {ASSERTION_FORMAT}", "signature")
        return cls._checked({key: value.get(key) for key in _ASSERTION_FIELDS})

    @classmethod
    def _checked(cls, fields: dict[str, Any]) -> PasskeyAssertion:
        from webauthn import base64url_to_bytes  # the library loads with the first assertion read

        for name, value in fields.items():
            if not isinstance(value, str) or not value or len(value) > MAX_ASSERTION_CHARS:
                raise BadAssertion(f"assertion.{name}: missing or not base64url text", f"assertion.{name}")
            try:
                base64url_to_bytes(value)
            except ValueError:
                raise BadAssertion(f"assertion.{name}: not base64url", f"assertion.{name}") from None
        return cls(**fields)

    def to_text(self) -> str:
        """One canonical JSON text: what the decision and the trail hold beside the statement."""
        return canonical_json({"format": ASSERTION_FORMAT, **vars(self)}).decode()

    def browser_json(self) -> dict[str, Any]:
        """The `PublicKeyCredential` JSON the `webauthn` library reads."""
        return {
            "id": self.credential_id,
            "rawId": self.credential_id,
            "type": "public-key",
            "response": {
                "authenticatorData": self.authenticator_data,
                "clientDataJSON": self.client_data_json,
                "signature": self.signature,
            },
        }


def is_passkey_assertion(signature: str) -> bool:
    """Whether a decision's `signature` is a passkey assertion (an SSHSIG is armored text)."""
    return signature.lstrip().startswith("{")


@dataclass(frozen=True)
class RegisteredPasskey:
    """A reviewer's passkey as the queue registered it: its COSE public key (base64url), and the
    relying party (`rp_id`) and page origin its assertions must name."""

    reviewer: str
    credential_id: str
    public_key: str
    rp_id: str
    origin: str

    def verify(self, statement: bytes, assertion: PasskeyAssertion, sign_count: int = 0) -> int:
        """The authenticator's new signature counter, when `assertion` is this passkey's, user
        verified, made on `origin` for `rp_id`, over `statement`'s SHA-256, with a counter past
        `sign_count` (0 offline: an executor's ledger refuses a replay); else `BadAssertion`."""
        if assertion.credential_id != self.credential_id:
            raise BadAssertion("signature: made with another passkey", "signature")
        from webauthn import base64url_to_bytes, verify_authentication_response
        from webauthn.helpers.exceptions import InvalidAuthenticationResponse

        try:
            verified = verify_authentication_response(
                credential=assertion.browser_json(),
                expected_challenge=statement_challenge(statement),
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                credential_public_key=base64url_to_bytes(self.public_key),
                credential_current_sign_count=sign_count,
                require_user_verification=True,
            )
        except InvalidAuthenticationResponse as error:
            raise BadAssertion(
                f"signature: the passkey assertion does not hold ({error})", "signature"
            ) from None
        except ValueError as error:  # a public key or a part the library cannot read
            raise BadAssertion(
                f"signature: the passkey assertion cannot be read ({error})", "signature"
            ) from None
        return int(verified.new_sign_count)

    def to_json(self) -> dict[str, str]:
        return {name: getattr(self, name) for name in _PASSKEY_FIELDS}


def verify_with_passkeys(
    statement: str, signature: str, passkeys: Iterable[RegisteredPasskey]
) -> tuple[DecisionStatement, RegisteredPasskey]:
    """The statement and the passkey that made the assertion, when it is one of `passkeys`,
    registered for the reviewer the statement names, and the assertion holds over it."""
    parsed = DecisionStatement.parse(statement)
    assertion = PasskeyAssertion.parse(signature)
    passkey = next((item for item in passkeys if item.credential_id == assertion.credential_id), None)
    if passkey is None or passkey.reviewer != parsed.reviewer:
        raise BadAssertion(
            f"signature: made with a passkey that is not registered for {parsed.reviewer}", "signature"
        )
    passkey.verify(parsed.to_bytes(), assertion)
    return parsed, passkey


class AllowedPasskeysError(ValueError):
    """A passkeys file that cannot be read; the message says where."""


@dataclass(frozen=True)
class AllowedPasskeys:
    """The passkeys an executor trusts, as `reviewer passkey export` writes them (JSON, one format)."""

    passkeys: tuple[RegisteredPasskey, ...] = ()

    @classmethod
    def parse(cls, text: str, source: str = "passkeys file") -> AllowedPasskeys:
        try:
            value = json_text.loads(text.encode())
        except ValueError as error:
            raise AllowedPasskeysError(f"{source}: not JSON ({error})") from None
        if not isinstance(value, dict) or value.get("format") != PASSKEYS_FORMAT:
            raise AllowedPasskeysError(f"{source}: not a {PASSKEYS_FORMAT} file (`reviewer passkey export`)")
        listed = value.get("passkeys")
        if not isinstance(listed, list) or len(listed) > MAX_PASSKEYS:
            raise AllowedPasskeysError(f"{source}: passkeys must be a list of at most {MAX_PASSKEYS:,}")
        passkeys = []
        for number, item in enumerate(listed, start=1):
            if not isinstance(item, dict) or any(
                not isinstance(item.get(key), str) for key in _PASSKEY_FIELDS
            ):
                raise AllowedPasskeysError(
                    f"{source}: passkey {number} must name {', '.join(_PASSKEY_FIELDS)} as text"
                )
            passkeys.append(RegisteredPasskey(**{key: item[key] for key in _PASSKEY_FIELDS}))
        return cls(tuple(passkeys))

    @classmethod
    def read(cls, path: Path) -> AllowedPasskeys:
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise AllowedPasskeysError(f"cannot read the passkeys file {path}: {error}") from None
        return cls.parse(text, str(path))

    def to_text(self) -> str:
        document = {"format": PASSKEYS_FORMAT, "passkeys": [item.to_json() for item in self.passkeys]}
        return canonical_json(document).decode() + "\n"

    def reviewers(self) -> set[str]:
        return {item.reviewer for item in self.passkeys}
