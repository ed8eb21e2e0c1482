"""Secrets left out of what is shown, logged or answered, with one marker: `[redacted]`.

Every place that quotes text a credential could be in (an audit source's error, a sandbox's answer, a
log line naming a `--notify` URL, an error body quoting what a caller sent) passes it through `redact`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Final

MARKER: Final = "[redacted]"


def redact(text: str, secrets: Iterable[str] = (), patterns: Iterable[re.Pattern[str]] = ()) -> str:
    """`text` with each of `secrets` replaced by `MARKER`, as written and as JSON escapes it (an answer
    quoting a body), longest first: a whole header value goes before the token inside it, and no piece
    of a longer secret is left showing. Then every match of `patterns` (a token's shape) goes too."""
    forms = {form for secret in secrets if secret for form in (secret, json.dumps(secret)[1:-1])}
    for secret in sorted(forms, key=len, reverse=True):
        text = text.replace(secret, MARKER)
    for pattern in patterns:
        text = pattern.sub(MARKER, text)
    return text


def header_secrets(headers: Mapping[str, str]) -> set[str]:
    """What of each header value is a credential: the whole value and its last word (the token of
    `Bearer TOKEN`)."""
    return {part for value in headers.values() for part in (value, value.rpartition(" ")[2])}
