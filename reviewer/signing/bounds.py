"""The sizes a signed decision may have on the wire, for whoever reads one before checking it: the
queue's messages bound a request by them without loading the cryptography that checks it."""

from __future__ import annotations

from typing import Final

MAX_SIGNATURE_CHARS: Final = 16 * 1024
"""Far above any key type's signature (RSA-16384 is about 5 KB armored); a bound for hostile input."""
MAX_STATEMENT_BYTES: Final = 4096
