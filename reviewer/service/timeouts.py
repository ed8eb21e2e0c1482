"""The read deadlines' defaults, shared by `reviewer serve`'s flags, its server and the h11 protocol
that enforces them (which the server imports only when it is configured)."""

from __future__ import annotations

from typing import Final

DEFAULT_HEADER_TIMEOUT: Final = 10.0
"""A request's headers are a few hundred bytes: ten seconds is generous on any link."""
DEFAULT_BODY_TIMEOUT: Final = 120.0
"""A body of the 64 MB limit at about 0.5 MB/s; a slower upload is refused, not waited for."""
