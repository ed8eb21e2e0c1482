"""The names that mean "dry run" (dryRun, dry_run, validate_only...): one list for the agent and the checks.

The flag belongs to the runner: a tool argument named like it is dropped, and a server dry run's own
query parameter is never part of what a real call sends, so plans and real calls are compared without it.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

DRY_RUN_NAMES: Final = frozenset({"dryrun", "validateonly"})
"""Argument and query names that mean "dry run", however they are spelled (dryRun, dry_run, dry-run...)."""


def names_dry_run(name: object) -> bool:
    """Whether an argument or query name means the dry-run flag (which only the runner may set)."""
    return isinstance(name, str) and name.replace("_", "").replace("-", "").lower() in DRY_RUN_NAMES


def without_dry_run_params(query: Mapping[str, Any] | None) -> dict[str, Any]:
    """A query as a real run sends it: a server dry run's own parameter is not part of it."""
    return {name: value for name, value in (query or {}).items() if not names_dry_run(name)}
