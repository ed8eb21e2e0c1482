"""JSON text read where anyone may have written it: a statement a reviewer signed, a file on disk
(a ledger, a remembered checkpoint, a sign-in session, a recording).

The standard library's reader recurses once per level of nesting, so `[[[[...` a few thousand
deep ends in a `RecursionError`, which no caller expects of bad input: a traceback in a command, a
500 from the queue. `loads` turns it into the `ValueError` every caller already answers as "this is
not what it should be", naming why.
"""

from __future__ import annotations

import json
from typing import Any


def loads(text: str | bytes) -> Any:
    """`json.loads`, whose every refusal is a `ValueError` (nesting too deep included)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise ValueError("JSON nested too deep to read") from None
