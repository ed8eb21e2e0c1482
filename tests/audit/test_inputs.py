"""Where a log is read from (standard input, a URL's credential never on the command line) and its kinds,
built in or added by a package's entry point."""

from __future__ import annotations

import gzip
import io
import json
import sys
from collections.abc import Iterator, Mapping
from importlib.metadata import EntryPoint
from pathlib import Path

import pytest

from reviewer.audit import registry
from reviewer.audit.inputs import (
    MAX_LINE_BYTES,
    AuditInput,
    AuditSourceUnreadable,
    bounded_lines,
    credential_header,
)
from reviewer.audit.registry import ENTRY_POINT_GROUP, BadAuditSource, audit_source
from reviewer.audit.rows import AuditRow, MalformedLine


def test_standard_input_is_read_line_by_line(monkeypatch: pytest.MonkeyPatch) -> None:
    lines = [{"time": "2026-12-02T01:00:00+00:00", "method": "POST", "uri": "/v1/x", "status": 201}] * 2
    data = "".join(json.dumps(line) + "\n" for line in lines).encode()
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    rows = list(audit_source("access-log:-").rows())
    assert [row.where for row in rows if isinstance(row, AuditRow)] == ["stdin:1", "stdin:2"]


def test_a_credential_comes_from_the_environment_or_a_file_never_the_command_line(tmp_path: Path) -> None:
    secret_file = tmp_path / "token"
    secret_file.write_text("from-file\n")
    assert credential_header("Authorization: Bearer env:LOG_TOKEN", {"LOG_TOKEN": "s3"}) == (
        "Authorization",
        "Bearer s3",
    )
    assert credential_header(f"X-Key: file:{secret_file}", {}) == ("X-Key", "from-file")
    with pytest.raises(AuditSourceUnreadable, match="visible to every user"):
        credential_header("Authorization: Bearer s3cr3t", {})
    with pytest.raises(AuditSourceUnreadable, match="UNSET is not set"):
        credential_header("Authorization: env:UNSET", {})


def test_an_unknown_kind_or_a_missing_location_is_refused_by_name() -> None:
    with pytest.raises(BadAuditSource, match="no such kind; the kinds are .*access-log"):
        audit_source("nginx:/var/log/x")
    with pytest.raises(BadAuditSource, match="write KIND:LOCATION"):
        audit_source("access-log")
    with pytest.raises(AuditSourceUnreadable, match="no file matches"):
        list(audit_source("access-log:/nonexistent/dir/*.log").rows())


def custom_reader(source: AuditInput, mapping: Mapping[str, str]) -> Iterator[AuditRow | MalformedLine]:
    """A kind a package adds: every line is a DELETE of the path it holds."""
    for where, line in source.lines():
        yield AuditRow(where, None, "DELETE", line.decode())


def test_a_package_adds_a_kind_by_entry_point_and_cannot_replace_a_built_in(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    points = [
        EntryPoint("plain-paths", f"{__name__}:custom_reader", ENTRY_POINT_GROUP),
        EntryPoint("k8s", f"{__name__}:custom_reader", ENTRY_POINT_GROUP),
    ]
    monkeypatch.setattr(registry, "entry_points", lambda group: points if group == ENTRY_POINT_GROUP else [])
    log = tmp_path / "paths.txt"
    log.write_text("/v1/a\n")
    (row,) = audit_source(f"plain-paths:{log}").rows()
    assert isinstance(row, AuditRow) and (row.method, row.path) == ("DELETE", "/v1/a")
    assert audit_source(f"k8s:{log}").reader is registry.BUILT_IN["k8s"]


def test_a_truncated_gzip_file_is_unreadable_not_a_traceback(tmp_path: Path) -> None:
    """A rotated log compressed while it was read: what was read is not the whole log, so it is said."""
    whole = gzip.compress(
        b'{"time":"2026-12-02T01:00:00+00:00","method":"POST","uri":"/x","status":201}\n' * 2000
    )
    (tmp_path / "access.log.1.gz").write_bytes(whole[: len(whole) // 2])
    with pytest.raises(AuditSourceUnreadable, match="could not be read to its end"):
        list(audit_source(f"access-log:{tmp_path}/access.log.1.gz").rows())


@pytest.mark.parametrize("chunk", [1, 2, 3, 7, 8, 9, 64])
def test_lines_are_cut_the_same_whatever_the_chunks_and_a_line_past_the_limit_is_never_held(
    chunk: int,
) -> None:
    """With a limit of 8 bytes: a line of exactly 8 (its end included) is read, one of 9 is `None`, a
    long one with no end is `None`, and the lines around them are read whole, however the input
    arrives in chunks."""
    data = b"first\n" + b"1234567\n" + b"12345678\n" + b"mid\n" + b"x" * 30 + b"\n\nlast"
    stream = io.BytesIO(data)
    lines = list(bounded_lines(lambda: stream.read(chunk), limit=8))
    assert lines == [b"first\n", b"1234567\n", None, b"mid\n", None, b"\n", b"last"]
    unended = io.BytesIO(b"ok\n" + b"y" * 20)
    assert list(bounded_lines(lambda: unended.read(chunk), limit=8)) == [b"ok\n", None]


def test_a_line_of_the_real_limit_is_read_and_one_byte_more_is_not() -> None:
    fits = b"a" * (MAX_LINE_BYTES - 1) + b"\n"
    stream = io.BytesIO(fits + b"b" * MAX_LINE_BYTES + b"\n" + b"last")
    assert list(bounded_lines(lambda: stream.read(64 * 1024))) == [fits, None, b"last"]


def test_a_source_whose_first_entry_is_no_entry_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """What `reviewer run`, `mcp-gate` and a dry run check first: a page that is no log is refused."""
    from reviewer.audit.checks import check_readable

    page = tmp_path / "index.html"
    page.write_text("<html>not a log</html>\n")
    with pytest.raises(AuditSourceUnreadable, match="its first entry does not read as one"):
        check_readable(audit_source(f"access-log:{page}"))
    log = tmp_path / "access.json"
    log.write_text('{"time": "2026-12-05T00:00:00Z", "method": "GET", "uri": "/", "status": 200}\n')
    check_readable(audit_source(f"access-log:{log}"))
