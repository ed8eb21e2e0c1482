"""The options that say how to read an audit source, the same in `reviewer verify`, `reviewer run` and
`mcp-gate`, and the one place they are read: `--audit KIND:LOCATION`, `--audit-field NAME=FIELD`
(where a JSON lines log keeps a row's field) and `--audit-header` (a credential for a URL source, from
`env:` or `file:`, never the command line). Light on purpose: every command registers through here
when `reviewer --help` starts, so the readers are imported only when an option is read."""

from __future__ import annotations

import argparse
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from reviewer.audit.registry import AuditSource


class BadAuditOption(ValueError):
    """An `--audit`, `--audit-field` or `--audit-header` that cannot be read; the message says which
    and what to write instead."""


def audit_option(
    value: str | None,
    fields: Iterable[str],
    headers: Mapping[str, str],
    *,
    stdin_is: str | None = None,
) -> AuditSource | None:
    """`--audit KIND:LOCATION` as the source to read, by `--audit-field`s and `headers` (from
    `audit_headers`); None without `--audit`. `stdin_is` says what the command's standard input already
    is, and then `-` is refused."""
    from reviewer.audit.registry import BadAuditSource, audit_source

    fields = list(fields)
    if not value:
        if fields or headers:
            raise BadAuditOption("--audit-field and --audit-header read an --audit KIND:LOCATION; name one")
        return None
    try:
        return audit_source(value, field_mapping(fields), headers, stdin_is=stdin_is)
    except BadAuditSource as error:
        raise BadAuditOption(str(error)) from None


def audit_headers(specs: Iterable[str], environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Each `--audit-header 'NAME: [PREFIX ]env:VAR|file:PATH'` as a header and its secret."""
    from reviewer.audit.inputs import AuditSourceUnreadable, credential_header

    try:
        return dict(credential_header(spec, environ) for spec in specs)
    except AuditSourceUnreadable as error:
        raise BadAuditOption(str(error)) from None


def add_source_options(parser: argparse.ArgumentParser, use: str, *, required: bool = False) -> None:
    """Add `--audit KIND:LOCATION` (what the command does with it: `use`), `--audit-field` and
    `--audit-header` to a command."""
    parser.add_argument(
        "--audit",
        required=required,
        metavar="KIND:LOCATION",
        help="the API's audit log: api:/PATH (a run's: served by the API, read through the run's client), "
        "access-log:FILE, "
        "k8s:FILE, cloudtrail:, stripe:, jsonl:, sample:URL; LOCATION a file, a glob, a URL or - "
        f"(docs/audit-logs.md). {use}",
    )
    parser.add_argument(
        "--audit-field",
        action="append",
        default=[],
        metavar="NAME=FIELD",
        help="where the log keeps a row's field (time, method, uri, path, query, status, request_id, "
        "actor, user_agent, dry_run); dotted for nested fields; for sample:, access-log: and jsonl:",
    )
    parser.add_argument(
        "--audit-header",
        action="append",
        default=[],
        metavar="'NAME: [PREFIX ]env:VAR|file:PATH'",
        help="a header for a URL LOCATION, its secret from env:VAR or file:PATH (after an optional "
        "prefix such as Bearer), e.g. 'Authorization: Bearer env:LOG_TOKEN'",
    )


def field_mapping(texts: Iterable[str]) -> dict[str, str]:
    """Each `NAME=FIELD` as the mapping a reader takes; `BadAuditOption` for one that is not."""
    mapping: dict[str, str] = {}
    for text in texts:
        name, equals, field = text.partition("=")
        if not equals or not name.strip() or not field.strip():
            raise BadAuditOption(f"--audit-field {text[:80]!r}: write NAME=FIELD, e.g. time=ts")
        mapping[name.strip()] = field.strip()
    return mapping
