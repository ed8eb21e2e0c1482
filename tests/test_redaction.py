"""The one redaction: every secret out, whole, as written or as JSON escapes it, with one marker."""

from __future__ import annotations

import json
import re

from reviewer.redaction import MARKER, header_secrets, redact


def test_a_secret_goes_whole_as_written_and_as_json_escapes_it() -> None:
    secret = 's3cret"tok\\en'
    quoted = f"refused {secret}; body {json.dumps({'detail': secret})}"
    shown = redact(quoted, {secret})
    assert "s3cret" not in shown and shown.count(MARKER) == 2


def test_a_whole_header_value_goes_before_the_token_inside_it() -> None:
    """Longest first: the token replaced first would leave `Bearer [redacted]` and, worse, a longer
    secret that holds a shorter one would keep its tail."""
    secrets = header_secrets({"Authorization": "Bearer abc123xyz", "X-Key": "abc123xyz-extra"})
    assert redact("Bearer abc123xyz and abc123xyz-extra", secrets) == f"{MARKER} and {MARKER}"


def test_patterns_go_too_and_an_empty_secret_blanks_nothing() -> None:
    token_shaped = re.compile(r"rvw_[A-Za-z0-9_-]+")
    assert redact("/v1/rvw_AbC-9/x", {""}, (token_shaped,)) == f"/v1/{MARKER}/x"
