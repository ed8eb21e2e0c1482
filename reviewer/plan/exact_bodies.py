"""A JSON or form body as the exact text the agent sent: the bytes approved are the bytes sent.

A plan holds a JSON or form body twice: as its value (`body`, what the reviewer, a policy and the
matching read) and as its exact text (`text`, what goes on the wire), each placeholder written as the
plan writes it (`<id from call 1>`). The executor fills each placeholder in place, encoded as the body
needs it (a JSON string's escapes, a form's percent-encoding; a JSON string that is only the
placeholder becomes the value itself, as `resolve` makes it), and sends the text only when it reads
as the body resolved does. So key order, whitespace and escapes reach the API as the dry run saw
them, instead of a re-encoding of the parsed value.

A body two parsers would read differently is refused before it is recorded (`ambiguity`): a JSON
object that names a key twice (most parsers keep the last value, some the first, some refuse) and a
form with a raw `;` (some servers split fields on it, Python's and most others do not:
`amount=100;amount=999999`). Keeping such a body and showing its bytes would ask the reviewer to
know which parser the API runs; refusing costs the agent one encoding fix (`%3B`, one key). A form
name that repeats is no such body: every parser reads all its values, and the plan shows them all.
"""

from __future__ import annotations

import re
import urllib.parse
from collections.abc import Callable
from typing import Any, Final

from reviewer import json_text
from reviewer.plan.bodies import BodyError, body_kind, record_body
from reviewer.plan.placeholders import ABSENT, PLACEHOLDER, Reference

TEXT_CHUNK: Final = 256 * 1024
"""Characters per piece of `text`: well under a plan string's limit."""


def ambiguity(content_type: str | None, raw: bytes) -> str | None:
    """Why two parsers would read `raw` differently, in words, or None."""
    kind = body_kind(content_type)
    if kind == "form" and b";" in raw:
        return "a form body with a raw ';', which some servers read as a field separator; send it as %3B"
    if kind == "json":
        try:
            json_text.loads(raw, object_pairs_hook=_unique_keys)
        except _DuplicateKey as duplicate:
            return f"a JSON body whose object names the key {str(duplicate)[:80]!r} twice; send each key once"
        except ValueError:
            return None  # not JSON: the body's own reading says so
    return None


class _DuplicateKey(ValueError):
    pass


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    names = [name for name, _ in pairs]
    if len(set(names)) != len(names):
        raise _DuplicateKey(next(name for name in names if names.count(name) > 1))
    return dict(pairs)


def as_chunks(text: str) -> list[str]:
    return [text[start : start + TEXT_CHUNK] for start in range(0, len(text), TEXT_CHUNK)] or [""]


def filled(content_type: str | None, text: list[str], lookup: Callable[[Reference], Any]) -> list[str]:
    """`text` with each placeholder `lookup` knows written in as the body's kind encodes it; one it
    answers `ABSENT` for stays as it is."""
    joined = "".join(text)
    if body_kind(content_type) == "form":

        def in_form(match: re.Match[str]) -> str:
            found = lookup(Reference.of(match))
            return match.group(0) if found is ABSENT else urllib.parse.quote_plus(str(found))

        return as_chunks(PLACEHOLDER.sub(in_form, joined))
    whole = re.compile('"' + PLACEHOLDER.pattern + '"|' + PLACEHOLDER.pattern)

    import json  # here, not at the top: loading a plan (the demo's start) needs it not

    def in_json(match: re.Match[str]) -> str:
        inner = PLACEHOLDER.search(match.group(0))
        assert inner is not None
        found = lookup(Reference.of(inner))
        if found is ABSENT:
            return match.group(0)
        if match.group(0).startswith('"'):
            return json.dumps(found, ensure_ascii=False)
        return json.dumps(str(found), ensure_ascii=False)[1:-1]

    return as_chunks(whole.sub(in_json, joined))


def check_text(content_type: str | None, text: Any, body: Any) -> bytes:
    """The bytes `text` is, when they read as `body` (parsed as the plan records a body of
    `content_type`); `BodyError` when they do not, or `text` is not a list of strings."""
    if not isinstance(text, list) or not all(isinstance(piece, str) for piece in text):
        raise BodyError('a body\'s text is its pieces: ["...", ...]')
    raw = "".join(text).encode("utf-8", "surrogatepass")
    kind = body_kind(content_type)
    if kind == "bytes":
        raise BodyError("a body held as bytes has no text: its bytes are the body")
    if kind == "form":
        read = record_body(content_type, raw)[1]
    else:
        try:
            read = json_text.loads(raw)
        except ValueError as error:
            raise BodyError(f"the body's text is not JSON: {error}") from None
    if not _same(read, body):
        raise BodyError("the body's text does not read as the body shown: it is not the request approved")
    return raw


def _same(read: Any, body: Any) -> bool:
    """Equal as JSON values: `true` is not `1` (Python's `==` says it is), `1` is `1.0`."""
    if isinstance(read, bool) or isinstance(body, bool):
        return type(read) is type(body) and read == body
    if isinstance(read, dict):
        return (
            isinstance(body, dict)
            and read.keys() == body.keys()
            and all(_same(value, body[key]) for key, value in read.items())
        )
    if isinstance(read, list | tuple):
        return isinstance(body, list | tuple) and len(read) == len(body) and all(map(_same, read, body))
    return (type(read) is type(body) or {type(read), type(body)} <= {int, float}) and read == body
