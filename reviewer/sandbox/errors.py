"""What a sandbox cannot be made as asked: said in one line, before anything starts."""

from __future__ import annotations


class SandboxRefused(Exception):
    """The sandbox cannot be made as asked (no bubblewrap, no filter, a path that would open the home,
    a secret any user may open); nothing started."""
