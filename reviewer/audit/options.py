"""The options that say how to read an audit source, the same in `reviewer verify`, `reviewer run` and
`mcp-gate`: `--audit-field NAME=FIELD` (where a JSON lines log keeps a row's field) and `--audit-header`
(a credential for a URL source, from `env:` or `file:`, never the command line). Light on purpose:
every command registers through here when `reviewer --help` starts."""

from __future__ import annotations

import argparse
from collections.abc import Iterable


class BadAuditOption(ValueError):
    """An `--audit-field` that is not `NAME=FIELD`."""


def add_source_options(parser: argparse.ArgumentParser) -> None:
    """Add `--audit-field` and `--audit-header` to a command that takes `--audit KIND:LOCATION`."""
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
