"""OpenSSH allowed-signers files (`ssh-keygen(1)`, ALLOWED SIGNERS): who may sign, with which key.

The executor trusts this file, not the queue: it is the same file `ssh-keygen -Y verify -f` reads,
so a team keeps one list for git commit signatures and for approvals. It is read the way OpenSSH
reads it (`sshsig.c`, `misc.c`, `sshkey.c`), separator for separator, because any difference is a
line one reader sees and the other does not:
- lines end at `\\n` only (a form feed, a vertical tab, U+0085 or U+2028 are not line breaks, and a
  lone CR is not either: text after one stays on its line, most often in a key's comment); a line
  is cut at a NUL;
- the principals end at a space, tab, CR or LF, and a double quote may hold them; the options and
  the key's fields end at a space or tab only (never at NBSP or another Unicode space), and
  whatever follows the key is its comment;
- options are `cert-authority`, `namespaces="..."`, `valid-after="..."`, `valid-before="..."`
  (names in any case, values quoted), times `YYYYMMDD[HHMM[SS]]` with `Z` or `UTC` for UTC, else
  local time, normalised as `mktime` does (`20260230` is 2 March);
- principals and namespaces are pattern lists (`*`, `?`, `!negation`), matched byte by byte.
Where OpenSSH skips a line it cannot read, this reader refuses the whole file naming the line: an
executor fails closed. `cert-authority` lines name a CA; certificates are not accepted here, so
such a line never matches a plain key.
"""

from __future__ import annotations

import base64
import binascii
import calendar
import re
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import lru_cache
from pathlib import Path
from typing import Final

from reviewer.signing.passkeys import AllowedPasskeys
from reviewer.signing.sshsig import PublicKey, SigningError

_PRINCIPALS_END: Final = " \t\r\n"
"""Where the principals field ends (OpenSSH's WHITESPACE for `strdelimw`)."""
_FIELD_END: Final = " \t"
"""Where an options or key field ends (`sshkey_read`, `sshkey_advance_past_options`)."""
_C_SPACE: Final = " \t\n\v\f\r"
"""C's `isspace`: what base64 decoding (`b64_pton`) and `strptime` skip."""
_KEY_TYPES: Final = frozenset(
    {
        "ssh-ed25519",
        "ssh-rsa",
        "ssh-dss",
        "ecdsa-sha2-nistp256",
        "ecdsa-sha2-nistp384",
        "ecdsa-sha2-nistp521",
        "sk-ssh-ed25519@openssh.com",
        "sk-ecdsa-sha2-nistp256@openssh.com",
    }
)
"""Key type names OpenSSH reads at the start of a key (certificate types never match a plain key)."""
_MAX_PATTERN_BYTES: Final = 1022
"""A longer sub-pattern makes OpenSSH's `match_pattern_list` fail the whole list."""


class AllowedSignersError(ValueError):
    """An allowed-signers file that cannot be read; the message names the line."""


@dataclass(frozen=True)
class AllowedSigner:
    principals: tuple[str, ...]
    key: PublicKey
    line: int
    cert_authority: bool = False
    namespaces: tuple[str, ...] | None = None
    valid_after: int | None = None
    """Unix seconds, as OpenSSH holds it: a signature verified before it does not count."""
    valid_before: int | None = None

    def allows(self, principal: str, key: PublicKey, namespace: str, at: datetime) -> bool:
        if self.cert_authority or key.blob != self.key.blob:
            return False
        if not match_pattern_list(principal, self.principals):
            return False
        if self.namespaces is not None and not match_pattern_list(namespace, self.namespaces):
            return False
        moment = int(at.timestamp())
        if self.valid_after is not None and moment < self.valid_after:
            return False
        return not (self.valid_before is not None and moment > self.valid_before)


@dataclass(frozen=True)
class AllowedSigners:
    signers: tuple[AllowedSigner, ...] = field(default_factory=tuple)
    passkeys: AllowedPasskeys = field(default_factory=AllowedPasskeys)
    """The passkeys trusted beside the SSH keys (`--allowed-passkeys`, the file `reviewer passkey
    export` writes): a passkey's assertion counts for the reviewer it is registered to."""

    @classmethod
    def parse(cls, text: str, source: str = "allowed signers") -> AllowedSigners:
        signers = []
        for number, raw in enumerate(text.split("\n"), start=1):
            line = raw.split("\0", 1)[0]
            try:
                signer = _parse_line(line, number)
            except (AllowedSignersError, SigningError, ValueError, OverflowError) as error:
                raise AllowedSignersError(f"{source} line {number}: {error}") from error
            if signer is not None:
                signers.append(signer)
        return cls(tuple(signers))

    @classmethod
    def read(cls, path: Path) -> AllowedSigners:
        try:
            text = path.read_bytes().decode("utf-8")
        except (OSError, UnicodeDecodeError) as error:
            raise AllowedSignersError(f"cannot read the allowed-signers file {path}: {error}") from error
        return cls.parse(text, str(path))

    def allows(self, principal: str, key: PublicKey, namespace: str, at: datetime | None = None) -> bool:
        """Whether some line lets `principal` sign in `namespace` with `key` at `at` (now by default)."""
        moment = at or datetime.now(UTC)
        return any(signer.allows(principal, key, namespace, moment) for signer in self.signers)


def _parse_line(line: str, number: int) -> AllowedSigner | None:
    """One line as `parse_principals_key_and_options` reads it; None for a blank or comment line."""
    text = line.lstrip(" \t")
    if not text.strip(_PRINCIPALS_END) or text.startswith("#"):
        return None
    principals, rest = _principals_field(text)
    key = _read_key(rest)
    options: str | None = None
    if key is None:
        options, after = _options_field(rest)
        key = _read_key(after)
        if key is None:
            raise AllowedSignersError("no valid key after the principals and options")
    parsed = _SignatureOptions.parse(options)
    return AllowedSigner(
        principals=tuple(principals.split(",")),
        key=key,
        line=number,
        cert_authority=parsed.cert_authority,
        namespaces=tuple(parsed.namespaces.split(",")) if parsed.namespaces is not None else None,
        valid_after=parsed.valid_after,
        valid_before=parsed.valid_before,
    )


def _principals_field(text: str) -> tuple[str, str]:
    """OpenSSH's `strdelimw`: the first field, which a double quote (anywhere in it) may extend over
    spaces, and what follows it, leading separators skipped."""
    end = next((index for index, char in enumerate(text) if char in _PRINCIPALS_END + '"'), None)
    if end is None:
        raise AllowedSignersError("expected `PRINCIPALS [OPTIONS] KEYTYPE BASE64 [COMMENT]`")
    if text[end] == '"':
        text = text[:end] + text[end + 1 :]
        closing = text.find('"', end)
        if closing < 0:
            raise AllowedSignersError("a quote is not closed")
        return text[:closing], text[closing + 1 :].lstrip(_PRINCIPALS_END)
    return text[:end], text[end + 1 :].lstrip(_PRINCIPALS_END)


def _options_field(text: str) -> tuple[str, str]:
    """`sshkey_advance_past_options`: the options field (quotes may hold spaces, `\\"` is a quote)
    and what follows it."""
    quoted = False
    index = 0
    while index < len(text) and (quoted or text[index] not in _FIELD_END):
        if text[index] == "\\" and text[index + 1 : index + 2] == '"':
            index += 1
        elif text[index] == '"':
            quoted = not quoted
        index += 1
    if quoted:
        raise AllowedSignersError("a quote in the options is not closed")
    if index >= len(text):
        raise AllowedSignersError("no key after the principals and options")
    return text[:index], text[index + 1 :].lstrip(_FIELD_END)


def _read_key(text: str) -> PublicKey | None:
    """`sshkey_read`: `KEYTYPE BASE64`, fields ended by a space or tab, the rest a comment; None when
    the text does not start with a key of a type OpenSSH names (then it is the options field)."""
    key_type, separator, rest = _split_field(text)
    if not separator or key_type not in _KEY_TYPES:
        return None
    encoded, _separator, _comment = _split_field(rest.lstrip(_FIELD_END))
    if not encoded:
        return None
    try:
        blob = base64.b64decode(encoded.translate(_WITHOUT_C_SPACE), validate=True)
    except (binascii.Error, ValueError):
        return None
    key = PublicKey.from_blob(blob, "the key")
    if key.key_type != key_type:
        raise AllowedSignersError(f"the key says {key_type} but holds a {key.key_type} key")
    return key


_WITHOUT_C_SPACE: Final = str.maketrans("", "", _C_SPACE)


def _split_field(text: str) -> tuple[str, str, str]:
    """(the field up to the first space or tab, the separator or "", the rest)."""
    end = next((index for index, char in enumerate(text) if char in _FIELD_END), None)
    if end is None:
        return text, "", ""
    return text[:end], text[end], text[end + 1 :]


@dataclass
class _SignatureOptions:
    """`sshsigopt_parse`: comma-separated options, names in any case, values in double quotes."""

    cert_authority: bool = False
    namespaces: str | None = None
    valid_after: int | None = None
    valid_before: int | None = None

    @classmethod
    def parse(cls, text: str | None) -> _SignatureOptions:
        options = cls()
        if not text:
            return options
        position = 0
        while position < len(text) and text[position] not in _FIELD_END:
            rest = text[position:]
            lowered = rest.lower()
            if lowered.startswith("cert-authority"):
                options.cert_authority = True
                position += len("cert-authority")
            elif lowered.startswith("namespaces="):
                if options.namespaces is not None:
                    raise AllowedSignersError('more than one "namespaces" option')
                options.namespaces, used = _dequote(rest[len("namespaces=") :])
                position += len("namespaces=") + used
            elif lowered.startswith(("valid-after=", "valid-before=")):
                name = lowered.split("=", 1)[0]
                attribute = name.replace("-", "_")
                if getattr(options, attribute) is not None:
                    raise AllowedSignersError(f'more than one "{name}" option')
                value, used = _dequote(rest[len(name) + 1 :])
                setattr(options, attribute, _parse_time(value, name))
                position += len(name) + 1 + used
            else:
                raise AllowedSignersError(f"unsupported option at {rest[:40]!r}")
            if position >= len(text) or text[position] in _FIELD_END:
                break
            if text[position] != ",":
                raise AllowedSignersError(f"unknown option at {text[position:][:40]!r}")
            position += 1
            if position >= len(text):
                raise AllowedSignersError("the options end in a comma")
        if (
            options.valid_after is not None
            and options.valid_before is not None
            and options.valid_before <= options.valid_after
        ):
            raise AllowedSignersError("valid-before is not after valid-after")
        return options


def _dequote(text: str) -> tuple[str, int]:
    """`opt_dequote`: a value that must open with `"`, `\\"` a literal quote; (value, characters used)."""
    if not text.startswith('"'):
        raise AllowedSignersError(f"an option value must be in double quotes: {text[:40]!r}")
    value: list[str] = []
    index = 1
    while index < len(text) and text[index] != '"':
        if text[index] == "\\" and text[index + 1 : index + 2] == '"':
            index += 1
        value.append(text[index])
        index += 1
    if index >= len(text):
        raise AllowedSignersError("an option value's quote is not closed")
    return "".join(value), index + 1


_TIME_FIELDS: Final = {
    8: ((0, 4, 0, 9999), (4, 6, 1, 12), (6, 8, 1, 31)),
    12: ((0, 4, 0, 9999), (4, 6, 1, 12), (6, 8, 1, 31), (8, 10, 0, 23), (10, 12, 0, 59)),
    14: (
        (0, 4, 0, 9999),
        (4, 6, 1, 12),
        (6, 8, 1, 31),
        (8, 10, 0, 23),
        (10, 12, 0, 59),
        (12, 14, 0, 61),
    ),
}
"""`parse_absolute_time`'s layouts: each field's slice and the range `strptime` accepts for it."""
_NUMBER: Final = re.compile(f"[{re.escape(_C_SPACE)}]*([0-9]+)")


def _parse_time(value: str, option: str) -> int:
    """`parse_absolute_time`: Unix seconds; `Z`/`UTC` (any case) for UTC, else local time without
    daylight saving (OpenSSH zeroes `tm_isdst`); out-of-range days and seconds roll over."""
    utc = False
    digits = value
    if len(value) > 1 and value[-1] in "zZ":
        utc, digits = True, value[:-1]
    elif len(value) > 3 and value[-3:].lower() == "utc":
        utc, digits = True, value[:-3]
    layout = _TIME_FIELDS.get(len(digits))
    problem = AllowedSignersError(f"the {option} time {value!r} is not YYYYMMDD[HHMM[SS]][Z]")
    if layout is None:
        raise problem
    numbers = []
    for start, end, lowest, highest in layout:
        match = _NUMBER.fullmatch(digits[start:end])
        if match is None or not lowest <= int(match.group(1)) <= highest:
            raise problem
        numbers.append(int(match.group(1)))
    year, month, day, hour, minute, second = (*numbers, 0, 0, 0)[:6]
    try:
        if utc:
            seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
        else:
            seconds = int(time.mktime((year, month, day, hour, minute, second, 0, 0, 0)))
    except (ValueError, OverflowError):
        raise problem from None
    if seconds <= 0:
        raise problem
    return seconds


def match_pattern_list(name: str, patterns: tuple[str, ...]) -> bool:
    """OpenSSH's `match_pattern_list`, on UTF-8 bytes: true when some pattern matches and no
    `!pattern` does."""
    subject = name.encode()
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        body = (pattern[1:] if negated else pattern).encode()
        if len(body) > _MAX_PATTERN_BYTES:
            return False
        if _pattern_regex(body).fullmatch(subject):
            if negated:
                return False
            matched = True
    return matched


@lru_cache(maxsize=256)
def _pattern_regex(pattern: bytes) -> re.Pattern[bytes]:
    parts = (b".*" if byte == b"*" else b"." if byte == b"?" else re.escape(byte) for byte in _bytes(pattern))
    return re.compile(b"".join(parts), re.S)


def _bytes(pattern: bytes) -> list[bytes]:
    return [pattern[index : index + 1] for index in range(len(pattern))]
