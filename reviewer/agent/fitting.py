"""An answer as a run's report stores it: whole when it fits the queue's limits, else clipped.

An API or an MCP server may answer an approved write with anything: 20 MB of JSON, a string longer
than the queue keeps, nesting deeper than it reads. The report must be stored all the same (it is
what tells reviewers the write happened), so each call's answer that does not fit is replaced by what
identifies it: its length in bytes, its SHA-256, and its first characters. The bytes are the answer's
compact JSON (a string's own UTF-8 bytes), so whoever holds the full answer can check it is the one
the report names.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any, Final

import msgspec

from reviewer.plan.proposal import MAX_BODY_BYTES, MAX_STRING_CHARS, value_within_limits

ANSWER_BYTES: Final = 256 * 1024
"""The most of one call's answer a report keeps whole."""
REPORT_ANSWER_BYTES: Final = MAX_BODY_BYTES // 4
"""The most of all the answers one report keeps whole; after that, every answer is clipped."""
HEAD_CHARS: Final = 1024
"""Characters of a clipped answer kept, for a person to recognise it."""
_ANSWER_DEPTH: Final = 5
"""Where an answer sits in a report: the body, `calls`, a call, its `outcome`, the answer."""


def clipped(value: Any) -> dict[str, Any]:
    """What stands for an answer too large for the report: its length, SHA-256 and first characters."""
    data = _bytes_of(value)
    return {
        "clipped": True,
        "bytes": len(data),
        "sha256": hashlib.sha256(data).hexdigest(),
        "head": data[: HEAD_CHARS * 4].decode("utf-8", "ignore")[:HEAD_CHARS],
    }


def fit_calls(calls: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The report's calls (as plain JSON values) with each answer (`outcome.result`, `outcome.message`)
    whole while it fits one answer's share and the report's, clipped otherwise."""
    budget = REPORT_ANSWER_BYTES
    fitted = []
    for call in calls:
        outcome = call.get("outcome")
        if not isinstance(outcome, Mapping):
            fitted.append(call)
            continue
        kept = dict(outcome)
        for name in ("result", "message"):
            if kept.get(name) is None:
                continue
            size = _size_if_fits(kept[name])
            if size is None or size > budget:
                kept[name] = clipped(kept[name]) if name == "result" else _clipped_text(kept[name])
            else:
                budget -= size
        fitted.append({**call, "outcome": kept})
    return fitted


def _size_if_fits(value: Any) -> int | None:
    """The answer's size in bytes when it keeps to the limits and one answer's share, else None."""
    if isinstance(value, str):
        return len(value.encode()) if len(value) <= min(MAX_STRING_CHARS, ANSWER_BYTES) else None
    try:
        size = len(msgspec.json.encode(value))
    except (TypeError, OverflowError, RecursionError, msgspec.EncodeError):
        return None
    if size > ANSWER_BYTES or not value_within_limits(value, _ANSWER_DEPTH):
        return None
    return size


def _clipped_text(value: Any) -> str:
    """A message too long to keep: its head, then its length and SHA-256 in words."""
    summary = clipped(value)
    return f"{summary['head']}… [clipped: {summary['bytes']} bytes in all, sha256 {summary['sha256']}]"


def _bytes_of(value: Any) -> bytes:
    if isinstance(value, str):
        return value.encode("utf-8", "surrogatepass")
    try:
        return msgspec.json.encode(value)
    except (TypeError, OverflowError, RecursionError, msgspec.EncodeError):
        return repr(value).encode("utf-8", "surrogatepass")
