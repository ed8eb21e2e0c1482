"""reviewer: an approval gate between an AI agent's dry run and its real writes."""

from __future__ import annotations

import gc
from collections.abc import Callable, Iterator
from contextlib import contextmanager

DISTRIBUTION = "reviewer-gate"
"""The name the project is installed under (`pip install reviewer-gate`)."""


def release() -> str:
    """The installed release's version (`reviewer --version`, `/healthz`, `serve`'s first line); `unknown`
    where the project runs from a source tree that was never installed. Read on demand: the package
    metadata is not loaded by commands that do not ask."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"


@contextmanager
def collection_held() -> Iterator[Callable[[], None]]:
    """Python's garbage collector held off while a long-running command starts (`serve`, `run`,
    `mcp-gate`): start-up makes what lives as long as the process (modules, classes, routes), and
    the collector's passes over it, nearly 200 before a queue answered, were a tenth of its CPU.
    The hold ends on leaving the block, or earlier when the function it gives is called (as the
    command starts serving): what start-up made is frozen (never scanned again) and collection
    resumes. Where collection is off already (inside another such block), it changes nothing."""
    if not gc.isenabled():
        yield lambda: None
        return

    def resume() -> None:
        if not gc.isenabled():
            gc.collect()  # what start-up left unreachable (a caught error's frames) is freed, not frozen
            gc.freeze()
            gc.enable()

    gc.disable()
    try:
        yield resume
    finally:
        resume()
