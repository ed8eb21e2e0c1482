"""Where an audit log is read from: a file, a glob of rotated files, a URL, or standard input.

Every input is streamed in chunks: a line is held whole only up to `MAX_LINE_BYTES` (a longer one is
skipped to its end and said to be unreadable), a one-document file up to `MAX_DOCUMENT_BYTES`, so
reading a log costs the same memory whatever it holds, `/dev/zero` included. Only regular files are
opened (a FIFO would block, a device never ends); standard input is read where `-` is given. A
credential for a URL comes from `env:VAR` or `file:PATH`, never from the command line, as
`reviewer run` takes its API's.
"""

from __future__ import annotations

import asyncio
import glob
import gzip
import io
import os
import stat
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit, urlunsplit

import httpx

from reviewer.audit.rows import MalformedLine
from reviewer.credential_specs import CredentialSpecError, header_sources, read_header
from reviewer.redaction import header_secrets, redact

MAX_LINE_BYTES: Final = 1024 * 1024
"""A longer line is not read: it is counted as a line that could not be read."""
MAX_DOCUMENT_BYTES: Final = 32 * 1024 * 1024
"""A one-document file (CloudTrail's `Records`, an events list) larger than this is not read."""
CHUNK_BYTES: Final = 64 * 1024

ByteStream = Callable[[], bytes]
"""The next chunk of a binary input (a file, gzip, standard input, an HTTP body); b"" at its end."""


class AuditSourceUnreadable(Exception):
    """The audit log could not be read at all: the verification says so and is not complete."""


URL_TIMEOUT_SECONDS = 30.0


@dataclass(frozen=True)
class AuditInput:
    """One audit log's location, opened when read: `path`, `glob*`, `https://...`, or `-`."""

    location: str
    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    body: bytes | None = field(default=None, repr=False)
    """The log's bytes already fetched (an `api:` log, read through the run's own client): read from
    memory, under `location`'s name."""

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

    def lines(self) -> Iterator[tuple[str, bytes] | MalformedLine]:
        """Each line (without its end) and where it is (`name:line`); a line over `MAX_LINE_BYTES` is
        a `MalformedLine`, never held."""
        for name, stream in self._streams():
            with _read_errors(name):
                for number, line in enumerate(bounded_lines(stream), start=1):
                    if line is None:
                        yield MalformedLine(f"{name}:{number}", f"longer than {MAX_LINE_BYTES:,} bytes")
                    else:
                        yield f"{name}:{number}", line.rstrip(b"\r\n")

    def documents(self) -> Iterator[tuple[str, bytes] | MalformedLine]:
        """Each file (or the URL's body, or standard input) whole: for formats that are one JSON
        document per file (CloudTrail's `Records`, an events list). Memory is one file's, not the log's,
        and a file over `MAX_DOCUMENT_BYTES` is a `MalformedLine`, read no further."""
        for name, stream in self._streams():
            with _read_errors(name):
                body = _bounded_read(stream, MAX_DOCUMENT_BYTES)
            if body is None:
                yield MalformedLine(name, f"larger than {MAX_DOCUMENT_BYTES:,} bytes")
            else:
                yield name, body

    def _streams(self) -> Iterator[tuple[str, ByteStream]]:
        if self.body is not None:
            yield self.shown, _chunks_of(io.BytesIO(self.body))
        elif self.location == "-":
            yield "stdin", _chunks_of(sys.stdin.buffer)
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
                chunks = response.iter_bytes(CHUNK_BYTES)
                yield lambda: next(chunks, b"")
        except httpx.HTTPError as error:
            raise AuditSourceUnreadable(f"{self.shown}: {error}") from None


async def fetched_through(client: httpx.AsyncClient, source: AuditInput) -> AuditInput:
    """`source` (a path on the API, `/v1/audit`) read through the run's own client, with its base URL,
    headers and auth: the same input, its bytes in memory. A redirect is not followed, whatever the
    client's own setting (the log is the API's, never another host's); a body over `MAX_DOCUMENT_BYTES`
    is not read past that, nor one that takes over `URL_TIMEOUT_SECONDS` in all to come; an answer that
    is no 200, or none, is `AuditSourceUnreadable`."""
    body = bytearray()
    try:
        async with (
            asyncio.timeout(URL_TIMEOUT_SECONDS),
            client.stream("GET", source.location, follow_redirects=False) as response,
        ):
            if response.status_code != 200:
                raise AuditSourceUnreadable(f"{source.shown}: answered {response.status_code}, not 200")
            async for chunk in response.aiter_bytes(CHUNK_BYTES):
                body += chunk
                if len(body) > MAX_DOCUMENT_BYTES:
                    raise AuditSourceUnreadable(f"{source.shown}: larger than {MAX_DOCUMENT_BYTES:,} bytes")
    except httpx.HTTPError as error:
        raise AuditSourceUnreadable(f"{source.shown}: {type(error).__name__}: {error}") from None
    except TimeoutError:
        raise AuditSourceUnreadable(
            f"{source.shown}: not read whole within {URL_TIMEOUT_SECONDS:g} s"
        ) from None
    return replace(source, body=bytes(body))


@contextmanager
def _open_file(path: Path) -> Iterator[ByteStream]:
    """A regular file's chunks (decompressed for `.gz`). Anything else is refused before a byte is read:
    opened without blocking, so a FIFO with no writer cannot hang the reader."""
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except OSError as error:
        raise AuditSourceUnreadable(f"{path}: {error.strerror or error}") from None
    mode = os.fstat(descriptor).st_mode
    if not stat.S_ISREG(mode):
        os.close(descriptor)
        raise AuditSourceUnreadable(
            f"{path}: is {_file_kind(mode)}, not a regular file; give a log file (or - for standard input)"
        )
    os.set_blocking(descriptor, True)
    with open(descriptor, "rb") as raw:
        if path.suffix == ".gz":
            with gzip.GzipFile(fileobj=raw, mode="rb") as unzipped:
                yield _chunks_of(unzipped)
        else:
            yield _chunks_of(raw)


def _file_kind(mode: int) -> str:
    kinds = (
        (stat.S_ISDIR, "a directory"),
        (stat.S_ISFIFO, "a FIFO"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
        (stat.S_ISSOCK, "a socket"),
    )
    return next((name for test, name in kinds if test(mode)), "not a file")


def _chunks_of(stream: object) -> ByteStream:
    """A binary stream's next chunk: what is there now (`read1`) up to `CHUNK_BYTES`, so a pipe's lines
    are read as they come and no read is larger than a chunk."""
    read = getattr(stream, "read1", None) or getattr(stream, "read")  # noqa: B009
    return lambda: read(CHUNK_BYTES)


def bounded_lines(next_chunk: ByteStream, limit: int = MAX_LINE_BYTES) -> Iterator[bytes | None]:
    """The lines of a chunked input, each with its end; None for a line over `limit` bytes (its end
    included), whose bytes are skipped as they come, never held."""
    pending = bytearray()
    skipping = False
    while chunk := next_chunk():
        start = 0
        while (end := chunk.find(b"\n", start)) != -1:
            if skipping:
                yield None
                skipping = False
            elif len(pending) + end - start + 1 > limit:
                pending.clear()
                yield None
            else:
                pending += chunk[start : end + 1]
                yield bytes(pending)
                pending.clear()
            start = end + 1
        if not skipping:
            pending += chunk[start:]
            if len(pending) > limit:
                pending.clear()
                skipping = True
    if skipping:
        yield None
    elif pending:
        yield bytes(pending)


def _bounded_read(next_chunk: ByteStream, limit: int) -> bytes | None:
    """The whole input, or None as soon as it passes `limit` bytes (the rest is not read)."""
    body = bytearray()
    while chunk := next_chunk():
        if len(body) + len(chunk) > limit:
            return None
        body += chunk
    return bytes(body)


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


def credential_header(spec: str, environ: Mapping[str, str] | None = None) -> tuple[str, str]:
    """`NAME: [PREFIX ]env:VAR` or `NAME: [PREFIX ]file:PATH` as a header and its value, by the rules
    every command reads a credential with (`reviewer.credential_specs`)."""
    try:
        header = read_header(spec, os.environ if environ is None else environ, "--audit-header")
    except CredentialSpecError as error:
        raise AuditSourceUnreadable(str(error)) from None
    return header.name, header.value


def credential_files(specs: Iterable[str]) -> set[str]:
    """The files `credential_header` reads for these specs: what a process the reader starts must not
    be shown."""
    return header_sources(specs)[1]


def credential_variables(specs: Iterable[str]) -> set[str]:
    """The environment variables `credential_header` reads for these specs: what a process the reader
    starts must not be given."""
    return header_sources(specs)[0]
