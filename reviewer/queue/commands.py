"""`reviewer approve`, `reviewer reject` and `reviewer request-changes`: decide from the command line, as
the app does; `reviewer list` and `reviewer show`: read what waits, and the digest an approval names;
`reviewer submit`: put proposal files on the queue as an agent would (`reviewer.queue.submitting`).

The same credential (the reviewer's token from `reviewer login` or `REVIEWER_TOKEN`) and the same
signing (`reviewer.queue.deciding`), for the reviewer who read the plan elsewhere, or scripts a second
approval from a runbook. An approval must name the digest it approves; a rejection is safe to send
without one, so it takes the digest the queue holds for that revision.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # every command registers through this module: `reviewer demo` must not load pydantic
    from reviewer.queue.answers import StateFields
    from reviewer.queue.messages import Decision
    from reviewer.queue.shell_client import ShellQueue

_DIGEST: Final = re.compile(r"^[0-9a-f]{64}$")
ID_HELP: Final = "the proposal's id, or any start of it that no other id shares"


def register(subparsers: Any) -> None:
    approve = subparsers.add_parser(
        "approve",
        help="approve one revision of a proposal, by its digest",
        description="Approve revision N of proposal ID, naming the plan digest you reviewed. Signed with "
        "your SSH key when one is configured (--key, REVIEWER_SIGNING_KEY, or signing_key in config.toml).",
    )
    approve.add_argument("proposal_id", metavar="ID", help=ID_HELP)
    approve.add_argument("--revision", type=int, required=True, metavar="N")
    approve.add_argument("--digest", required=True, metavar="SHA256", help="the plan digest you reviewed")
    approve.add_argument(
        "--break-glass",
        metavar="REASON",
        help="also let the plan run outside its change windows once the policy's number of reviewers "
        "did so; REASON (why it cannot wait) goes in the trail",
    )
    _common_options(approve)
    approve.set_defaults(func=run_decision, decision="approve", reason="")

    _with_reason(
        subparsers,
        "reject",
        help="reject one revision of a proposal, with a reason",
        description="Reject revision N of proposal ID. Signed like an approval when a key is configured.",
        reason_help="why, for the agent and the trail",
    )
    _with_reason(
        subparsers,
        "request-changes",
        help="ask the agent to re-plan one revision of a proposal, saying what to change",
        description="Close revision N of proposal ID and ask its agent to re-plan: the reason is what to "
        "change, and the agent's next revision is reviewed against this one. Signed like an approval "
        "when a key is configured.",
        reason_help="what to change, for the agent's re-plan and the trail",
    )

    listing = subparsers.add_parser(
        "list",
        help="what waits for your decision, newest first, with environment and alarms",
        description="List the queue's pending proposals in the environments the queue's policy lets "
        "you decide, newest submission first: environment, counts, money and alarms of each, as the "
        "queue read them at submission. Under your reviewer token, as the app is.",
    )
    listing.add_argument("--environment", metavar="ENV", help="only plans that say this environment")
    listing.add_argument("--agent", metavar="NAME", help="only plans the agent token NAME submitted")
    listing.add_argument(
        "--alarm", metavar="KIND", help="only plans raising this alarm (deletes, writes_kept ...)"
    )
    listing.add_argument(
        "--older-than", metavar="DURATION", help="only plans waiting this long at least: 30m, 12h, 2d"
    )
    listing.add_argument("--limit", type=int, metavar="N", help="at most N proposals")
    listing.add_argument(
        "--all", action="store_true", help="every environment: those you do not decide after yours"
    )
    _reading_options(listing)
    listing.set_defaults(func=run_reading, reading="list")

    show = subparsers.add_parser(
        "show",
        help="one plan's summary, alarms, full digest and the line that approves it",
        description="Show revision N (the latest by default) of proposal ID as the review screen reads "
        "it: its claim, counts, money, alarms, extremes and every call (verdict, method, path, the "
        "arguments that differ), the queue's full plan digest (once the fetched plan hashes to it) "
        "and the exact `reviewer approve` line to run after reading it. Through $PAGER on a terminal.",
    )
    show.add_argument("proposal_id", metavar="ID", help=ID_HELP)
    show.add_argument("--revision", type=int, metavar="N", help="a revision other than the latest")
    show.add_argument(
        "--link",
        action="store_true",
        help="print only the link of the latest revision's review page (a queue with --web-origin), "
        "to open on a phone and decide there with a passkey",
    )
    _reading_options(show)
    show.set_defaults(func=run_reading, reading="show")

    submit = subparsers.add_parser(
        "submit",
        help="put proposal files on a live queue under an agent token, and print the line that opens each",
        description="Check every FILE as the queue checks a proposal, then submit them in the order given "
        "under an agent token ($REVIEWER_AGENT_TOKEN or --token-file). A file that is not a proposal the "
        "queue would take is named with the format's words, and then none is sent. Prints each id, "
        "revision and state, and the `reviewer review ID` line that opens it.",
    )
    submit.add_argument("files", nargs="+", type=Path, metavar="FILE", help="a proposal file (JSON)")
    from reviewer.queue.trust import add_queue_options

    add_queue_options(submit, default="REVIEWER_QUEUE")
    submit.add_argument("--token-file", type=Path, metavar="FILE", help="a file holding the agent token")
    submit.add_argument(
        "--new-id",
        action="store_true",
        help="file each proposal under a fresh id (one a proposal id, shared by its revisions' files)",
    )
    submit.set_defaults(func=_run_submit)


def _with_reason(subparsers: Any, name: str, *, help: str, description: str, reason_help: str) -> None:
    """`reject` and `request-changes`: a decision that approves nothing, so it takes the queue's digest."""
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.add_argument("proposal_id", metavar="ID", help=ID_HELP)
    parser.add_argument("--revision", type=int, required=True, metavar="N")
    parser.add_argument("--reason", required=True, metavar="TEXT", help=reason_help)
    _common_options(parser)
    parser.set_defaults(func=run_decision, decision=name.replace("-", "_"), digest=None)


def _reading_options(parser: argparse.ArgumentParser) -> None:
    from reviewer.queue.trust import add_queue_options

    add_queue_options(parser)
    parser.add_argument("--json", action="store_true", help="print JSON, for scripts")


def _common_options(parser: argparse.ArgumentParser) -> None:
    from reviewer.queue.trust import add_queue_options

    add_queue_options(parser)
    parser.add_argument(
        "--key",
        type=Path,
        metavar="FILE",
        help="sign with this SSH key: a .pub file signs through ssh-agent, a private key file by itself",
    )


def _run_submit(options: argparse.Namespace) -> int:
    from reviewer.queue.submitting import run_submit

    return run_submit(options)


def run_decision(options: argparse.Namespace) -> int:
    return _exit_code(f"reviewer {options.decision.replace('_', '-')}", _decide, options)


def run_reading(options: argparse.Namespace) -> int:
    """`reviewer list` and `reviewer show`: the queue read under the reviewer's token."""
    return _exit_code(f"reviewer {options.reading}", _read, options)


def _exit_code(command: str, work: Callable[[argparse.Namespace], int], options: argparse.Namespace) -> int:
    """Run a command's work; what it failed on is one line on stderr, named by `command`."""
    try:
        return work(options)
    except DecisionFailed as error:
        print(f"{command}: {error}", file=sys.stderr)
        return error.exit_code


def _read(options: argparse.Namespace) -> int:
    import json
    import shutil

    import msgspec

    from reviewer.queue.config import ConfigError, reviewer_settings
    from reviewer.queue.ids import resolve_proposal_id
    from reviewer.queue.overview import (
        list_lines,
        one_summary,
        pending_summaries,
        plan_json,
        show_lines,
    )
    from reviewer.queue.pager import page_lines
    from reviewer.queue.refusals import QueueError
    from reviewer.queue.shell_client import ShellQueue

    try:
        settings = reviewer_settings(options.queue, options.ca_file)
    except ConfigError as error:
        raise DecisionFailed(str(error), 2) from None
    width = shutil.get_terminal_size((100, 24)).columns
    try:
        with ShellQueue(settings.queue_url, settings.credential()) as client:
            if options.reading == "list":
                if options.limit is not None and options.limit < 1:
                    raise DecisionFailed("--limit must be 1 or more", 2)
                waiting = pending_summaries(client, list_filters(options), options.limit)
                if options.json:
                    rows = [summary.as_json(options.queue) for summary in waiting.summaries]
                    print(json.dumps(rows, indent=2))
                else:
                    page_lines(list_lines(waiting, width))
                return 0
            proposal_id = resolve_proposal_id(client, options.proposal_id)
            if options.link:
                link = _review_link(client, proposal_id)
                print(json.dumps(msgspec.to_builtins(link)) if options.json else link.review)
                return 0
            summary, analysis = one_summary(client, proposal_id, options.revision)
    except LookupError as error:
        raise DecisionFailed(str(error)) from None
    except QueueError as error:
        raise DecisionFailed(str(error)) from None
    except ValueError as error:  # a proposal id outside the format, refused before any request
        raise DecisionFailed(str(error), 2) from None
    if options.json:
        print(json.dumps({**summary.as_json(options.queue), **plan_json(analysis)}, indent=2))
    else:
        page_lines(show_lines(summary, width, options.queue, analysis))
    return 0


def _review_link(client: ShellQueue, proposal_id: str) -> Any:
    """The latest revision's review page; a queue that serves none says how to turn them on."""
    from reviewer.queue.refusals import QueueRefused

    try:
        return client.review_link(proposal_id)
    except QueueRefused as refused:
        if refused.status == 404 and refused.code == "not_found":
            raise DecisionFailed(
                "this queue serves no review pages (its operator starts it with --web-origin)"
            ) from None
        raise


def list_filters(options: argparse.Namespace) -> dict[str, str]:
    """`reviewer list`'s options as the queue's list takes them; the queue checks each."""
    filters = {
        name: value
        for name, value in (
            ("environment", options.environment),
            ("agent", options.agent),
            ("alarm", options.alarm),
            ("older_than", options.older_than),
        )
        if value is not None
    }
    if not options.all:
        filters["yours"] = "true"
    return filters


class DecisionFailed(Exception):
    """Why nothing was decided (or what the queue refused), in one line."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


def _decide(options: argparse.Namespace) -> int:
    from reviewer.queue.config import ConfigError, configured_signer, reviewer_settings
    from reviewer.queue.deciding import not_pending_words, send_decision, stale_words
    from reviewer.queue.ids import resolve_proposal_id
    from reviewer.queue.refusals import AlreadyDecided, QueueError, StaleRevision
    from reviewer.queue.shell_client import ShellQueue
    from reviewer.signing.basics import SigningError

    decision: Decision = options.decision
    if options.revision < 1:
        raise DecisionFailed("--revision must be 1 or more", 2)
    if decision != "approve" and not options.reason.strip():
        raise DecisionFailed("--reason must say why (or what to change); nothing was sent", 2)
    break_glass = getattr(options, "break_glass", None)
    if break_glass is not None and not break_glass.strip():
        raise DecisionFailed("--break-glass must say why the plan cannot wait; nothing was sent", 2)
    reason = break_glass if break_glass is not None else options.reason
    digest = options.digest.strip().lower() if options.digest else None
    if digest is not None and not _DIGEST.match(digest):
        raise DecisionFailed(
            "--digest must be the plan's whole SHA-256, 64 hex digits, as the app shows it", 2
        )
    try:
        settings = reviewer_settings(options.queue, options.ca_file)
        signer = configured_signer(options.key)
    except (ConfigError, SigningError) as error:
        raise DecisionFailed(f"{error}; nothing was sent", 2) from None
    proposal_id = options.proposal_id
    try:
        with ShellQueue(settings.queue_url, settings.credential()) as client:
            proposal_id = resolve_proposal_id(client, proposal_id)
            if digest is None:
                digest = _digest_of(client, proposal_id, options.revision)
            try:
                state = send_decision(
                    client,
                    proposal_id,
                    options.revision,
                    digest,
                    decision,
                    reason,
                    signer,
                    break_glass=break_glass is not None,
                )
            except AlreadyDecided as error:
                ran_by = _who_ran(client, proposal_id) if error.state == "executed" else None
                raise DecisionFailed(f"not sent: {not_pending_words(error, ran_by)}") from None
    except SigningError as error:
        raise DecisionFailed(f"{error}; nothing was sent") from None
    except StaleRevision as error:
        raise DecisionFailed(stale_words(error, proposal_id, options.revision, digest)) from None
    except LookupError as error:  # no id holds it, or several do: nothing was sent
        raise DecisionFailed(f"{error}\nnothing was sent") from None
    except QueueError as error:
        raise DecisionFailed(str(error)) from None
    except ValueError as error:  # a proposal id outside the format, refused before any request
        raise DecisionFailed(str(error), 2) from None
    print(describe(state, signed=signer is not None))
    return 0


def _who_ran(client: ShellQueue, proposal_id: str) -> str | None:
    """The agent whose run executed the proposal, from its trail (None if the trail cannot be read)."""
    from reviewer.queue.refusals import QueueError

    try:
        record = client.record(proposal_id)
    except QueueError:
        return None
    runs = [event.actor for event in record.history if event.event == "executed"]
    return runs[-1] if runs else None


def _digest_of(client: ShellQueue, proposal_id: str, revision: int) -> str:
    record = client.record(proposal_id)
    for info in record.revisions:
        if info.revision == revision:
            digest: str = info.plan_sha256
            return digest
    raise DecisionFailed(f"{proposal_id} has no revision {revision} (latest: {record.latest.revision})")


def describe(state: StateFields, signed: bool) -> str:
    """One line for the terminal: what the queue now says, in the words the app uses."""
    from reviewer.plan.sanitize import safe_text
    from reviewer.policy.quorum import describe_approvals
    from reviewer.queue.answers import window_words

    how = "signed" if signed else "unsigned"
    by = safe_text(state.decided_by or "")
    head = f"{state.proposal_id} revision {state.revision} (sha256 {state.plan_sha256[:12]}…)"
    if state.state == "approved":
        runs = "" if state.window is None else f"; {window_words(state.window)}"
        return f"{head}: approved by {by} ({how}){runs}"
    if state.state == "rejected":
        reason = safe_text(state.reason or "")
        return f"{head}: rejected by {by} ({how})" + (f": {reason}" if reason else "")
    if state.state == "changes_requested":
        return f"{head}: changes requested by {by} ({how}): {safe_text(state.reason or '')}"
    if state.state == "pending" and state.approvals:
        so_far = describe_approvals(map(safe_text, state.approvals), state.approvals_required)
        return f"{head}: pending, {so_far} ({how})"
    return f"{head}: {state.state} ({how})"
