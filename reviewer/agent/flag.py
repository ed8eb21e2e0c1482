"""The dry-run flag: owned by the runner, on by default, one value per run (a ContextVar).

Why a ContextVar and not a module-level switch: an agent runner often serves several runs in one
process as asyncio tasks. A global flag set to "real" by one run is seen by every other run that
happens to be awaiting at that moment, so a dry run would write for real. A ContextVar is copied
into each task when it is created, so each run sees only the value it (or its parent) set, and
`reset` puts back exactly the value that was there before, even when runs nest.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Final

from reviewer.agent.tools import ACTIVE_RUN, ToolRunner

DRY_RUN: Final[ContextVar[bool]] = ContextVar("reviewer_agent_dry_run", default=True)
"""True unless a real run set it: code that forgot to set it stays dry."""


def is_dry_run() -> bool:
    """Whether a write tool called here, now, would only be dry-run."""
    return DRY_RUN.get()


@contextmanager
def run_scope(runner: ToolRunner, *, dry: bool) -> Iterator[None]:
    """Set the flag and the active run for the current context, and put the previous ones back at exit."""
    flag_token = DRY_RUN.set(dry)
    run_token = ACTIVE_RUN.set(runner)
    try:
        yield
    finally:
        ACTIVE_RUN.reset(run_token)
        DRY_RUN.reset(flag_token)
