"""The alarm on a plan before anyone approves it: writes in the API's log during the dry run that the
gate did not make (DESIGN 16), such as a child process that wrote around the gate.

During a server dry run every request the gate sends asks for a dry run, which no source counts as a
write; so every write the log holds for the dry run's window was made by someone else, unless the API
ignored the dry-run parameter, which `writes_kept` already says.
"""

from __future__ import annotations

from datetime import datetime, timedelta

from reviewer.audit.registry import AuditSource
from reviewer.reading.audit_matching import AuditMatch, Window, match_audit


def writes_during_dry_run(
    source: AuditSource, started_at: datetime, finished_at: datetime, slack: timedelta = timedelta(seconds=2)
) -> AuditMatch:
    """The log read for the dry run's window: `unplanned` are the writes the gate did not make; a log
    with no entry in the window (`complete` false) cannot say there were none."""
    return match_audit((), source.rows(), Window(started_at, finished_at, slack))


def alarm_line(result: AuditMatch) -> str:
    """`dry run: 1 write during the dry run the gate did not make`, or why the log cannot say."""
    if not result.complete:
        return (
            "dry run: the audit log cannot vouch for the dry run's window (no entries, or unreadable lines)"
        )
    return f"dry run: {len(result.unplanned)} writes during the dry run the gate did not make"
