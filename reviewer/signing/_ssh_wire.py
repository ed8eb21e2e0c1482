"""The SSH wire encoding (RFC 4251 `string`, `uint32`, `mpint`) shared by SSHSIG and the agent protocol.

Both the signature format and the agent speak it; one reader and one writer keep a length check
from being forgotten in one of them.
"""

from __future__ import annotations

import struct


class WireError(ValueError):
    """Bytes that do not follow the SSH wire encoding (cut short, or a length past the end)."""


def encode_string(value: bytes | str) -> bytes:
    """A length-prefixed `string` (UTF-8 for text)."""
    raw = value.encode() if isinstance(value, str) else value
    return struct.pack(">I", len(raw)) + raw


def encode_uint32(value: int) -> bytes:
    return struct.pack(">I", value)


class WireReader:
    """Reads SSH wire fields from a buffer, refusing any length that runs past its end."""

    def __init__(self, data: bytes, what: str) -> None:
        self._data = data
        self._offset = 0
        self._what = what

    def take(self, count: int) -> bytes:
        if count < 0 or self._offset + count > len(self._data):
            raise WireError(f"{self._what} is cut short")
        piece = self._data[self._offset : self._offset + count]
        self._offset += count
        return piece

    def uint32(self) -> int:
        value: int = struct.unpack(">I", self.take(4))[0]
        return value

    def byte(self) -> int:
        return self.take(1)[0]

    def string(self) -> bytes:
        return self.take(self.uint32())

    def text(self) -> str:
        try:
            return self.string().decode()
        except UnicodeDecodeError as error:
            raise WireError(f"{self._what} holds a name that is not UTF-8") from error

    def mpint(self) -> int:
        return int.from_bytes(self.string(), "big", signed=True)

    @property
    def exhausted(self) -> bool:
        return self._offset == len(self._data)

    def expect_end(self) -> None:
        if not self.exhausted:
            raise WireError(f"{self._what} has {len(self._data) - self._offset} bytes left over")


def encode_mpint(value: int) -> bytes:
    """A non-negative `mpint`: big-endian, with a leading zero byte when the top bit is set."""
    raw = value.to_bytes((value.bit_length() + 8) // 8, "big") if value else b""
    return encode_string(raw)
