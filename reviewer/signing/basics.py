"""What bounding or refusing a signed decision needs without the cryptography that signs and checks
it: the sizes a signature and a statement may have on the wire, and the error a signature that
cannot be made or checked raises. The queue's messages and an unsigned decision from the shell load
only this."""

from __future__ import annotations

from typing import Final

MAX_SIGNATURE_CHARS: Final = 16 * 1024
"""Far above any key type's signature (RSA-16384 is about 5 KB armored); a bound for hostile input."""
MAX_STATEMENT_BYTES: Final = 4096


class SigningError(Exception):
    """A signature could not be made or checked; the message is one line that says why.

    `field` names what was wrong when the cause is input (`signature`, `statement.revision`), so
    the queue can answer a 4xx naming it.
    """

    def __init__(self, message: str, field: str = "") -> None:
        super().__init__(message)
        self.field = field
