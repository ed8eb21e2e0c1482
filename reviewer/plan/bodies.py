"""A write's body as the plan holds it, whatever its content type.

A request's `content_type` says how its `body` is written:

- absent (or a JSON media type): the body is the JSON value itself, as plans always held it;
- `application/x-www-form-urlencoded`: the body is the form's fields in order, `[[name, value], ...]`
  (a name may repeat), read and diffed field by field, and placeholders work in values as in JSON;
- anything else (bytes, XML, `multipart/form-data`): the body is `{"base64": [chunk, ...]}`, the exact
  bytes, so the plan's digest covers every byte and the executor sends exactly the bytes approved. A
  reviewer reads them as their length, SHA-256 and a short preview, and a multipart body part by part.

A form whose bytes are not UTF-8 is held as its bytes, under its own content type.
"""

from __future__ import annotations

import base64
import binascii
import urllib.parse
from typing import Any, Final, Literal

# hashlib and email load only where a body of bytes is shown: the proposal format imports this module,
# and the terminal app's first screen needs neither.

BodyKind = Literal["json", "form", "bytes"]

FORM: Final = "application/x-www-form-urlencoded"
OCTETS: Final = "application/octet-stream"
CHUNK_BYTES: Final = 384 * 1024
"""Raw bytes per base64 chunk: 512 KiB of text, well under a plan string's limit."""
PREVIEW_BYTES: Final = 160
MAX_PARTS: Final = 200


class BodyError(ValueError):
    """A body the plan cannot hold as its content type says; the message names what is wrong."""


def media_type(content_type: str | None) -> str:
    """The media type alone, lower case, without parameters (`charset`, `boundary`)."""
    return (content_type or "").split(";", 1)[0].strip().lower()


AWS_JSON: Final = "application/x-amz-json-"
"""AWS's JSON protocol (DynamoDB, SQS: `application/x-amz-json-1.0`) is JSON under its own name."""


def is_json(content_type: str | None) -> bool:
    """The one rule for a JSON body, the queue's and the plan's: no media type at all, `application/json`,
    or any type with the `+json` structured syntax suffix (RFC 6839: `application/merge-patch+json`,
    `text/vnd.example+json`), parameters such as `charset` aside."""
    kind = media_type(content_type)
    return not kind or kind == "application/json" or kind.endswith("+json")


def body_kind(content_type: str | None) -> BodyKind:
    kind = media_type(content_type)
    if is_json(content_type) or kind.startswith(AWS_JSON):
        return "json"
    return "form" if kind == FORM else "bytes"


def held_as(content_type: str | None, body: Any) -> BodyKind:
    """How the plan holds `body`: as its content type says, but a form that was not UTF-8 as bytes."""
    kind = body_kind(content_type)
    return "bytes" if kind == "form" and isinstance(body, dict) else kind


def record_body(content_type: str | None, raw: bytes) -> tuple[str | None, Any]:
    """The content type and body a plan records for `raw` sent as `content_type`: JSON when it is
    JSON (and named so, or not named at all), a form's fields, or the bytes."""
    kind = body_kind(content_type)
    if kind == "form":
        try:
            text = raw.decode("utf-8")
            fields = urllib.parse.parse_qsl(text, keep_blank_values=True, strict_parsing=bool(text))
        except (UnicodeDecodeError, ValueError):
            return content_type, bytes_body(raw)
        return content_type, [[name, value] for name, value in fields]
    if kind == "bytes":
        return content_type, bytes_body(raw)
    return content_type, None  # JSON: the caller decodes it


def bytes_body(raw: bytes) -> dict[str, list[str]]:
    return {
        "base64": [
            base64.b64encode(raw[start : start + CHUNK_BYTES]).decode("ascii")
            for start in range(0, len(raw), CHUNK_BYTES)
        ]
    }


def exact_bytes(body: Any) -> bytes:
    """The bytes a `{"base64": [...]}` body holds; `BodyError` when it holds anything else."""
    chunks = body.get("base64") if isinstance(body, dict) and len(body) == 1 else None
    if not isinstance(chunks, list) or not all(isinstance(chunk, str) for chunk in chunks):
        raise BodyError('a body held as bytes is {"base64": ["...", ...]}')
    try:
        return b"".join(base64.b64decode(chunk, validate=True) for chunk in chunks)
    except binascii.Error as error:
        raise BodyError(f"the body's base64 is not valid: {error}") from None


def form_fields(body: Any) -> list[tuple[str, str]]:
    if not isinstance(body, list) or not all(
        isinstance(pair, list) and len(pair) == 2 and all(isinstance(part, str) for part in pair)
        for pair in body
    ):
        raise BodyError('a form body is its fields in order: [["name", "value"], ...]')
    return [(name, value) for name, value in body]


def wire_bytes(content_type: str | None, body: Any) -> bytes | None:
    """What goes on the wire for a body the plan holds as `content_type` says, or None for JSON (the
    HTTP client writes it); a form is written back in the order it was read."""
    kind = held_as(content_type, body)
    if kind == "form":
        return urllib.parse.urlencode(form_fields(body)).encode("ascii")
    if kind == "bytes":
        return exact_bytes(body)
    return None


def check_body(content_type: str | None, body: Any) -> None:
    """Refuse (`BodyError`) a body that is not what its content type says the plan holds."""
    if content_type is not None and not (content_type.isascii() and content_type.isprintable()):
        raise BodyError("the content type holds a line break or a character a header cannot carry")
    if held_as(content_type, body) != "json" and body is not None:
        wire_bytes(content_type, body)


def by_name(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    """Name and value pairs (a form's fields, a query string's parameters) as an object: a name that
    repeats holds the list of its values, in order."""
    named: dict[str, Any] = {}
    for name, value in pairs:
        if name in named:
            earlier = named[name]
            named[name] = [*earlier, value] if isinstance(earlier, list) else [earlier, value]
        else:
            named[name] = value
    return named


def fields_as_arguments(content_type: str | None, body: Any) -> Any:
    """What a reviewer and a policy read of a body: JSON as it is, a form's fields as an object (a
    repeated name as the list of its values), bytes as what `body_view` shows."""
    kind = held_as(content_type, body)
    if kind == "form":
        return by_name(form_fields(body))
    if kind == "bytes":
        return body_view(content_type, body)
    return body


def without_bytes_view(args: dict[str, Any], content_type: str | None, body: Any) -> dict[str, Any]:
    """`args` without what `fields_as_arguments` made of a body held as bytes (its length, digest and
    preview, merged in or under `body`): that preview shows bytes (a PNG's header holds NULs), not text
    anyone wrote, so a check for hidden characters in text passes it by. Arguments of the agent's own,
    and the arguments of any other body, come back as they are."""
    if body is None or held_as(content_type, body) != "bytes":
        return args
    view = body_view(content_type, body)
    if args.get("body") == view:
        return {name: value for name, value in args.items() if name != "body"}
    if isinstance(view, dict) and all(args.get(name) == value for name, value in view.items()):
        return {name: value for name, value in args.items() if name not in view}
    return args


def body_view(content_type: str | None, body: Any) -> Any:
    """The body as the review screen shows it: JSON and forms as fields; bytes as content type,
    length, SHA-256 and a preview (text for the screen to sanitize, undecodable bytes as escapes);
    a multipart form part by part, each file by name, length and digest."""
    kind = held_as(content_type, body)
    if kind == "form":
        return fields_as_arguments(content_type, body)
    if kind == "json":
        return body
    try:
        raw = exact_bytes(body)
    except BodyError as error:
        return {"unreadable body": str(error)}
    view: dict[str, Any] = {"content type": content_type or OCTETS, **_digest(raw)}
    if media_type(content_type) == "multipart/form-data":
        view["parts"] = multipart_parts(content_type or "", raw)
    else:
        view["preview"] = _preview(raw)
    return view


def _digest(raw: bytes) -> dict[str, Any]:
    import hashlib

    return {"length": len(raw), "sha256": hashlib.sha256(raw).hexdigest()}


def _preview(raw: bytes) -> str:
    text = raw[:PREVIEW_BYTES].decode("utf-8", errors="backslashreplace")
    return text + ("…" if len(raw) > PREVIEW_BYTES else "")


def multipart_parts(content_type: str, raw: bytes) -> list[dict[str, Any]]:
    """Each part of a `multipart/form-data` body by name: a file by its name, length and SHA-256, a
    field by its value (previewed). Unparsable bytes are one entry that says so."""
    import email.parser
    import email.policy

    head = f"Content-Type: {content_type}\r\nMIME-Version: 1.0\r\n\r\n".encode("latin-1", "replace")
    message = email.parser.BytesParser(policy=email.policy.HTTP).parsebytes(head + raw)
    if not message.is_multipart():
        return [{"unreadable": "the body is not the multipart form its content type says"}]
    parts: list[dict[str, Any]] = []
    for part in message.iter_parts():
        if len(parts) == MAX_PARTS:
            parts.append({"more parts": "not shown"})
            break
        payload = part.get_payload(decode=True)
        data = payload if isinstance(payload, bytes) else b""
        entry: dict[str, Any] = {"name": part.get_param("name", header="content-disposition") or ""}
        filename = part.get_filename()
        if filename is not None:
            entry |= {"file": filename, **_digest(data)}
        else:
            entry["value"] = _preview(data)
        parts.append(entry)
    return parts
