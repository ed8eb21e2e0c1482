"""What `reviewer run` is told, checked before COMMAND starts: the API's URL, the credential the gate
adds, and the dry-run parameter.

A credential is never a value on the command line (every user of the machine can read it with `ps`):
`--api-header "Authorization: Bearer env:API_TOKEN"` takes it from the environment variable, which the
child then does not get, or `file:PATH` from a file.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from reviewer.run.errors import RunRefused

LOOPBACK_HOSTS = frozenset({"127.0.0.1", "::1", "localhost"})
_HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
_HOP_BY_HOP = frozenset({"host", "connection", "content-length", "transfer-encoding", "te", "upgrade"})


def check_api_url(url: str, option: str = "--api") -> str:
    """The API's base URL (or the sandbox's collection, `option` naming which) without a trailing
    slash; refused unless https, or plain http on loopback."""
    try:
        parsed = httpx.URL(url)
    except httpx.InvalidURL as error:
        raise RunRefused(f"{option} {url!r} is not a URL: {error}") from None
    if parsed.scheme not in ("http", "https") or not parsed.host:
        raise RunRefused(f"{option} {url!r}: give an http(s) URL with a host, e.g. https://api.example/v1")
    if parsed.userinfo:
        raise RunRefused(
            f"{option}: a URL holding a user or password puts the credential on the command line"
        )
    if parsed.query or parsed.fragment:
        raise RunRefused(f"{option} {url!r}: the URL has no query or fragment")
    if parsed.scheme != "https" and parsed.host not in LOOPBACK_HOSTS:
        raise RunRefused(
            f"{option} {url!r} is plain http off loopback: the credential would cross the network in clear; "
            "use https"
        )
    return str(parsed).rstrip("/")


@dataclass(frozen=True)
class Credentials:
    """The headers the gate adds to every request to the API, and where their secrets came from."""

    headers: dict[str, str] = field(default_factory=dict, repr=False)
    from_env: frozenset[str] = frozenset()
    """Environment variables the secrets were read from: the child's environment never holds them."""
    from_files: frozenset[str] = frozenset()
    """Files the secrets were read from: the sandbox hides them from the child."""
    secrets: tuple[str, ...] = field(default=(), repr=False)
    """The secrets themselves, without a prefix: a variable holding one is withheld whatever its name."""


def every_secret(*credentials: Credentials) -> Credentials:
    """The secrets of several credentials (the API's, the sandbox check's, the audit log's) as one,
    without their headers: what the child must never hold, and nothing a request could be sent with."""
    return Credentials(
        {},
        frozenset().union(*(each.from_env for each in credentials)),
        frozenset().union(*(each.from_files for each in credentials)),
        tuple(secret for each in credentials for secret in each.secrets),
    )


def read_credentials(
    specs: list[str], environ: Mapping[str, str], option: str = "--api-header"
) -> Credentials:
    """Each `NAME: [PREFIX ]env:VAR` or `NAME: [PREFIX ]file:PATH` as a header and its secret (`option`
    names the flag they came from, in what is refused: `--sandbox-header` and `--audit-header` are read
    the same way)."""
    headers: dict[str, str] = {}
    from_env: set[str] = set()
    from_files: set[str] = set()
    secrets: list[str] = []
    for spec in specs:
        name, colon, rest = spec.partition(":")
        name = name.strip()
        if not colon or not _HEADER_NAME.match(name) or name.lower() in _HOP_BY_HOP:
            raise RunRefused(f"{option} {name[:40]!r}...: write NAME: env:VAR or NAME: file:PATH")
        prefix, _, source = rest.strip().rpartition(" ")
        if source.startswith("env:") and source[4:]:
            variable = source[4:]
            secret = environ.get(variable)
            if not secret:
                raise RunRefused(f"{option} {name}: the environment variable {variable} is not set")
            from_env.add(variable)
        elif source.startswith("file:") and source[5:]:
            try:
                secret = Path(source[5:]).read_text(encoding="utf-8").strip()
            except (OSError, UnicodeDecodeError) as error:
                raise RunRefused(f"{option} {name}: cannot read {source[5:]}: {error}") from None
            if not secret:
                raise RunRefused(f"{option} {name}: {source[5:]} is empty")
            from_files.add(source[5:])
        else:
            raise RunRefused(
                f"{option} {name}: a value on the command line is visible to every user of the "
                "machine; give env:VAR or file:PATH (after an optional prefix such as Bearer)"
            )
        value = f"{prefix.strip()} {secret}" if prefix.strip() else secret
        if any(character in value for character in "\r\n\0"):
            raise RunRefused(f"{option} {name}: the value holds a line break")
        headers[name] = value
        secrets.append(secret)
    return Credentials(headers, frozenset(from_env), frozenset(from_files), tuple(secrets))


def parse_dry_run_param(text: str) -> dict[str, str]:
    """`NAME=VALUE` as the query a server dry run adds to every write."""
    name, equals, value = text.partition("=")
    if not equals or not name or not value:
        raise RunRefused(f"--dry-run-param {text!r}: write NAME=VALUE, e.g. dryRun=All")
    return {name: value}
