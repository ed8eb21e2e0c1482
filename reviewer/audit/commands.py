"""`reviewer verify PROPOSAL_ID --audit KIND:LOCATION`: a run's report against the API's own audit log.

One line per call (matched, differs, missing), the writes in the run's window no approved call made,
then `audit: N of M calls matched; K writes in the audit log no approved call made`. Exit 0 only when
every call matched, no such write was found, and the log could vouch for the run (it was read, it has
entries in the run's window, and none of its lines was unreadable).
"""

from __future__ import annotations

import argparse
import asyncio
import signal
import sys
import threading
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from reviewer.audit.options import add_source_options

if TYPE_CHECKING:  # every command registers through this module: keep `reviewer --help` light
    from reviewer.audit.matching import AuditMatch, CallInLog, SentCall, Unplanned, Window
    from reviewer.audit.registry import AuditSource
    from reviewer.audit.rows import AuditRow
    from reviewer.queue.messages import DecisionState, StoredExecution
    from reviewer.reading.minted_checks import MintedCheck

EXIT_VERIFIED, EXIT_NOT_VERIFIED, EXIT_USAGE = 0, 1, 2
EXIT_INTERRUPTED = 130


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "verify",
        help="hold a run's report against the API's own audit log, call by call",
        description=(
            "Match each call of PROPOSAL_ID's last real run with the API's audit log (by request id, "
            "else by method, path, query and time), and list the writes in the run's window no "
            "approved call made. Kinds: sample, access-log, k8s, cloudtrail, stripe, jsonl, and any "
            "a package adds."
        ),
    )
    parser.add_argument("proposal_id", metavar="PROPOSAL_ID")
    add_source_options(parser, "The run is held against it call by call", required=True)
    parser.add_argument("--queue", metavar="URL", help="the queue's URL (default: from the config)")
    parser.add_argument(
        "--slack",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="how far the log's clock may be from the queue's (default 5)",
    )
    parser.set_defaults(func=run_verify)


class VerifyFailed(Exception):
    """Why nothing could be verified, in one line, and the exit code it means."""

    def __init__(self, message: str, exit_code: int = EXIT_NOT_VERIFIED) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def run_verify(options: argparse.Namespace) -> int:
    """The queue is asked in an event loop; the log is read after it, in this thread, so Ctrl-C ends a
    read at once whatever the source holds (a thread's read could not be interrupted)."""
    from reviewer.audit.checks import run_against
    from reviewer.audit.inputs import AuditSourceUnreadable

    source_name = "the audit log"
    doing = "asking the queue"
    try:
        source = _source_of(options)
        source_name = source.name
        calls, window, dry_run_ids, minted = _ask_the_queue(options)
        # Read after the queue answered: the log then holds everything up to the report.
        doing = f"reading {source_name}"
        result = run_against(source, calls, window, dry_run_ids)
    except VerifyFailed as error:
        print(f"reviewer verify: {error}", file=sys.stderr)
        return error.exit_code
    except AuditSourceUnreadable as error:
        print(f"audit: {source_name} could not be read: {error}; nothing is verified")
        return EXIT_NOT_VERIFIED
    except KeyboardInterrupt:
        print(f"reviewer verify: interrupted while {doing}; nothing is verified", file=sys.stderr)
        return EXIT_INTERRUPTED
    _print(result, source.name, window)
    _print_minted(minted)
    return EXIT_VERIFIED if result.verified and not minted else EXIT_NOT_VERIFIED


def _ask_the_queue(
    options: argparse.Namespace,
) -> tuple[list[SentCall], Window, Sequence[str], list[MintedCheck]]:
    """The run as the queue stored it, asked in an event loop that Ctrl-C cancels and that then raises
    `KeyboardInterrupt`, however late the Ctrl-C lands: asyncio's own handler cancels the task, and
    one that lands as the task ends is lost, so the log's read that follows (an endless standard
    input) would not stop."""
    interrupted = threading.Event()

    async def asking() -> tuple[list[SentCall], Window, list[str], list[MintedCheck]]:
        loop, task = asyncio.get_running_loop(), asyncio.current_task()
        assert task is not None

        def interrupt() -> None:
            interrupted.set()
            task.cancel()

        if threading.current_thread() is threading.main_thread():
            loop.add_signal_handler(signal.SIGINT, interrupt)
        try:
            return await _run_of(options)
        finally:
            if threading.current_thread() is threading.main_thread():
                loop.remove_signal_handler(signal.SIGINT)

    try:
        answer = asyncio.run(asking())
    except asyncio.CancelledError:
        if interrupted.is_set():
            raise KeyboardInterrupt from None
        raise
    if interrupted.is_set():
        raise KeyboardInterrupt
    return answer


def _print_minted(minted: Sequence[MintedCheck]) -> None:
    """The run held to its own answers (`reviewer.reading.minted_checks`): a call that sent a value
    only the dry run minted, or a placeholder resolved otherwise, wrote to another resource."""
    from reviewer.plan.sanitize import safe_text

    for problem in minted:
        print(safe_text(problem.sentence()))
    if minted:
        print(
            f"placeholders: {len(minted)} values not what the run's own answers gave; the run is not verified"
        )


def _source_of(options: argparse.Namespace) -> AuditSource:
    """`--audit`, `--audit-field` and `--audit-header` as the source to read; a usage error else."""
    from reviewer.audit.options import BadAuditOption, audit_headers, audit_option

    try:
        source = audit_option(options.audit, options.audit_field, audit_headers(options.audit_header))
    except BadAuditOption as error:
        raise VerifyFailed(str(error), EXIT_USAGE) from None
    assert source is not None  # --audit is required
    return source


async def _run_of(
    options: argparse.Namespace,
) -> tuple[list[SentCall], Window, list[str], list[MintedCheck]]:
    """The last real run of the proposal, as calls to find, its window (claim to report), the
    request ids its server dry run was sent with (the plan's), and what the run sent that its own
    answers did not give."""
    import httpx

    from reviewer.audit.matching import Window, sent_calls
    from reviewer.queue.client import QueueClient
    from reviewer.queue.config import ConfigError, load_settings
    from reviewer.queue.refusals import QueueError
    from reviewer.reading.minted_checks import minted_value_checks, reported_calls

    try:
        settings = load_settings(options.queue)
    except ConfigError as error:
        raise VerifyFailed(str(error), EXIT_USAGE) from None
    try:
        async with QueueClient(settings.queue_url, settings.credential()) as client:
            executions = await client.get_executions(options.proposal_id)
            if not executions:
                raise VerifyFailed(f"{options.proposal_id} has no real run reported; nothing to verify")
            execution = executions[-1]
            state = await client.decision_state(options.proposal_id)
            proposal = await client.get_revision(options.proposal_id, execution.revision)
    except QueueError as error:
        raise VerifyFailed(str(error)) from None
    except ValueError as error:  # a proposal id outside the format, refused before any request
        raise VerifyFailed(str(error), EXIT_USAGE) from None
    base_url = proposal.target.base_url
    base_path = httpx.URL(base_url).path if base_url else ""
    calls = sent_calls(execution.calls, execution.request_ids or [], base_path)
    start = _claimed_at(state, execution, calls)
    window = Window(start, execution.at.astimezone(UTC), timedelta(seconds=options.slack))
    minted = minted_value_checks(proposal, reported_calls(execution.calls))
    return calls, window, proposal.dry_run.request_ids or [], minted


def _claimed_at(state: DecisionState, execution: StoredExecution, calls: Sequence[SentCall]) -> datetime:
    """The run's claim, as the queue holds it; else the first call's send time; else the report's time."""
    if state.claimed_at is not None and state.revision == execution.revision:
        return state.claimed_at.astimezone(UTC)
    sent = [call.sent_at for call in calls if call.sent_at is not None]
    return min(sent) if sent else execution.at.astimezone(UTC)


def _print(result: AuditMatch, source_name: str, window: Window) -> None:
    from reviewer.audit.matching import excluded_words
    from reviewer.plan.sanitize import safe_text

    for call in result.calls:
        print(safe_text(_call_line(call)))
    for unplanned in result.unplanned:
        print(safe_text(f"unplanned: {unplanned_text(unplanned)}"))
    notes = []
    if result.rows_in_window == 0:
        notes.append(
            f"{source_name} has no entries between {window.start.isoformat()} and "
            f"{window.end.isoformat()} ({result.rows_read} read): it cannot vouch for the run"
        )
    if result.malformed_count:
        first = ", ".join(f"{line.where} ({line.problem})" for line in result.malformed[:3])
        notes.append(f"{result.malformed_count} lines could not be read, first {first}")
    if result.dry_runs_in_window:
        notes.append(
            f"{result.dry_runs_in_window} dry-run requests in the window (the API's own word, or the "
            "request ids the proposal names), not counted as writes"
        )
    excluded = excluded_words(result.gate_dry_runs)
    if excluded:
        notes.append(excluded)
    for note in notes:
        print(safe_text(f"note: {note}"))
    if not result.complete:
        print("audit: incomplete, the log cannot vouch for this run")
    print(result.summary)


def _call_line(result: CallInLog) -> str:
    call = result.call
    head = f"call {call.seq} {call.tool} {call.method} {call.path}"
    if result.verdict == "ambiguous":
        wheres = ", ".join(row.where for row in result.candidates[:5])
        more = f" and {len(result.candidates) - 5} more" if len(result.candidates) > 5 else ""
        return (
            f"{head}: ambiguous, not verified: {len(result.candidates)} entries of the same method, path "
            f"and query could each be it ({wheres}{more}), and {_no_ids(call)} to tell them apart"
        )
    if result.row is None:
        return f"{head}: missing (no entry with its request id, nor its method, path and query)"
    where = f"{result.row.where}, by {result.matched_by}"
    if result.matched_by == "method, path, query and time":
        where = f"{result.row.where}, by method and path only: {_no_ids(call)}"
    if result.verdict == "differs":
        return f"{head}: differs ({'; '.join(result.differences)}) at {where}"
    return f"{head}: matched at {where}"


def _no_ids(call: SentCall) -> str:
    """Why a call was looked for by its request line: the log's format keeps no ids, or the run's
    report holds none for the call."""
    if call.request_ids:
        return "this log keeps no request ids"
    return "the run's report holds no request id for this call"


def row_text(row: AuditRow) -> str:
    """One audit row as a reader names it: what, status, when, by whom, with what, where in the log."""
    path = f"{row.path}?{row.query}" if row.query else row.path
    what = " ".join(part for part in (row.method, path, row.action or "", row.error or "") if part)
    when = row.time.isoformat() if row.time else "no time"
    actor = row.actor or "an unnamed actor"
    status = f" {row.status}" if row.status is not None else ""
    return f"{what}{status} at {when} by {actor}, user agent {row.user_agent or 'none'} ({row.where})"


def unplanned_text(unplanned: Unplanned) -> str:
    """An unplanned write as `row_text` names it, then what makes it stand out (`reuses call 2's
    request id`)."""
    notes = "".join(f"; {note}" for note in unplanned.notes)
    return f"{row_text(unplanned.row)}{notes}"
