"""The queue as a WebAuthn relying party: its origin and RP id, and the registration ceremony (the
`webauthn` library's options and checks; user verification always required, no attestation asked)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

from webauthn import generate_registration_options, options_to_json, verify_registration_response
from webauthn.helpers import bytes_to_base64url
from webauthn.helpers.exceptions import InvalidRegistrationResponse
from webauthn.helpers.structs import (
    AuthenticatorSelectionCriteria,
    ResidentKeyRequirement,
    UserVerificationRequirement,
)

from reviewer.signing.passkeys import BadAssertion, RegisteredPasskey

LOOPBACK_HOST = "localhost"
"""Where a browser allows WebAuthn over plain HTTP: this machine, by name (an address is no RP id)."""
DEFAULT_PORTS = {"https": 443, "http": 80}
"""Ports a browser leaves out of the origin it reports."""


class BadOrigin(ValueError):
    """A `--web-origin` a browser would not run passkeys on; the message says what to give."""


@dataclass(frozen=True)
class RelyingParty:
    """`origin` exactly as the browser reports it (`https://queue.example`); the RP id is its host."""

    origin: str

    @classmethod
    def parse(cls, text: str) -> RelyingParty:
        parts = urlsplit(text.strip())
        loopback = parts.hostname == LOOPBACK_HOST
        if (
            parts.scheme not in ("https", "http")
            or not parts.hostname
            or (parts.scheme == "http" and not loopback)
            or parts.path not in ("", "/")
            or parts.query
            or parts.fragment
            or parts.username is not None
        ):
            raise BadOrigin(
                f"--web-origin {text!r}: give the page's origin, https://HOST[:PORT] (or "
                "http://localhost:PORT on one machine), with no path"
            )
        try:
            port = "" if parts.port in (None, DEFAULT_PORTS[parts.scheme]) else f":{parts.port}"
        except ValueError:
            raise BadOrigin(f"--web-origin {text!r}: the port is not a number from 0 to 65535") from None
        return cls(f"{parts.scheme}://{parts.hostname.lower()}{port}")

    @property
    def rp_id(self) -> str:
        host = urlsplit(self.origin).hostname
        assert host is not None
        return host

    def registration_options(self, reviewer: str, challenge: bytes) -> dict[str, Any]:
        """What `navigator.credentials.create()` is given, as JSON."""
        options = generate_registration_options(
            rp_id=self.rp_id,
            rp_name="reviewer queue",
            user_name=reviewer,
            challenge=challenge,
            authenticator_selection=AuthenticatorSelectionCriteria(
                resident_key=ResidentKeyRequirement.PREFERRED,
                user_verification=UserVerificationRequirement.REQUIRED,
            ),
        )
        parsed: dict[str, Any] = json.loads(options_to_json(options))
        return parsed

    def verify_registration(
        self, credential: Any, challenge: bytes, reviewer: str
    ) -> tuple[RegisteredPasskey, int]:
        """The passkey the browser created for `reviewer`, and its counter; `BadAssertion` saying why not."""
        try:
            verified = verify_registration_response(
                credential=credential,
                expected_challenge=challenge,
                expected_rp_id=self.rp_id,
                expected_origin=self.origin,
                require_user_verification=True,
            )
        except (InvalidRegistrationResponse, ValueError, KeyError, TypeError) as error:
            raise BadAssertion(f"the passkey was not registered: {error}") from None
        passkey = RegisteredPasskey(
            reviewer,
            bytes_to_base64url(verified.credential_id),
            bytes_to_base64url(verified.credential_public_key),
            self.rp_id,
            self.origin,
        )
        return passkey, int(verified.sign_count)
