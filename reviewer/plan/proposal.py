"""The proposal format v1: its structures, its limits, and the plan digest an approval names.

The format is declared once, as msgspec structs. A plan of 100,000 calls decodes into them in a
fraction of a second and a fraction of the memory that pydantic models would hold, which is what
lets the terminal app open such a plan at once (see docs/proposal-format.md, "Why msgspec for proposals").
pydantic remains the schema of the queue API's own messages and of the configuration.
"""

from __future__ import annotations

import codecs
import re
import urllib.parse
from collections.abc import Callable, Iterator, Sequence
from typing import Annotated, Any, Final, Literal, overload

import msgspec
import rfc8785

from reviewer.plan.bodies import BodyError, check_body
from reviewer.plan.exact_bodies import check_text
from reviewer.plan.placeholders import MARK, unresolvable_in
from reviewer.plan.request_headers import HeaderError, check_headers

FORMAT_V1: Final = "reviewer.proposal/v1"

MAX_BODY_BYTES: Final = 64 * 1024 * 1024
MAX_STRING_CHARS: Final = 1024 * 1024
MAX_DEPTH: Final = 64
MAX_CALLS: Final = 200_000
MAX_SAFE_INTEGER: Final = 2**53 - 1
"""RFC 8785 represents numbers as IEEE doubles: a larger integer would be rounded, so it is refused."""
MAX_JSON_VALUES: Final = 6_000_000
"""JSON values (numbers, strings, arrays, objects, ...) in a whole proposal. A 200,000-call plan of the
usual shape holds about 4.4 million; the cap keeps what any analysis holds per value bounded."""
MAX_CALL_VALUES: Final = 250_000
"""JSON values in one call. Two bytes of `[],` decode into about 60 bytes of Python objects, so a call
is decoded (to paint its row, check it, hash it) only when this bounds what the decoding allocates."""

PROPOSAL_ID_PATTERN: Final = r"^[A-Za-z0-9._-]{1,128}$"

Effect = Literal["create", "update", "delete", "read", "other"]
OutcomeStatus = Literal["ok", "refused", "recorded", "error", "unknown"]
"""`unknown`: the request was sent and its answer never came (a timeout or a connection dropped after
sending): the API may have performed it. Never the same as `error`, which says it was not done."""
DryRunVia = Literal["server", "fake", "transport", "record"]


class ProposalError(ValueError):
    """A proposal that cannot be accepted; the message names the source and the field."""

    def __init__(self, source: str, problem: str) -> None:
        self.source = source
        self.problem = problem
        super().__init__(f"{source}: {problem}")


class ProposalNotJSON(ProposalError):
    """Bytes that are not JSON at all (bad syntax, not UTF-8): the service answers 400, not 422."""


class Agent(msgspec.Struct, forbid_unknown_fields=True):
    name: str
    run_id: str | None = None


class Target(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    api: str
    base_url: str | None = None
    environment: str | None = None
    tools_sha256: str | None = None
    """For a tool server (an MCP upstream): the SHA-256 of the tool definitions the plan was recorded
    against. Part of the target, so the digest covers it; a run refuses a server whose tools differ."""


class SandboxProof(msgspec.Struct, forbid_unknown_fields=True):
    """The check a server dry run was proven by before it began: a create sent with the dry-run
    parameter to a collection on a sandbox copy of the API, the collection listed whole before and
    after and found unchanged, and the created item's id read back 404/410, so the API honoured the
    parameter."""

    url: str
    """The sandbox collection checked, as the check sent it: an http(s) URL without a user, password,
    query or fragment (a proposal whose proof holds one is refused: the URL is shown on screen)."""
    query: Annotated[dict[str, str], msgspec.Meta(min_length=1)]
    """The dry-run parameter the check proved; it proves only the calls whose query carries it (an
    empty one would prove every call, so it is refused)."""
    checked_at: str
    """When the check ran, UTC (RFC 3339)."""

    def __post_init__(self) -> None:
        parts = urllib.parse.urlsplit(self.url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("a sandbox proof's url must be an http(s) URL")
        if "@" in parts.netloc or parts.query or parts.fragment or "?" in self.url or "#" in self.url:
            raise ValueError("a sandbox proof's url may hold no user, password, query or fragment")


def audit_read(dry_run: DryRun) -> bool:
    """Whether `writes_kept` was counted by the API's audit log. A dry run that sent no write records
    0 kept without reading the log (it kept nothing), so only a count over writes sent is the log's;
    a plan that does not say how many it sent (older, hand-written) is taken at its count."""
    return dry_run.writes_kept is not None and dry_run.write_requests != 0


def sandbox_proof(dry_run: DryRun) -> SandboxProof | None:
    """The sandbox check a dry run carries as proof, or None: none ran, or it names no parameter
    (a proof built in code without the length check; it would prove every call)."""
    proof = dry_run.sandbox
    return proof if proof is not None and proof.query else None


class DryRun(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True):
    via: DryRunVia
    write_requests: Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)] | None = None
    writes_kept: Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)] | None = None
    writes_around: Annotated[int, msgspec.Meta(ge=0, le=MAX_SAFE_INTEGER)] | None = None
    """Writes the API's audit log holds for the dry run's window that the gate did not make (a child
    process, another client with the same credential). Outside the digest, like the rest of `dry_run`;
    absent when no audit source was read, so a proposal without it reads as before."""
    sandbox: SandboxProof | None = None
    """The sandbox check that proved a server dry run kept nothing; absent when none ran."""
    request_ids: (
        Annotated[list[Annotated[str, msgspec.Meta(max_length=128)]], msgspec.Meta(max_length=MAX_CALLS)]
        | None
    ) = None
    """The request id each of a server dry run's requests was sent with: in the API's audit log, an
    entry carrying one is the dry run's own request, never another client's write. Outside the digest."""


class Request(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    method: str
    path: str
    query: dict[str, Any] | None = None
    body: Any = None
    content_type: str | None = None
    """How `body` is written (`reviewer.plan.bodies`): absent for JSON, a form's fields, or the exact
    bytes in base64. Absent on every plan written before bodies other than JSON were recorded."""
    text: list[str] | None = None
    """A JSON or form body's exact text, in pieces, each placeholder written as in `body`
    (`reviewer.plan.exact_bodies`): what the real run sends, placeholders filled in place, once it
    reads as `body`. Absent for a body held as bytes, and on plans written before it was recorded."""
    headers: dict[str, str] | None = None
    """The headers that carry meaning, by lower-case name (`reviewer.plan.request_headers`): the real
    run sends them, placeholders resolved. Absent when there are none, and on every plan written before
    headers were recorded."""


class Outcome(msgspec.Struct, forbid_unknown_fields=True, gc=False):
    status: OutcomeStatus
    http_status: Annotated[int, msgspec.Meta(ge=100, le=599)] | None = None
    message: str | None = None
    result: Any = None


class Call(msgspec.Struct, forbid_unknown_fields=True, omit_defaults=True, gc=False):
    seq: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
    tool: str
    effect: Effect
    args: dict[str, Any] | None = None
    request: Request | None = None
    outcome: Outcome | None = None
    destructive: bool = False
    """The call may destroy or overwrite what it touches, whatever its effect (an MCP tool hinted
    `destructiveHint`, one the operator names): counted with the deletes. Absent when false."""


EFFECT_RANK: Final[dict[str, int]] = {"read": 0, "other": 0, "create": 1, "update": 2, "delete": 3}
METHOD_FLOOR: Final[dict[str, Effect]] = {
    "POST": "create",
    "PUT": "update",
    "PATCH": "update",
    "DELETE": "delete",
}
"""The least effect each write method has: a call's `effect` is the agent's word, its method is what
the API does. A POST may be an update or a delete too (an RPC-style API), never a read."""


def effect_floor(method: str | None) -> Effect | None:
    """The least effect a request of `method` can have, or None for a method that writes nothing."""
    return METHOD_FLOOR.get(method.upper()) if method else None


def raised_effect(effect: Effect, method: str | None) -> Effect:
    """`effect`, raised to what `method` does at least (`read` for a DELETE is `delete`)."""
    floor = effect_floor(method)
    if floor is not None and EFFECT_RANK[effect] < EFFECT_RANK[floor]:
        return floor
    return effect


def understated_effect(call: Call) -> str | None:
    """Why a call's effect says less than its method does, or None when it does not."""
    method = call.request.method if call.request is not None else None
    if raised_effect(call.effect, method) == call.effect:
        return None
    return (
        f"effect {call.effect!r} understates its method {str(method).upper()[:20]}: a DELETE is a delete, "
        "a POST at least a create, a PUT or PATCH at least an update; declare the effect the method has"
    )


def is_destructive(effect: str, destructive: bool) -> bool:
    """Whether a call of `effect`, flagged `destructive` or not, may destroy what it touches: every
    delete, and any call flagged (counted with the deletes)."""
    return effect == "delete" or destructive


class Proposal(msgspec.Struct, forbid_unknown_fields=True):
    format: Literal["reviewer.proposal/v1"]
    proposal_id: Annotated[str, msgspec.Meta(pattern=PROPOSAL_ID_PATTERN)]
    revision: Annotated[int, msgspec.Meta(ge=1, le=MAX_SAFE_INTEGER)]
    title: str
    agent: Agent
    created_at: str
    target: Target
    dry_run: DryRun
    calls: Sequence[Call]
    """Parsed, a `CallList`: each call stays a slice of the JSON until it is read."""
    task: str | None = None


class JSONFloat(float):
    """A float as the digest reads it: tagged so that the canonical encoder, which msgspec hands
    every value it cannot write itself, writes it the RFC 8785 way (100.0 as 100). Only the digest
    decodes calls with it; everywhere else a float is a plain float."""


_call_decoder = msgspec.json.Decoder(Call)


class CallList(Sequence[Call]):
    """The calls of a parsed proposal, each kept as its slice of the JSON and decoded when read.

    Decoded into structs, a plan of 100,000 calls holds about 150 MB; kept as zero-copy slices of
    the one input buffer it holds the buffer and 48 bytes a call. Reading a call decodes it (a few
    microseconds); the calls read last are kept, since a screen scrolling through rows reads the
    same ones again and again, up to `_RECENT_BYTES` of their JSON, so a few huge calls are not all
    held decoded at once. Iterating decodes as it goes and keeps nothing.

    The app paints rows before `check_calls` has run (see `scan_proposal`): a call that does not
    decode is read as a stand-in that says so, instead of an exception in the middle of a paint.
    """

    __slots__ = ("_raws", "_recent", "_recent_bytes")
    _RECENT_CALLS = 1024
    _RECENT_BYTES = 1024 * 1024

    def __init__(self, raws: list[msgspec.Raw]) -> None:
        self._raws = raws
        self._recent: dict[int, Call] = {}
        self._recent_bytes = 0

    def __len__(self) -> int:
        return len(self._raws)

    @overload
    def __getitem__(self, index: int) -> Call: ...

    @overload
    def __getitem__(self, index: slice) -> list[Call]: ...

    def __getitem__(self, index: int | slice) -> Call | list[Call]:
        if isinstance(index, slice):
            return [_decode_or_stand_in(raw) for raw in self._raws[index]]
        if index < 0:
            index += len(self._raws)
        call = self._recent.get(index)
        if call is None:
            if not 0 <= index < len(self._raws):
                raise IndexError("call index out of range")
            raw = self._raws[index]
            call = _decode_or_stand_in(raw)
            if len(self._recent) >= self._RECENT_CALLS or self._recent_bytes > self._RECENT_BYTES:
                self._recent.clear()
                self._recent_bytes = 0
            self._recent[index] = call
            self._recent_bytes += len(raw)
        return call

    def __iter__(self) -> Iterator[Call]:
        for raw in self._raws:
            yield _decode_or_stand_in(raw)

    def chunks(self, limit_bytes: int = 1024 * 1024, limit_calls: int = 4096) -> Iterator[slice]:
        """Consecutive runs of calls, each at most `limit_calls` long and, unless one call alone is
        larger, `limit_bytes` of JSON: a pass that decodes a run at a time holds what its bytes allow."""
        start = size = 0
        for index, raw in enumerate(self._raws):
            if index > start and (size + len(raw) > limit_bytes or index - start >= limit_calls):
                yield slice(start, index)
                start, size = index, 0
            size += len(raw)
        if start < len(self._raws):
            yield slice(start, len(self._raws))

    @overload
    def raw(self, index: int) -> msgspec.Raw: ...

    @overload
    def raw(self, index: slice) -> list[msgspec.Raw]: ...

    def raw(self, index: int | slice) -> msgspec.Raw | list[msgspec.Raw]:
        """The call's JSON as the proposal carried it; for a slice, the calls' (nothing decoded)."""
        return self._raws[index]

    def __eq__(self, other: object) -> bool:
        if isinstance(other, CallList):
            return self._raws == other._raws or list(self) == list(other)
        if isinstance(other, Sequence):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"CallList({len(self):,} calls)"


def _decode_or_stand_in(raw: msgspec.Raw) -> Call:
    """The call, or (before `check_calls` has refused it) a stand-in naming what is wrong with it."""
    try:
        return _call_decoder.decode(raw)
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError) as error:
        problem = field_message(str(error)) if isinstance(error, msgspec.ValidationError) else str(error)
        return Call(seq=0, tool=f"(unreadable call: {problem[:200]})", effect="other")


_ProposalEnvelope = msgspec.defstruct(
    "ProposalEnvelope",
    [
        (field.name, list[msgspec.Raw] if field.name == "calls" else field.type)
        if field.required
        else (field.name, field.type, field.default)
        for field in msgspec.structs.fields(Proposal)
    ],
    forbid_unknown_fields=True,
)
"""The proposal with its calls left as raw JSON: the header is checked at once, each call after."""
_envelope_decoder = msgspec.json.Decoder(_ProposalEnvelope)
_RFC3339 = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})\Z")


def parse_proposal(data: bytes | str, source: str = "proposal") -> Proposal:
    """Decode and check one proposal; every failure is a ProposalError naming `source` and the field.

    `scan_proposal` and then `check_calls`: the service and the client need both before they trust
    a proposal; the terminal app lists and paints after the first and checks in the background.
    """
    proposal = scan_proposal(data, source)
    check_calls(proposal, source)
    return proposal


def scan_proposal(data: bytes | str, source: str = "proposal") -> Proposal:
    """The cheap pass over the raw bytes: size, UTF-8, JSON syntax, the header, the call count, and
    the bound on what decoding any call can cost. The calls are left as raw JSON, not yet checked.

    About 0.05 s for 100,000 calls (36 MB), against about 2 s to check, analyse and hash them: it is
    what lets the app list a large proposal at once. Nothing it accepts can make a later decode
    allocate more than `MAX_CALL_VALUES` values at a time.
    """
    raw = data.encode() if isinstance(data, str) else data
    if len(raw) > MAX_BODY_BYTES:
        raise ProposalError(
            source, f"is {len(raw):,} bytes; a proposal may be at most {MAX_BODY_BYTES:,} bytes"
        )
    _check_utf8(raw, source)
    try:
        envelope = _envelope_decoder.decode(raw)
    except msgspec.ValidationError as error:
        raise ProposalError(source, field_message(str(error))) from None
    except msgspec.DecodeError as error:
        raise ProposalNotJSON(source, f"is not valid JSON ({error})") from None
    except RecursionError:
        raise ProposalError(source, f"nests deeper than {MAX_DEPTH} levels") from None
    header = {name: getattr(envelope, name) for name in _HEADER_FIELDS}
    raws: list[msgspec.Raw] = envelope.calls  # type: ignore[attr-defined]
    _check_header(header, len(raws), source)
    _check_cost(raw, raws, source)
    return Proposal(**header, calls=CallList(raws))


Pause = Callable[[], object]
"""Called between chunks of a long check or hash: a caller's chance to let other work run first."""
PAUSE_EVERY: Final = 256
"""Calls checked between two pauses (about 2.5 ms of work; a key waits for the next one)."""


def _no_pause() -> None:
    return None


def check_calls(proposal: Proposal, source: str = "proposal", pause: Pause = _no_pause) -> None:
    """Decode each call once: its types, its seq order, and its strings, integers and nesting.

    The second half of `parse_proposal`; a proposal from `scan_proposal` is trusted only after it.
    `pause` is called every `PAUSE_EVERY` calls.
    """
    calls = proposal.calls
    if isinstance(calls, CallList):
        raws = calls.raw(slice(None))
    else:
        raws = [msgspec.Raw(dumps(call)) for call in calls]
    _check_calls(raws, source, pause)


_UTF8_CHUNK = 1024 * 1024


def _check_utf8(raw: bytes, source: str) -> None:
    """Invalid UTF-8 anywhere makes the whole file unreadable. msgspec checks it only in strings it
    decodes, and the scan leaves the calls undecoded, so it is checked here, a chunk at a time."""
    if raw.isascii():
        return
    view = memoryview(raw)
    offset = 0
    while offset < len(raw):
        chunk = view[offset : offset + _UTF8_CHUNK]
        try:
            _, used = codecs.utf_8_decode(chunk, "strict", offset + len(chunk) >= len(raw))
        except UnicodeDecodeError as error:
            position = offset + error.start
            raise ProposalNotJSON(
                source, f"is not UTF-8: byte 0x{raw[position]:02x} at offset {position:,} ({error.reason})"
            ) from None
        if used == 0:  # a chunk of one incomplete character: only possible at the very end
            break
        offset += used


_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')


def json_values_at_most(data: bytes, cap: int) -> int:
    """The JSON values in `data` (keys not counted), or an upper bound when it is at most `cap`.

    A document is one value plus, in each non-empty container, one per comma and one more. Counted
    in C: first over the bytes as they are (commas and brackets in strings count too, so it can only
    overestimate); when that is over the cap, again with every string emptied and empty containers
    left out, which is exact unless an empty container has white space inside.
    """
    bound = data.count(b",") + data.count(b"[") + data.count(b"{") + 1
    if bound <= cap:
        return bound
    bare = _JSON_STRING.sub(b'""', data)
    opened = bare.count(b"[") + bare.count(b"{")
    return bare.count(b",") + opened - bare.count(b"[]") - bare.count(b"{}") + 1


def _check_cost(raw: bytes, raws: list[msgspec.Raw], source: str) -> None:
    """Refuse a shape whose decoding would cost far more than its bytes (millions of `[]`)."""
    total = json_values_at_most(raw, MAX_JSON_VALUES)
    if total > MAX_JSON_VALUES:
        raise ProposalError(
            source,
            f"holds {total:,} JSON values; at most {MAX_JSON_VALUES:,} are allowed "
            "(each becomes an object in memory, so the bytes would understate the cost)",
        )
    smallest_costly = 2 * MAX_CALL_VALUES  # each value after the first takes two bytes at least
    for index, call in enumerate(raws):
        if len(call) >= smallest_costly:
            values = json_values_at_most(bytes(call), MAX_CALL_VALUES)
            if values > MAX_CALL_VALUES:
                raise ProposalError(
                    source,
                    f"$.calls[{index}]: holds {values:,} JSON values; a call may hold at most "
                    f"{MAX_CALL_VALUES:,}",
                )


_holds_placeholder_mark = re.compile(re.escape(MARK.encode())).search
"""The cheap test, on a call's JSON bytes as they are, before its placeholders are read."""

_HEADER_FIELDS = tuple(field.name for field in msgspec.structs.fields(Proposal) if field.name != "calls")


def field_message(message: str, at: str = "$") -> str:
    """msgspec says `Expected str, got int - at $.tool`; lead with the field (under `at`) instead."""
    problem, _, where = message.partition(" - at ")
    path = at + where.strip("`")[1:] if where else at
    return f"{path}: {problem}"


def _check_header(header: dict[str, Any], call_count: int, source: str) -> None:
    # The pattern's `$` matches before a final newline too (in Python, not in the service's URL
    # paths): `abc\n` would be a proposal no path can name, so none could decide it.
    if header["proposal_id"].endswith("\n"):
        raise ProposalError(source, "$.proposal_id: a proposal_id holds only A-Z, a-z, 0-9, '.', '_' and '-'")
    if not _RFC3339.match(header["created_at"]):
        raise ProposalError(source, "$.created_at: expected an RFC 3339 time such as 2026-10-15T09:00:00Z")
    if call_count > MAX_CALLS:
        raise ProposalError(source, f"$.calls: {call_count:,} calls; at most {MAX_CALLS:,} are allowed")
    if call_count == 0:
        raise ProposalError(source, "$.calls: a proposal needs at least one call; nothing to approve")
    plain = msgspec.to_builtins(header)
    if not value_within_limits(plain, 1):
        raise ProposalError(source, locate_limit_violation(plain))


def _check_calls(raws: list[msgspec.Raw], source: str, pause: Pause = _no_pause) -> None:
    """Decode each call once: its types, its seq order, its strings, integers and nesting, and its
    placeholders, each of which must name an earlier call of the plan (no real run could resolve
    another: the plan would stop half-run after its approval)."""
    previous = 0
    seqs: set[int] = set()
    decode = _call_decoder.decode
    for index, raw in enumerate(raws):
        if index and index % PAUSE_EVERY == 0:
            pause()
        at = f"$.calls[{index}]"
        try:
            call = decode(raw)
        except msgspec.ValidationError as error:
            raise ProposalError(source, field_message(str(error), at)) from None
        except msgspec.DecodeError as error:
            raise ProposalNotJSON(source, f"{at}: is not valid JSON ({error})") from None
        except RecursionError:
            raise ProposalError(source, f"{at}: nests deeper than {MAX_DEPTH} levels") from None
        if call.seq <= previous:
            raise ProposalError(
                source,
                f"{at}.seq: {call.seq} does not follow {previous}; seq values must be unique and increasing",
            )
        previous = call.seq
        if not _call_within_limits(call):
            plain = msgspec.to_builtins(call, enc_hook=float)
            raise ProposalError(source, locate_limit_violation(plain, at, depth=3))
        understated = understated_effect(call)
        if understated is not None:
            raise ProposalError(source, f"{at}.effect: {understated}")
        if _holds_placeholder_mark(raw):
            executed = [call.args, msgspec.to_builtins(call.request, enc_hook=float)]
            unresolvable = unresolvable_in(executed, call.seq, seqs)
            if unresolvable:
                raise ProposalError(
                    source,
                    f"{at}: {unresolvable[0].text()} names no earlier call of the plan; a placeholder "
                    "stands for what an earlier call produces, so the real run could never resolve it",
                )
        if call.request is not None and call.request.content_type is not None:
            try:
                check_body(call.request.content_type, call.request.body)
            except BodyError as error:
                raise ProposalError(source, f"{at}.request.body: {error}") from None
        if call.request is not None and call.request.text is not None:
            try:
                check_text(call.request.content_type, call.request.text, call.request.body)
            except BodyError as error:
                raise ProposalError(source, f"{at}.request.text: {error}") from None
        if call.request is not None and call.request.headers is not None:
            try:
                check_headers(call.request.headers)
            except HeaderError as error:
                raise ProposalError(source, f"{at}.request.headers: {error}") from None
        seqs.add(call.seq)


def _call_within_limits(call: Call) -> bool:
    """Whether the call's strings, integers and nesting are within the limits (a call sits at depth 3:
    the proposal, its `calls` list, the call)."""
    texts: list[str | None] = [call.tool]
    values: list[tuple[Any, int]] = [(call.args, 4)]
    if call.request is not None:
        texts += (call.request.method, call.request.path, call.request.content_type)
        values += (
            (call.request.query, 5),
            (call.request.body, 5),
            (call.request.headers, 5),
            (call.request.text, 5),
        )
    if call.outcome is not None:
        texts.append(call.outcome.message)
        values.append((call.outcome.result, 5))
    if any(text is not None and len(text) > MAX_STRING_CHARS for text in texts):
        return False
    return all(value_within_limits(value, depth) for value, depth in values)


def value_within_limits(value: Any, depth: int) -> bool:
    """Whether a decoded JSON value keeps to the string, integer and nesting limits.

    `depth` is the nesting level `value` sits at (1 for a whole document), so a value inside a
    larger structure is held to the limits of the whole. Answers yes or no, fast; when no,
    `locate_limit_violation` says where.
    """
    stack: list[tuple[Any, int]] = [(value, depth)]
    pop, push = stack.pop, stack.append
    while stack:
        item, level = pop()
        kind = type(item)
        if kind is dict or kind is list:
            if level > MAX_DEPTH:
                return False
            if kind is dict and any(len(key) > MAX_STRING_CHARS for key in item):
                return False
            for child in item.values() if kind is dict else item:
                child_kind = type(child)
                if child_kind is dict or child_kind is list:
                    push((child, level + 1))
                elif child_kind is str:
                    if len(child) > MAX_STRING_CHARS:
                        return False
                elif child_kind is int and not -MAX_SAFE_INTEGER <= child <= MAX_SAFE_INTEGER:
                    return False
        elif kind is str:
            if len(item) > MAX_STRING_CHARS:
                return False
        elif kind is int and not -MAX_SAFE_INTEGER <= item <= MAX_SAFE_INTEGER:
            return False
    return True


def locate_limit_violation(value: Any, at: str = "$", depth: int = 1) -> str:
    """`$.path: problem` for the first place a value (at path `at`, nesting `depth`) breaks a limit;
    call only when there is one."""
    for path, problem in _violations(value, at, depth):
        return f"{path}: {problem}"
    raise AssertionError("a limit violation was found but could not be located")


def _violations(value: Any, path: str, depth: int) -> Iterator[tuple[str, str]]:
    if isinstance(value, dict | list) and depth > MAX_DEPTH:
        yield path, f"nests deeper than {MAX_DEPTH} levels"
        return
    if isinstance(value, dict):
        for key, child in value.items():
            if len(key) > MAX_STRING_CHARS:
                yield (
                    path,
                    f"a key is {len(key):,} characters; at most {MAX_STRING_CHARS:,} are allowed",
                )
            yield from _violations(child, f"{path}.{key[:40]}", depth + 1)
    elif isinstance(value, list):
        for index, child in enumerate(value):
            yield from _violations(child, f"{path}[{index}]", depth + 1)
    elif isinstance(value, str) and len(value) > MAX_STRING_CHARS:
        yield (
            path,
            f"a string of {len(value):,} characters; at most {MAX_STRING_CHARS:,} are allowed",
        )
    elif (
        isinstance(value, int)
        and not isinstance(value, bool)
        and not -MAX_SAFE_INTEGER <= value <= MAX_SAFE_INTEGER
    ):
        yield (
            path,
            (
                f"the integer {str(value)[:30]} is outside ±(2^53−1); "
                "it cannot be represented exactly, so it is refused rather than rounded"
            ),
        )


_CANONICAL_CHUNK = 1024
"""Calls encoded at a time, so the digest of a large plan never holds a second copy of its calls,
and a pause (see `plan_sha256`) comes every few milliseconds of its work."""


class _OutsideBasicPlane(Exception):
    """A key outside the Basic Multilingual Plane: msgspec's key order is not RFC 8785's there."""


def _canonical_pieces(proposal: Proposal) -> Iterator[bytes]:
    """The canonical JSON in pieces, a chunk of calls at a time; raises `_OutsideBasicPlane`."""

    def checked(piece: bytes) -> bytes:
        if _ASTRAL_UTF8_LEAD.search(piece):
            raise _OutsideBasicPlane
        return piece

    calls = proposal.calls
    windows = (
        calls.chunks(limit_calls=_CANONICAL_CHUNK)
        if isinstance(calls, CallList)
        else (slice(start, start + _CANONICAL_CHUNK) for start in range(0, len(calls), _CANONICAL_CHUNK))
    )
    yield b'{"calls":['
    for window in windows:
        start = window.start
        # Read again with tagged floats: msgspec would write 100.0 where RFC 8785 writes 100.
        if isinstance(calls, CallList):
            read = _tagged_calls_decoder.decode(b"[" + b",".join(calls.raw(window)) + b"]")
        else:
            read = _tagged_calls_decoder.decode(dumps(calls[window]))
        chunk = [msgspec.structs.replace(call, outcome=None) for call in read]
        if start:
            yield b","
        yield checked(msgspec.json.encode(chunk, order="sorted", enc_hook=_canonical_float)[1:-1])
    yield b'],"target":'
    yield checked(msgspec.json.encode(proposal.target, order="sorted", enc_hook=_canonical_float))
    yield b"}"


_tagged_calls_decoder = msgspec.json.Decoder(list[Call], float_hook=JSONFloat)


def canonical_json(value: Any) -> bytes:
    """RFC 8785 canonical JSON of plain JSON values: the one encoder behind every byte string the
    project hashes or signs (the plan digest's reference path, a signed decision statement)."""
    return rfc8785.dumps(value)


def _reference_canonical_plan(proposal: Proposal) -> bytes:
    calls = [msgspec.structs.replace(call, outcome=None) for call in proposal.calls]
    return canonical_json(msgspec.to_builtins({"calls": calls, "target": proposal.target}, enc_hook=float))


def canonical_plan(proposal: Proposal) -> bytes:
    """RFC 8785 canonical JSON of what would execute: the target and each call without its outcome.

    A key that a call (or its target or request) does not carry, or carries as null, is left out,
    so adding an optional field as null never changes the digest. msgspec writes the canonical form
    directly (sorted keys, the same string escapes as RFC 8785, floats through `_canonical_float`);
    only a key outside the Basic Multilingual Plane, where UTF-16 order differs from code point
    order, sends the plan through the slower reference implementation.
    """
    try:
        return b"".join(_canonical_pieces(proposal))
    except _OutsideBasicPlane:
        return _reference_canonical_plan(proposal)


_ASTRAL_UTF8_LEAD = re.compile(rb"[\xf0-\xf4]")


def _canonical_float(value: Any) -> msgspec.Raw:
    if isinstance(value, float):
        return msgspec.Raw(canonical_json(float(value)))
    raise TypeError(f"{type(value).__name__} cannot appear in a proposal")


def plan_sha256(proposal: Proposal, pause: Pause = _no_pause) -> str:
    """SHA-256 (hex) of `canonical_plan`, hashed as it is written: the digest shown to the reviewer
    and named by an approval. `pause` is called between its pieces (a few thousand calls each)."""
    import hashlib  # here, not at import: OpenSSL's loading is not on the path to the first frame

    digest = hashlib.sha256()
    try:
        for piece in _canonical_pieces(proposal):
            digest.update(piece)
            pause()
    except _OutsideBasicPlane:
        return hashlib.sha256(_reference_canonical_plan(proposal)).hexdigest()
    return digest.hexdigest()


def same_json(old: Any, new: Any) -> bool:
    """Equal as JSON: 1 and 1.0 are one number (RFC 8785 writes both as 1), but `true` is not `1`,
    whatever Python's `==` says."""
    if isinstance(old, bool) or isinstance(new, bool):
        return type(old) is type(new) and old == new
    if isinstance(old, msgspec.Struct) or isinstance(new, msgspec.Struct):
        fields = msgspec.structs.astuple
        return type(old) is type(new) and same_json(fields(old), fields(new))
    if isinstance(old, dict):
        return (
            isinstance(new, dict)
            and old.keys() == new.keys()
            and all(same_json(value, new[key]) for key, value in old.items())
        )
    if isinstance(old, list | tuple):
        return isinstance(new, list | tuple) and len(old) == len(new) and all(map(same_json, old, new))
    return bool(old == new)


def _plain_value(value: Any) -> Any:
    if isinstance(value, float):
        return float(value)
    if isinstance(value, CallList):
        return [value.raw(index) for index in range(len(value))]
    raise TypeError(f"{type(value).__name__} cannot appear in a proposal")


def dumps(value: Any) -> bytes:
    """Any proposal value (or the whole proposal) as compact JSON."""
    return msgspec.json.encode(value, enc_hook=_plain_value)
