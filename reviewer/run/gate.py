"""The loopback gate: an ASGI app in front of the API, holding the credential the child never gets.

Reads (GET, HEAD, OPTIONS, or what the OpenAPI document calls a read) pass through with the gate's
credential, their answers streamed back. Every write goes to the gate's mode: the dry run (a
`Recording` of the agent library, answered by the API's own dry run or only recorded) or, with
`--rerun`, the real run (the library's `Execution`, which holds each call against the approved plan
before it sends it). Between and after them every request is refused. Every request is checked first:
its path must stay under the API's base URL, a write's body is recorded as it is (JSON, a form's
fields or its exact bytes, `reviewer.plan.bodies`), and what the dry run holds
stays within the proposal limits, or the dry run is spoiled and the child stopped. A placeholder
reaches the child in its minted form (`rvw--id--from-call-1--`, `reviewer.plan.placeholders`), which
no client encodes, and is read back wherever the child sends it (the path, the query, a form, JSON, a
read's headers), once the transport's encoding is undone; the plan holds it readable. A write the
child's SDK retries under the same key is one call (`reviewer.run.retries`).
"""

from __future__ import annotations

import asyncio
import re
import urllib.parse
from collections.abc import Awaitable, Callable, Mapping, MutableMapping
from dataclasses import dataclass, field
from typing import Any, Final, Protocol

import httpx
import msgspec

from reviewer.agent.audit import AuditUnavailable
from reviewer.agent.errors import AgentError, MintedValueUnsafe, PlanStop
from reviewer.agent.execution import off_target
from reviewer.agent.http_values import CallAnswer, path_problem
from reviewer.agent.placeholders import substitute
from reviewer.agent.runs import Recording
from reviewer.agent.shaped import shaped_answer
from reviewer.agent.tools import ToolRunner
from reviewer.plan.bodies import OCTETS, BodyError, body_kind, by_name, bytes_body, media_type, record_body
from reviewer.plan.exact_bodies import ambiguity, as_chunks
from reviewer.plan.hosts import dot_segments
from reviewer.plan.placeholders import MINTED, as_minted, from_minted
from reviewer.plan.proposal import MAX_BODY_BYTES, MAX_CALLS, locate_limit_violation, value_within_limits
from reviewer.plan.request_headers import HeaderError, check_headers, meaningful_headers
from reviewer.run.answers import Rendered
from reviewer.run.aws_protocols import AwsApi, AwsOperation
from reviewer.run.calls import GateCall, UndeclaredOperation, describe
from reviewer.run.openapi import METHOD_EFFECTS, ApiDocument
from reviewer.run.retries import KeyReused, Retries, fingerprint, retry_key

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

WRITE_BODY_BUDGET: Final = MAX_BODY_BYTES // 4
"""The write bodies one dry run may carry, together: each is held twice in the plan (arguments and
request) beside its answer, so the proposal stays under its 64 MB limit."""
READ_BODY_LIMIT: Final = 1024 * 1024
DRAIN_LIMIT: Final = 256 * 1024 * 1024
"""The bytes of a refused body read and dropped before the connection is closed regardless."""
FORWARDED_HEADERS: Final = ("accept", "accept-language", "content-type", "if-none-match", "if-modified-since")
"""The child's headers a read carries on; anything else (its own Authorization, cookies) stays behind."""
DROPPED_ANSWER_HEADERS: Final = frozenset(
    {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "set-cookie", "location"}
)
"""Hop-by-hop headers, a session cookie (a credential), and a redirect's target (the gate follows none,
and the child must not go around it)."""


@dataclass(frozen=True)
class Answer:
    """What the gate answers the child for one request."""

    status: int
    body: Any
    headers: Mapping[str, str] = field(default_factory=dict)


def refusal(status: int, message: str) -> Answer:
    return Answer(status, {"detail": message})


class Mode(Protocol):
    """Where the gate's writes go: the dry run or the real run."""

    async def write(self, call: GateCall) -> Answer: ...

    def resolve(self, value: Any) -> Any:
        """A read's path or query as the API must see it."""
        ...


_ESCAPE: Final = re.compile(rb"%([0-9A-Fa-f]{2})")
_KEPT_ESCAPES: Final = frozenset({b"2F", b"23", b"3F", b"25", b"5C"})
"""Escapes of `/`, `#`, `?`, `%` and `\\`, which mean something else once decoded."""


class DryRunAlarm(Exception):
    """A write of the dry run was kept by the API: it ignored the dry-run parameter."""


def _header_text(text: str) -> str:
    return text.encode("ascii", "replace").decode("ascii").replace("\r", " ").replace("\n", " ")[:2000]


def _answer_of(
    answer: CallAnswer, ok_status: int, extra: Mapping[str, str], call: GateCall | None = None
) -> Answer:
    headers = {**extra, **({"reviewer-note": _header_text(answer.note)} if answer.note else {})}
    if answer.status in ("ok", "recorded") and call is not None and call.answer_form is not None:
        rendered = call.answer_form(answer.result)
        return Answer(rendered.status, rendered, {**rendered.headers, **headers})
    if answer.status in ("ok", "recorded"):
        body = answer.result if answer.result is not None else {}
        return Answer(answer.http_status or ok_status, body, headers)
    if answer.http_status is not None:
        return Answer(answer.http_status, {"detail": answer.message}, headers)
    return Answer(502, {"detail": f"reviewer run: the API did not answer: {answer.message}"}, headers)


class DryMode:
    """The dry run: each write is recorded by the library's `Recording`, one at a time in arrival order.

    A value a write produces reaches the child as a placeholder in its minted form
    (`rvw--id--from-call-1--`); a later request that carries it (that form, or the minted value
    itself, found by value) is sent to the API with the dry run's own value, while the plan keeps the
    placeholder (`<id from call 1>`). One that no placeholder can
    stand for spoils the dry run, naming the call, the field and the value. With `watch_kept` (a server
    dry run), the recording's audit log is read after each write: a kept write stops the dry run
    (`DryRunAlarm`).
    """

    def __init__(self, recording: Recording, *, watch_kept: bool = False) -> None:
        self.recording = recording
        self.watch_kept = watch_kept
        self._lock = asyncio.Lock()

    def resolve(self, value: Any) -> Any:
        return substitute(from_minted(value), self.recording.dry_values)

    async def write(self, call: GateCall) -> Answer:
        async with self._lock:
            try:
                answer = await self.recording.perform(call.write_tool(), dict(call.args), ())
            except MintedValueUnsafe as unsafe:
                raise DryRunAlarm(str(unsafe)) from None
            seq = len(self.recording.calls)
            if self.watch_kept:
                try:
                    kept = await self.recording.kept_so_far()
                except AuditUnavailable as unreadable:
                    raise DryRunAlarm(
                        f"{unreadable}: nothing proves the API did not keep "
                        f"{call.request.method} {call.request.path[:200]}"
                    ) from None
                if kept:
                    raise DryRunAlarm(
                        f"the dry run kept {kept} write(s): the API ignored the dry-run parameter and "
                        "wrote for real (its audit log shows "
                        f"{call.request.method} {call.request.path[:200]}). "
                        "The dry run was stopped and nothing was submitted; check the API's dry-run "
                        "parameter (--dry-run-param) or use --via record"
                    )
        via = self.recording.via
        if answer.result is not None:
            answer = CallAnswer(
                answer.status, answer.http_status, answer.message, as_minted(answer.result), answer.note
            )
        if answer.status == "recorded":
            schema = call.operation.response_schema if call.operation is not None else None
            values = call.request.body if isinstance(call.request.body, Mapping) else {}
            shaped = shaped_answer(schema, values, seq)
            if shaped is not None:
                answer = CallAnswer(
                    answer.status, None, None, {**as_minted(shaped), **(answer.result or {})}, answer.note
                )
        ok_status = 201 if call.request.method == "POST" else 200
        return _answer_of(answer, ok_status, {"reviewer-dry-run": via}, call)


class RealMode:
    """The real run of `--rerun`: each write goes to the library's `Execution`, which sends it only when
    it is the approved plan's next call, and stops the run at the first that is not."""

    def __init__(self, execution: ToolRunner) -> None:
        self.execution = execution

    def resolve(self, value: Any) -> Any:
        return value

    async def write(self, call: GateCall) -> Answer:
        try:
            answer = await self.execution.perform(call.write_tool(), dict(call.args), ())
        except PlanStop as stop:
            return refusal(409, f"reviewer run: {stop}")
        except AgentError as refused:
            return refusal(409, f"reviewer run: {refused}")
        return _answer_of(answer, 200, {}, call)


@dataclass
class HttpGate:
    """The gate's ASGI app (see the module). `mode` None refuses everything; `spoiled` says why the dry
    run cannot become a plan, and `stop` is set then, so the runner stops the child."""

    api: httpx.AsyncClient
    api_url: str
    document: ApiDocument | None = None
    aws: AwsApi | None = None
    """The AWS service's model, when the gate signs for one: it names operations and writes answers."""
    mode: Mode | None = None
    spoiled: str | None = None
    late_requests: list[str] = field(default_factory=list)
    """Requests that arrived while no mode was open (a process COMMAND left behind, after the dry run)."""
    stop: asyncio.Event = field(default_factory=asyncio.Event)
    writes_seen: int = 0
    write_bytes: int = 0
    retries: Retries[Answer] = field(default_factory=Retries)
    """The writes of the open run that carried a retry key: a retry is answered from them."""
    own_headers: tuple[str, ...] = ()
    """Headers the executor writes itself (its request id), left out of the plan like the credential's."""

    def spoil(self, reason: str) -> None:
        if self.spoiled is None:
            self.spoiled = reason
        self.stop.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        answer = await self._answer(scope, receive, send)
        if answer is not None:
            await _send_json(send, answer)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> Answer | None:
        method, path = scope["method"].upper(), request_path(scope)
        unsendable = unsendable_byte(path)
        if unsendable is not None:
            return refusal(
                400,
                f"reviewer run: the path of this {method[:20]} holds {unsendable}, which a URL cannot "
                "carry; not recorded, not sent",
            )
        where = f"{method} {path[:200]}"
        if self.spoiled is not None:
            return refusal(409, f"reviewer run: the dry run was stopped: {self.spoiled}")
        mode = self.mode
        if mode is None:
            self.late_requests.append(where)
            return refusal(409, "reviewer run: no run is open at this gate (the dry run is over); not sent")
        if method not in METHOD_EFFECTS:
            return refusal(405, f"reviewer run: {method[:20]} is neither a read nor a write the gate knows")
        query = from_minted(_query(scope.get("query_string", b"")))
        try:
            described = describe(method, path, query, None, self.document)
        except UndeclaredOperation as undeclared:
            return refusal(404, str(undeclared))
        is_read = described.is_read
        limit = READ_BODY_LIMIT if is_read else WRITE_BODY_BUDGET - self.write_bytes
        raw = await _read_body(receive, limit)
        if raw is None:
            if is_read:
                return refusal(413, f"reviewer run: the body of {where} is over {READ_BODY_LIMIT} bytes")
            self.spoil(f"the write bodies passed the proposal limit ({WRITE_BODY_BUDGET} bytes in one plan)")
            return refusal(413, f"reviewer run: {self.spoiled}")
        aws = self.aws.operation_of(method, path, query, _headers(scope), raw) if self.aws else None
        if aws is not None:
            is_read = aws.is_read
        checked = self.api.build_request(method, path, params=query or None)
        # httpx resolves dot segments as it builds the URL, so they are refused here, as the child sent them.
        reason = dot_segments(path) or off_target(path, checked.url, self.api_url)
        if reason is not None:
            return refusal(400, f"reviewer run: {where} would leave the API's base URL: {reason}; not sent")
        if is_read:
            await self._pass_through(scope, send, mode, method, path, query, raw)
            return None
        path = from_minted(path)
        problem = path_problem(path)
        if problem is not None:
            return refusal(400, f"reviewer run: {where}: {problem}; not recorded, not sent")
        content_type = _header(scope, "content-type")
        if content_type is not None and not (content_type.isascii() and content_type.isprintable()):
            return refusal(400, f"reviewer run: {where}: its content type holds control characters; not sent")
        sent_headers = [
            (name.decode("latin-1"), value.decode("latin-1")) for name, value in scope.get("headers", [])
        ]
        headers = from_minted(
            meaningful_headers(sent_headers, also=(*self.api.headers.keys(), *self.own_headers))
        )
        try:
            check_headers(headers)
        except HeaderError as error:
            return refusal(400, f"reviewer run: {where}: a header {error}; not recorded, not sent")
        key = retry_key(scope.get("headers", []))
        if key is None:
            return await self._write(mode, method, path, query, raw, content_type, headers, where, aws)
        sent = fingerprint(method, path, scope.get("query_string", b""), raw, headers)
        try:
            return await self.retries.within(mode).answer(
                key,
                sent,
                lambda: self._write(mode, method, path, query, raw, content_type, headers, where, aws),
            )
        except KeyReused as reused:
            return refusal(422, f"reviewer run: {where}: {reused}; not recorded, not sent")

    async def _write(
        self,
        mode: Mode,
        method: str,
        path: str,
        query: dict[str, Any],
        raw: bytes,
        content_type: str | None,
        headers: dict[str, str],
        where: str,
        aws: AwsOperation | None = None,
    ) -> Answer:
        self.write_bytes += len(raw)
        self.writes_seen += 1
        if self.writes_seen > MAX_CALLS:
            self.spoil(f"the dry run made more writes than a plan may hold ({MAX_CALLS})")
            return refusal(413, f"reviewer run: {self.spoiled}")
        ambiguous = ambiguity(content_type, raw)
        if ambiguous is not None:
            self.writes_seen -= 1
            self.write_bytes -= len(raw)
            return refusal(400, f"reviewer run: {where}: {ambiguous}; not recorded, not sent")
        try:
            content_type, body = _recorded_body(content_type, raw)
        except BodyError as error:
            self.spoil(f"the body of {where} is {error}")
            return refusal(400, f"reviewer run: {self.spoiled}")
        if _held_as_bytes(body) and MINTED.search(raw.decode("latin-1")):
            self.spoil(
                f"the body of {where} carries a placeholder inside bytes the plan holds exactly, where "
                "it cannot be filled in; send it in JSON, a form, the query or the path"
            )
            return refusal(400, f"reviewer run: {self.spoiled}")
        body = from_minted(body)
        if not value_within_limits(body, 3):
            self.spoil(f"the body of {where} passes a proposal limit at {locate_limit_violation(body)}")
            return refusal(413, f"reviewer run: {self.spoiled}")
        text = None if body is None or _held_as_bytes(body) else as_chunks(from_minted(raw.decode("utf-8")))
        call = describe(method, path, query, body, self.document, content_type, headers, text)
        if aws is not None:
            call = aws.named(call)
        try:
            return await mode.write(call)
        except DryRunAlarm as alarm:
            self.spoil(str(alarm))
            return refusal(502, f"reviewer run: {alarm}")

    async def _pass_through(
        self, scope: Scope, send: Send, mode: Mode, method: str, path: str, query: dict[str, Any], raw: bytes
    ) -> None:
        headers = {
            name.decode("latin-1").lower(): mode.resolve(value.decode("latin-1"))
            for name, value in scope.get("headers", [])
            if name.decode("latin-1").lower() in FORWARDED_HEADERS
        }
        if self.aws is not None and "x-amz-target" in (found := _headers(scope)):
            headers["x-amz-target"] = found["x-amz-target"]  # a JSON-protocol read's operation
        request = self.api.build_request(
            method,
            mode.resolve(path),
            params=mode.resolve(query) or None,
            content=raw or None,
            headers=headers,
        )
        try:
            response = await self.api.send(request, stream=True)
        except httpx.HTTPError as error:
            await _send_json(
                send, refusal(502, f"reviewer run: the API did not answer: {type(error).__name__}")
            )
            return
        try:
            answer_headers = [
                (name.encode("latin-1"), value.encode("latin-1"))
                for name, value in response.headers.multi_items()
                if name.lower() not in DROPPED_ANSWER_HEADERS
            ]
            await send(
                {"type": "http.response.start", "status": response.status_code, "headers": answer_headers}
            )
            async for chunk in response.aiter_raw():
                await send({"type": "http.response.body", "body": chunk, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
        finally:
            await response.aclose()


def _headers(scope: Scope) -> dict[str, str]:
    return {key.decode("latin-1").lower(): value.decode("latin-1") for key, value in scope.get("headers", [])}


def _header(scope: Scope, name: str) -> str | None:
    for key, value in scope.get("headers", []):
        if key.decode("latin-1").lower() == name:
            return str(value.decode("latin-1"))
    return None


def _held_as_bytes(body: Any) -> bool:
    return isinstance(body, Mapping) and set(body) == {"base64"}


def _recorded_body(content_type: str | None, raw: bytes) -> tuple[str | None, Any]:
    """The content type and body the plan records of a write (`reviewer.plan.bodies`): JSON as its
    value, a form by its fields, anything else as its exact bytes. A body that says nothing of its type
    is JSON when it parses as JSON, else bytes."""
    if not raw.strip() and body_kind(content_type) == "json":
        return None, None
    if body_kind(content_type) == "json":
        try:
            # A JSON media type of its own (merge-patch+json) is kept: the API reads the body by it.
            kept = None if media_type(content_type) in ("", "application/json") else content_type
            return kept, msgspec.json.decode(raw)
        except msgspec.DecodeError as error:
            if content_type is not None:
                says = f"not JSON ({error}), though its content type says {content_type[:80]!r}"
                raise BodyError(says) from None
            return OCTETS, bytes_body(raw)
    return record_body(content_type, raw)


def request_path(scope: Scope) -> str:
    """The path as the child sent it, its escapes of `/ # ? % \\` kept: decoded, `%2F` would turn into a
    separator and `%23` into a `#` that cuts the URL the gate sends. Other escapes are decoded, so a
    placeholder's minted form reads as it was handed out however the client escaped it (and a
    placeholder written out, `<id from call 1>`, as the plan writes it); httpx encodes them again alike."""
    raw = scope.get("raw_path")
    if not isinstance(raw, bytes) or not raw:
        return str(scope["path"])
    raw = raw.split(b"?", 1)[0]
    decoded = _ESCAPE.sub(
        lambda found: found[0] if found[1].upper() in _KEPT_ESCAPES else bytes.fromhex(found[1].decode()), raw
    )
    try:
        return decoded.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("latin-1")


_BYTE_NAMES: Final = {0x00: "NUL", 0x09: "TAB", 0x0A: "LF", 0x0D: "CR", 0x1B: "ESC", 0x7F: "DEL"}


def unsendable_byte(path: str) -> str | None:
    """The first byte of the decoded path a request line cannot carry (a NUL, CR, LF or other control
    byte, sent as `%00` or `%0D%0A`), named; None when there is none. Such a path cannot be sent as
    approved: a client refuses it, or a server cuts or splits the request there."""
    for character in path:
        code = ord(character)
        if code < 0x20 or code == 0x7F:
            name = _BYTE_NAMES.get(code, "a control byte")
            return f"{name} (%{code:02X})"
    return None


def _query(query_string: bytes) -> dict[str, Any]:
    return by_name(urllib.parse.parse_qsl(query_string.decode("latin-1"), keep_blank_values=True))


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """The request's body, or None once it passes `limit` bytes. The rest is read and dropped, up to
    `DRAIN_LIMIT` bytes in all, never kept: the child is connected to the gate itself, and a
    connection closed with unread data is reset, losing the refusal the child is owed."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            break
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            while message.get("more_body", False) and size <= DRAIN_LIMIT:
                message = await receive()
                size += len(message.get("body", b""))
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


async def _send_json(send: Send, answer: Answer) -> None:
    if isinstance(answer.body, Rendered):
        body, kind = answer.body.content, answer.body.content_type
    else:
        body, kind = msgspec.json.encode(answer.body), "application/json"
    headers = [(b"content-length", str(len(body)).encode())]
    headers += [(b"content-type", kind.encode("latin-1"))] if kind else []
    headers += [(name.encode("latin-1"), value.encode("latin-1")) for name, value in answer.headers.items()]
    await send({"type": "http.response.start", "status": answer.status, "headers": headers})
    await send({"type": "http.response.body", "body": body})
