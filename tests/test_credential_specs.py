"""One set of rules for a credential a command is told where to find: `reviewer run`'s headers and
`reviewer verify`'s and `mcp-gate`'s `--audit-header` refuse the same specs in the same words, and read
the same ones to the same header."""

from __future__ import annotations

from pathlib import Path

import pytest

from reviewer.audit.inputs import (
    AuditSourceUnreadable,
    credential_files,
    credential_header,
    credential_variables,
)
from reviewer.run.errors import RunRefused
from reviewer.run.options import read_credentials

ENVIRON = {"API_TOKEN": "s3cret", "BROKEN": "two\nlines"}


@pytest.mark.parametrize(
    ("spec", "said"),
    [
        ("Authorization: Bearer s3cret", "visible to every user"),
        ("Authorization: env:MISSING", "MISSING is not set"),
        ("Authorization: file:/nonexistent/key", "cannot read"),
        ("Host: env:API_TOKEN", "NAME: env:VAR"),
        ("Connection: env:API_TOKEN", "NAME: env:VAR"),
        ("Transfer-Encoding: env:API_TOKEN", "NAME: env:VAR"),
        ("Bad Name: env:API_TOKEN", "NAME: env:VAR"),
        ("no colon here", "NAME: env:VAR"),
        ("X-Key: env:BROKEN", "line break"),
    ],
)
def test_every_reader_refuses_the_same_spec_in_the_same_words(spec: str, said: str) -> None:
    with pytest.raises(RunRefused, match=said) as by_run:
        read_credentials([spec], ENVIRON, "--audit-header")
    with pytest.raises(AuditSourceUnreadable, match=said) as by_verify:
        credential_header(spec, ENVIRON)
    assert str(by_run.value) == str(by_verify.value)


def test_every_reader_reads_the_same_header(tmp_path: Path) -> None:
    secret_file = tmp_path / "key"
    secret_file.write_text("from-a-file\n")
    specs = ["Authorization: Bearer env:API_TOKEN", f"X-Api-Key: file:{secret_file}"]
    credentials = read_credentials(specs, ENVIRON)
    assert credentials.headers == dict(credential_header(spec, ENVIRON) for spec in specs)
    assert credentials.headers == {"Authorization": "Bearer s3cret", "X-Api-Key": "from-a-file"}
    assert credentials.from_env == credential_variables(specs) == {"API_TOKEN"}
    assert credentials.from_files == credential_files(specs) == {str(secret_file)}
    assert "s3cret" not in repr(credentials)
