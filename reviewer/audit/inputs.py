"""Where an audit log is read from: a file, a glob of rotated files, a URL, or standard input.

Every input is streamed: lines are read one at a time (gzip files too), so reading a log costs the
same memory whatever its size. A credential for a URL comes from `env:VAR` or `file:PATH`, never from
the command line, as `reviewer run` takes its API's.
"""

from __future__ import annotations

import glob
import gzip
import os
import sys
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol
from urllib.parse import urlsplit, urlunsplit

import httpx

from reviewer.redaction import header_secrets, redact


class ByteStream(Protocol):
    """A binary input read line by line, or whole: a file, gzip, standard input, an HTTP body."""

    def __iter__(self) -> Iterator[bytes]: ...

    def read(self) -> bytes: ...


class AuditSourceUnreadable(Exception):
    """The audit log could not be read at all: the verification says so and is not complete."""


URL_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class AuditInput:
    """One audit log's location, opened when read: `path`, `glob*`, `https://...`, or `-`."""

    location: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)

    @property
    def is_url(self) -> bool:
        return self.location.startswith(("http://", "https://"))

    @property
    def shown(self) -> str:
        """The location as it may be shown and reported: a URL without its query or user info, either
        of which may hold a credential."""
        if not self.is_url:
            return self.location
        parts = urlsplit(self.location)
        return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2], query="", fragment=""))

    def redacted(self, text: str) -> str:
        """`text` (an error's message, say) with every secret of this location left out: the URL as
        `shown`, and any query, query value, user info or header value it still quotes blanked."""
        if self.is_url:
            text = text.replace(self.location, self.shown)
        return redact(text, self._secrets())

    def _secrets(self) -> set[str]:
        secrets = header_secrets(self.headers)
        if self.is_url:
            parts = urlsplit(self.location)
            userinfo = parts.netloc.rpartition("@")[0]
            secrets.update((parts.query, parts.fragment, userinfo, *userinfo.split(":")))
            for pair in parts.query.split("&"):
                secrets.update((pair, pair.partition("=")[2]))
        return {secret for secret in secrets if len(secret) >= 3}

    def files(self) -> list[Path]:
        """The files a glob names, oldest first (rotated logs: `access.log.2`, `.1`, then `access.log`)."""
        if not glob.has_magic(self.location):
            return [Path(self.location)]
        found = [Path(name) for name in glob.glob(self.location)]
        if not found:
            raise AuditSourceUnreadable(f"{self.location}: no file matches")
        return sorted(found, key=lambda path: (path.stat().st_mtime, -_rotation_number(path)))

    def lines(self) -> Iterator[tuple[str, bytes]]:
        """Each line (without its end) and where it is: `name:line`."""
        for name, stream in self._streams():
            with _read_errors(name):
                for number, line in enumerate(stream, start=1):
                    yield f"{name}:{number}", line.rstrip(b"\r\n")

    def documents(self) -> Iterator[tuple[str, bytes]]:
        """Each file (or the URL's body, or standard input) whole: for formats that are one JSON
        document per file (CloudTrail's `Records`, an events list). Memory is one file's, not the log's."""
        for name, stream in self._streams():
            with _read_errors(name):
                body = stream.read()
            yield name, body

    def _streams(self) -> Iterator[tuple[str, ByteStream]]:
        if self.location == "-":
            yield "stdin", sys.stdin.buffer
        elif self.is_url:
            with self._url_stream() as stream:
                yield self.shown, stream
        else:
            for path in self.files():
                with _open_file(path) as stream:
                    yield str(path), stream

    @contextmanager
    def _url_stream(self) -> Iterator[ByteStream]:
        try:
            with (
                httpx.Client(timeout=URL_TIMEOUT_SECONDS, follow_redirects=False) as client,
                client.stream("GET", self.location, headers=dict(self.headers)) as response,
            ):
                if response.status_code != 200:
                    raise AuditSourceUnreadable(f"{self.shown}: answered {response.status_code}, not 200")
                yield _IterStream(response.iter_bytes())
        except httpx.HTTPError as error:
            raise AuditSourceUnreadable(f"{self.shown}: {error}") from None


@contextmanager
def _open_file(path: Path) -> Iterator[ByteStream]:
    try:
        stream = gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb")  # noqa: SIM115
    except OSError as error:
        raise AuditSourceUnreadable(f"{path}: {error.strerror or error}") from None
    with stream:
        yield stream


@contextmanager
def _read_errors(name: str) -> Iterator[None]:
    """A failure while reading (a truncated gzip file, a disk error, a connection dropped mid-body) as
    `AuditSourceUnreadable`: the log could not be read whole, so it cannot vouch for anything."""
    try:
        yield
    except (OSError, EOFError, httpx.HTTPError) as error:
        raise AuditSourceUnreadable(f"{name}: could not be read to its end ({error})") from None


def _rotation_number(path: Path) -> int:
    """`access.log.3` -> 3, `access.log.2.gz` -> 2, `access.log` -> 0: a higher number is older."""
    for part in reversed(path.name.split(".")):
        if part.isdigit():
            return int(part)
    return 0


class _IterStream:
    """Chunks of an HTTP body read as a binary file: line by line, or whole."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks = chunks
        self._pending = b""

    def __iter__(self) -> Iterator[bytes]:
        for chunk in self._chunks:
            self._pending += chunk
            *complete, self._pending = self._pending.split(b"\n")
            for line in complete:
                yield line + b"\n"
        if self._pending:
            yield self._pending
            self._pending = b""

    def read(self) -> bytes:
        return self._pending + b"".join(self._chunks)


def credential_header(spec: str, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """`NAME: [PREFIX ]env:VAR` or `NAME: [PREFIX ]file:PATH` as a header and its value: the secret is
    never a value on the command line, where every user of the machine can read it."""
    environ = os.environ if environ is None else environ
    name, colon, rest = spec.partition(":")
    name = name.strip()
    prefix, _, source = rest.strip().rpartition(" ")
    if not colon or not name or " " in name:
        raise AuditSourceUnreadable(f"--audit-header {name[:40]!r}: write NAME: env:VAR or NAME: file:PATH")
    if source.startswith("env:") and source[4:]:
        secret = environ.get(source[4:], "")
    elif source.startswith("file:") and source[5:]:
        try:
            secret = Path(source[5:]).read_text(encoding="utf-8").strip()
        except (OSError, UnicodeDecodeError) as error:
            raise AuditSourceUnreadable(f"--audit-header {name}: cannot read {source[5:]}: {error}") from None
    else:
        raise AuditSourceUnreadable(
            f"--audit-header {name}: give env:VAR or file:PATH (after an optional prefix such as Bearer); "
            "a value on the command line is visible to every user of the machine"
        )
    if not secret or any(character in secret for character in "\r\n\0"):
        raise AuditSourceUnreadable(f"--audit-header {name}: {source} is empty or holds a line break")
    return name, f"{prefix.strip()} {secret}" if prefix.strip() else secret


def credential_variables(specs: Iterable[str]) -> set[str]:
    """The environment variables `credential_header` reads for these specs (`NAME: [PREFIX ]env:VAR`):
    what a process the reader starts must not be given."""
    sources = (spec.partition(":")[2].strip().rpartition(" ")[2] for spec in specs)
    return {source[4:] for source in sources if source.startswith("env:") and source[4:]}
