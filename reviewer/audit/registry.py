"""Audit sources by kind: `KIND:LOCATION` names a reader and where its log is; more kinds by entry point.

A package adds a kind by declaring, in the entry point group `reviewer.audit_sources`, a callable
`(AuditInput, field_mapping) -> Iterable[AuditRow | MalformedLine]` under the kind's name, as
Harlequin's adapters plug in. The built-in kinds cannot be replaced.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field, replace
from importlib.metadata import entry_points
from typing import Final

import httpx

from reviewer.audit.cloudtrail import read_cloudtrail
from reviewer.audit.inputs import AuditInput, AuditSourceUnreadable, fetched_through
from reviewer.audit.json_lines import BadFieldMapping, read_access_log, read_jsonl, read_sample
from reviewer.audit.k8s import read_k8s
from reviewer.audit.rows import AuditRow, MalformedLine
from reviewer.audit.stripe import read_stripe

Reader = Callable[[AuditInput, Mapping[str, str]], Iterable[AuditRow | MalformedLine]]

ENTRY_POINT_GROUP: Final = "reviewer.audit_sources"
BUILT_IN: Final[Mapping[str, Reader]] = {
    "api": read_sample,
    "sample": read_sample,
    "access-log": read_access_log,
    "k8s": read_k8s,
    "cloudtrail": read_cloudtrail,
    "stripe": read_stripe,
    "jsonl": read_jsonl,
}


KEEPS_REQUEST_IDS: Final = frozenset({"api", "sample", "access-log", "k8s", "cloudtrail", "stripe"})
"""The built-in kinds whose format records each request's id: a call sent with one is found by it
alone. A `jsonl:` log, or a package's kind, may or may not keep them: the log's own entries say."""
KEEPS_ONLY_KEPT_WRITES: Final = frozenset({"api", "sample"})
"""The kinds whose log holds only the writes the API kept (the sample API's): an entry of a dry-run
request is then a write the API made, so a dry run learns how many it kept. Other logs record every
request, honoured or not."""
_CONTROL: Final = re.compile(r"[\x00-\x1f\x7f-\x9f]")
"""A character no URL's path carries: the run's client would refuse it mid-run, not at the start."""
THROUGH_THE_API: Final = "api"
"""The kind read through the run's own API client (`api:/v1/audit`): its base URL, headers and auth."""


class BadAuditSource(ValueError):
    """`--audit` names no kind this installation knows, or no location."""


def readers() -> dict[str, Reader]:
    """Every kind: the built-in ones, then those packages declare (a built-in name is not taken over)."""
    found: dict[str, Reader] = {}
    for point in entry_points(group=ENTRY_POINT_GROUP):
        if point.name not in BUILT_IN:
            found[point.name] = point.load()
    return {**found, **BUILT_IN}


@dataclass(frozen=True)
class AuditSource:
    """One audit log to read: its kind's reader, its location, the field mapping and the credential."""

    kind: str
    reader: Reader = field(repr=False)
    input: AuditInput
    mapping: Mapping[str, str] = field(default_factory=dict)

    @property
    def name(self) -> str:
        """`KIND:LOCATION` as given, without a URL's query or user info, which may hold a credential."""
        return f"{self.kind}:{self.input.shown}"

    @property
    def keeps_request_ids(self) -> bool | None:
        """Whether the kind's format records request ids; None where only the log's entries can say."""
        return True if self.kind in KEEPS_REQUEST_IDS else None

    @property
    def keeps_only_kept_writes(self) -> bool:
        """Whether an entry in this log is a write the API kept (see `KEEPS_ONLY_KEPT_WRITES`)."""
        return self.kind in KEEPS_ONLY_KEPT_WRITES

    async def ready(self, client: httpx.AsyncClient | None) -> AuditSource:
        """This source as it can be read now: an `api:` log fetched through `client` (its bytes in
        memory, read again at each call), any other as it is. `AuditSourceUnreadable` without a client."""
        if self.kind != THROUGH_THE_API:
            return self
        if client is None:
            raise AuditSourceUnreadable(f"{self.name}: is read through the API's client, and none was given")
        return replace(self, input=await fetched_through(client, self.input))

    def rows(self) -> Iterator[AuditRow | MalformedLine]:
        """The log's rows, streamed; `AuditSourceUnreadable` when it cannot be read at all (an `api:`
        log not yet fetched through a run's client, `ready`, included)."""
        if self.kind == THROUGH_THE_API and self.input.body is None:
            raise AuditSourceUnreadable(
                f"{self.name}: is read through a run's own API client; here, give sample:URL of the same log"
            )
        try:
            yield from self.reader(self.input, self.mapping)
        except (BadFieldMapping, AuditSourceUnreadable) as error:
            raise AuditSourceUnreadable(self.input.redacted(str(error))) from None


def audit_source(
    spec: str,
    mapping: Mapping[str, str] | None = None,
    headers: Mapping[str, str] | None = None,
    *,
    stdin_is: str | None = None,
) -> AuditSource:
    """`KIND:LOCATION` (LOCATION a file, a glob, a URL or `-`) as a source to read. `stdin_is` says
    what a command's standard input already is, and then `-` is refused: a log there would be read
    from under it."""
    kind, colon, location = spec.partition(":")
    known = readers()
    if not colon or not location or spec.startswith("/"):
        hint = f" (api:{spec[:80]} for a log the API serves itself)" if spec.startswith("/") else ""
        raise BadAuditSource(
            f"--audit {spec[:80]!r}: write KIND:LOCATION{hint}, KIND one of {', '.join(known)}"
        )
    if kind not in known:
        hint = (
            f" (sample:{spec[:80]} for a URL in the sample API's shape)" if kind in ("http", "https") else ""
        )
        raise BadAuditSource(f"--audit {kind[:40]!r}: no such kind{hint}; the kinds are {', '.join(known)}")
    if kind == THROUGH_THE_API and (not location.startswith("/") or location.startswith("//")):
        raise BadAuditSource(
            f"--audit api:{location[:80]!r}: give the log's path on the API (api:/v1/audit); it is read "
            "through the run's own client, with the API's credential, so it names no other host"
        )
    if kind == THROUGH_THE_API and (control := _CONTROL.search(location)):
        raise BadAuditSource(
            f"--audit api:{location[:80]!r}: the path holds a control character (U+{ord(control[0]):04X}), "
            "which no URL carries; give the log's path as the API serves it"
        )
    if kind == THROUGH_THE_API and headers:
        raise BadAuditSource(
            "--audit-header: an api: log is read with the API's own credential (--api-header, --api-auth); "
            "a header of its own belongs to a URL, sample:URL"
        )
    if location == "-" and stdin_is is not None:
        raise BadAuditSource(
            f"--audit {kind[:40]}:-: standard input is {stdin_is}, so the log cannot be read from it; "
            "give it as a file, a glob or a URL"
        )
    return AuditSource(kind, known[kind], AuditInput(location, dict(headers or {})), dict(mapping or {}))
