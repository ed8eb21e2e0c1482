"""JSON text read where anyone may have written it: a statement a reviewer signed, a file on disk
(a ledger, a remembered checkpoint, a sign-in session, a recording).

The standard library's reader recurses once per level of nesting, so `[[[[...` a few thousand
deep ends in a `RecursionError`, which no caller expects of bad input: a traceback in a command, a
500 from the queue. `loads` turns it into the `ValueError` every caller already answers as "this is
not what it should be", naming why.
"""

from __future__ import annotations

from typing import Any


def loads(text: str | bytes, **options: Any) -> Any:
    """`json.loads(text, **options)`, whose every refusal is a `ValueError` (nesting too deep
    included). The standard library's `json` is imported on the first call: the demo's start, which
    reads no JSON text this way, does not pay for it."""
    import json

    try:
        return json.loads(text, **options)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None
