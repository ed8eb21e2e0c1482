"""How every command reads a credential it is told where to find: `env:VAR` or `file:PATH`, and a header
as `NAME: [PREFIX ]env:VAR` or `NAME: [PREFIX ]file:PATH` (`Authorization: Bearer env:API_TOKEN`).

A credential is never a value on the command line, where every user of the machine reads it with `ps`.
`reviewer run` (`--api-header`, `--sandbox-header`, `--audit-header`, `--api-auth-client-secret`),
`reviewer verify` and `reviewer mcp-gate` (`--audit-header`) read them here, by one set of rules; each
turns `CredentialSpecError` into its own refusal.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final

HEADER_NAME: Final = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
"""An HTTP field name (RFC 9110's token), of a sane length."""
HOP_BY_HOP: Final = frozenset({"host", "connection", "content-length", "transfer-encoding", "te", "upgrade"})
"""Headers that belong to one connection or to the message's framing: never a credential's."""
CLEAR_TEXT: Final = (
    "a value on the command line is visible to every user of the machine; give env:VAR or file:PATH "
    "(after an optional prefix such as Bearer)"
)


class CredentialSpecError(ValueError):
    """A credential that cannot be read as written; the message names the option and what is wrong."""


@dataclass(frozen=True)
class Secret:
    """A secret and where it came from: the variable or the file a child must then not be given."""

    value: str = field(repr=False)
    variable: str | None = None
    path: str | None = None


@dataclass(frozen=True)
class SecretHeader:
    """A header whose value holds a secret (after an optional prefix such as `Bearer`)."""

    name: str
    value: str = field(repr=False)
    secret: Secret


def read_secret(source: str, environ: Mapping[str, str], what: str) -> Secret:
    """`env:VAR` or `file:PATH` as the secret it holds (`what` names the option, in what is refused)."""
    if source.startswith("env:") and source[4:]:
        value = environ.get(source[4:])
        if not value:
            raise CredentialSpecError(f"{what}: the environment variable {source[4:]} is not set")
        return Secret(value, variable=source[4:])
    if source.startswith("file:") and source[5:]:
        try:
            value = Path(source[5:]).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise CredentialSpecError(f"{what}: cannot read {source[5:]}: {error}") from None
        if not value:
            raise CredentialSpecError(f"{what}: {source[5:]} is empty")
        return Secret(value, path=source[5:])
    raise CredentialSpecError(f"{what}: {CLEAR_TEXT}")


def _parts(spec: str, option: str) -> tuple[str, str, str]:
    """`NAME: [PREFIX ]SOURCE` as its name, prefix and source, the name checked."""
    name, colon, rest = spec.partition(":")
    name = name.strip()
    if not colon or not HEADER_NAME.match(name) or name.lower() in HOP_BY_HOP:
        raise CredentialSpecError(f"{option} {name[:40]!r}...: write NAME: env:VAR or NAME: file:PATH")
    prefix, _, source = rest.strip().rpartition(" ")
    return name, prefix.strip(), source


def read_header(spec: str, environ: Mapping[str, str], option: str) -> SecretHeader:
    """`NAME: [PREFIX ]env:VAR|file:PATH` as a header and its secret (`option` names the flag)."""
    name, prefix, source = _parts(spec, option)
    secret = read_secret(source, environ, f"{option} {name}")
    value = f"{prefix} {secret.value}" if prefix else secret.value
    if any(character in value for character in "\r\n\0"):
        raise CredentialSpecError(f"{option} {name}: the value holds a line break")
    return SecretHeader(name, value, secret)


def header_sources(specs: Iterable[str]) -> tuple[set[str], set[str]]:
    """The environment variables and the files these header specs read, without reading them: what a
    process started beside the reader must not be given or shown."""
    sources = [spec.partition(":")[2].strip().rpartition(" ")[2] for spec in specs]
    variables = {source[4:] for source in sources if source.startswith("env:") and source[4:]}
    files = {source[5:] for source in sources if source.startswith("file:") and source[5:]}
    return variables, files
