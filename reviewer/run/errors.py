"""The errors `reviewer run` reports as one line, each saying what happened and what to do."""

from __future__ import annotations

from reviewer.sandbox.errors import SandboxRefused


class RunRefused(SandboxRefused):
    """Something `reviewer run` refuses before COMMAND starts (a bad option, an API or queue it cannot
    use); nothing ran and nothing was submitted."""


class DryRunSpoiled(Exception):
    """The dry run cannot become a plan (a body that is not JSON, a plan past the proposal limits, a
    write the API kept); the child was stopped and nothing was submitted."""


class ChildFailed(Exception):
    """COMMAND exited non-zero, was killed, or ran past its time."""
