"""A passkey played in the test process: an ES256 key (its COSE form by `cbor2`, as an authenticator
gives it), signing WebAuthn assertions with the flags, counter, origin and RP id a test asks for."""

from __future__ import annotations

import base64
import hashlib
import json
import struct

import cbor2
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec

from reviewer.signing.passkeys import PasskeyAssertion, RegisteredPasskey

ORIGIN = "https://queue.example"
USER_PRESENT, USER_VERIFIED = 0x01, 0x04


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode()


class Authenticator:
    """One ES256 passkey for `queue.example`, signing what it is asked, flags and counter as told."""

    def __init__(self, credential_id: bytes = b"credential-one") -> None:
        self.key = ec.generate_private_key(ec.SECP256R1())
        self.credential_id = credential_id
        numbers = self.key.public_key().public_numbers()
        self.cose = cbor2.dumps(
            {1: 2, 3: -7, -1: 1, -2: numbers.x.to_bytes(32, "big"), -3: numbers.y.to_bytes(32, "big")}
        )

    def registered(self, reviewer: str = "alice", origin: str = ORIGIN) -> RegisteredPasskey:
        return RegisteredPasskey(
            reviewer, b64url(self.credential_id), b64url(self.cose), "queue.example", origin
        )

    def assert_over(
        self,
        statement: bytes,
        *,
        flags: int = USER_PRESENT | USER_VERIFIED,
        counter: int = 1,
        origin: str = ORIGIN,
        rp_id: str = "queue.example",
    ) -> PasskeyAssertion:
        authenticator_data = (
            hashlib.sha256(rp_id.encode()).digest() + bytes([flags]) + struct.pack(">I", counter)
        )
        client_data = json.dumps(
            {
                "type": "webauthn.get",
                "challenge": b64url(hashlib.sha256(statement).digest()),
                "origin": origin,
                "crossOrigin": False,
            }
        ).encode()
        signature = self.key.sign(
            authenticator_data + hashlib.sha256(client_data).digest(), ec.ECDSA(hashes.SHA256())
        )
        return PasskeyAssertion(
            b64url(self.credential_id), b64url(authenticator_data), b64url(client_data), b64url(signature)
        )
