"""OpenSSH allowed-signers files (`ssh-keygen(1)`, ALLOWED SIGNERS): who may sign, with which key.

The executor trusts this file, not the queue: it is the same file `ssh-keygen -Y verify -f` reads,
so a team keeps one list for git commit signatures and for approvals. Lines are matched as OpenSSH
matches them: principals are comma-separated patterns (`*`, `?`, `!negation`), `namespaces=` limits
what a key may sign, `valid-after=` / `valid-before=` bound when. `cert-authority` lines name a CA,
and certificates are not accepted here, so such a line never matches a plain key.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Final

from reviewer.signing.sshsig import PublicKey, SigningError

_KNOWN_OPTIONS: Final = frozenset({"cert-authority", "namespaces", "valid-after", "valid-before"})


class AllowedSignersError(ValueError):
    """An allowed-signers file that cannot be read; the message names the line."""


@dataclass(frozen=True)
class AllowedSigner:
    principals: tuple[str, ...]
    key: PublicKey
    line: int
    cert_authority: bool = False
    namespaces: tuple[str, ...] | None = None
    valid_after: datetime | None = None
    valid_before: datetime | None = None

    def allows(self, principal: str, key: PublicKey, namespace: str, at: datetime) -> bool:
        if self.cert_authority or key.blob != self.key.blob:
            return False
        if not match_pattern_list(principal, self.principals):
            return False
        if self.namespaces is not None and not match_pattern_list(namespace, self.namespaces):
            return False
        if self.valid_after is not None and at < self.valid_after:
            return False
        return not (self.valid_before is not None and at > self.valid_before)


@dataclass(frozen=True)
class AllowedSigners:
    signers: tuple[AllowedSigner, ...] = field(default_factory=tuple)

    @classmethod
    def parse(cls, text: str, source: str = "allowed signers") -> AllowedSigners:
        signers = []
        for number, raw in enumerate(text.splitlines(), start=1):
            line = raw.strip()
            if not line or line.startswith("#"):
                continue
            try:
                signers.append(_parse_line(line, number))
            except (AllowedSignersError, SigningError) as error:
                raise AllowedSignersError(f"{source} line {number}: {error}") from error
        return cls(tuple(signers))

    @classmethod
    def read(cls, path: Path) -> AllowedSigners:
        try:
            text = path.read_text()
        except (OSError, UnicodeDecodeError) as error:
            raise AllowedSignersError(f"cannot read the allowed-signers file {path}: {error}") from error
        return cls.parse(text, str(path))

    def allows(self, principal: str, key: PublicKey, namespace: str, at: datetime | None = None) -> bool:
        """Whether some line lets `principal` sign in `namespace` with `key` at `at` (now by default)."""
        moment = at or datetime.now(UTC)
        return any(signer.allows(principal, key, namespace, moment) for signer in self.signers)


def _parse_line(line: str, number: int) -> AllowedSigner:
    tokens = _split(line)
    if len(tokens) < 3:
        raise AllowedSignersError("expected `PRINCIPALS [OPTIONS] KEYTYPE BASE64 [COMMENT]`")
    principals = tuple(_unquote(tokens[0]).split(","))
    if not all(principals):
        raise AllowedSignersError("an empty principal")
    options: dict[str, str | None] = {}
    rest = tokens[1:]
    if not _looks_like_key_type(rest[0]):
        options = _parse_options(rest[0])
        rest = rest[1:]
    if len(rest) < 2:
        raise AllowedSignersError("no key after the principals and options")
    key = PublicKey.from_openssh(f"{rest[0]} {rest[1]}", "the key")
    namespaces = options.get("namespaces")
    valid_after, valid_before = options.get("valid-after"), options.get("valid-before")
    return AllowedSigner(
        principals=principals,
        key=key,
        line=number,
        cert_authority="cert-authority" in options,
        namespaces=tuple(namespaces.split(",")) if namespaces is not None else None,
        valid_after=_parse_time(valid_after) if valid_after else None,
        valid_before=_parse_time(valid_before) if valid_before else None,
    )


def _looks_like_key_type(token: str) -> bool:
    return token.startswith(("ssh-", "ecdsa-", "sk-"))


def _split(line: str) -> list[str]:
    """Whitespace-separated tokens; whitespace inside double quotes does not split."""
    tokens: list[str] = []
    current: list[str] = []
    quoted = False
    for char in line:
        if char == '"':
            quoted = not quoted
        if char.isspace() and not quoted:
            if current:
                tokens.append("".join(current))
                current = []
            continue
        current.append(char)
    if quoted:
        raise AllowedSignersError("a quote is not closed")
    if current:
        tokens.append("".join(current))
    return tokens


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == token[-1] == '"':
        return token[1:-1]
    return token


def _parse_options(token: str) -> dict[str, str | None]:
    options: dict[str, str | None] = {}
    for option in re.findall(r'(?:[^,"]|"[^"]*")+', token):
        name, _equals, value = option.partition("=")
        name = name.lower()
        if name not in _KNOWN_OPTIONS:
            raise AllowedSignersError(f"unknown option {name!r}")
        options[name] = _unquote(value) if _equals else None
    return options


def _parse_time(value: str) -> datetime:
    """`YYYYMMDD[HHMM[SS]][Z]`, as OpenSSH reads it; local time unless it ends in Z."""
    utc = value.endswith("Z")
    digits = value.removesuffix("Z")
    formats = {8: "%Y%m%d", 12: "%Y%m%d%H%M", 14: "%Y%m%d%H%M%S"}
    if len(digits) not in formats or not digits.isdigit():
        raise AllowedSignersError(f"the time {value!r} is not YYYYMMDD[HHMM[SS]][Z]")
    moment = datetime.strptime(digits, formats[len(digits)])
    return moment.replace(tzinfo=UTC) if utc else moment.astimezone()


def match_pattern_list(name: str, patterns: tuple[str, ...]) -> bool:
    """OpenSSH's `match_pattern_list`: true when some pattern matches and no `!pattern` does."""
    matched = False
    for pattern in patterns:
        negated = pattern.startswith("!")
        body = pattern[1:] if negated else pattern
        if _pattern_regex(body).fullmatch(name):
            if negated:
                return False
            matched = True
    return matched


def _pattern_regex(pattern: str) -> re.Pattern[str]:
    return re.compile("".join(".*" if c == "*" else "." if c == "?" else re.escape(c) for c in pattern), re.S)
