"""`reviewer approve`, `reviewer reject` and `reviewer request-changes`: decide from the command line, as
the app does.

The same credential (the reviewer's token from `reviewer login` or `REVIEWER_TOKEN`) and the same
signing (`reviewer.queue.deciding`), for the reviewer who read the plan elsewhere, or scripts a second
approval from a runbook. An approval must name the digest it approves; a rejection is safe to send
without one, so it takes the digest the queue holds for that revision.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:  # every command registers through this module: `reviewer demo` must not load pydantic
    from reviewer.queue.messages import Decision, DecisionState

_DIGEST: Final = re.compile(r"^[0-9a-f]{64}$")


def register(subparsers: Any) -> None:
    approve = subparsers.add_parser(
        "approve",
        help="approve one revision of a proposal, by its digest",
        description="Approve revision N of proposal ID, naming the plan digest you reviewed. Signed with "
        "your SSH key when one is configured (--key, REVIEWER_SIGNING_KEY, or signing_key in config.toml).",
    )
    approve.add_argument("proposal_id", metavar="ID")
    approve.add_argument("--revision", type=int, required=True, metavar="N")
    approve.add_argument("--digest", required=True, metavar="SHA256", help="the plan digest you reviewed")
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


def _with_reason(subparsers: Any, name: str, *, help: str, description: str, reason_help: str) -> None:
    """`reject` and `request-changes`: a decision that approves nothing, so it takes the queue's digest."""
    parser = subparsers.add_parser(name, help=help, description=description)
    parser.add_argument("proposal_id", metavar="ID")
    parser.add_argument("--revision", type=int, required=True, metavar="N")
    parser.add_argument("--reason", required=True, metavar="TEXT", help=reason_help)
    _common_options(parser)
    parser.set_defaults(func=run_decision, decision=name.replace("-", "_"), digest=None)


def _common_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--queue", metavar="URL", help="the queue's URL (default: from the config)")
    parser.add_argument(
        "--key",
        type=Path,
        metavar="FILE",
        help="sign with this SSH key: a .pub file signs through ssh-agent, a private key file by itself",
    )


def run_decision(options: argparse.Namespace) -> int:
    command = f"reviewer {options.decision.replace('_', '-')}"
    try:
        return asyncio.run(_decide(options))
    except DecisionFailed as error:
        print(f"{command}: {error}", file=sys.stderr)
        return error.exit_code


class DecisionFailed(Exception):
    """Why nothing was decided (or what the queue refused), in one line."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


async def _decide(options: argparse.Namespace) -> int:
    from reviewer.queue import client as queue
    from reviewer.queue.config import ConfigError, configured_signing_key, load_settings
    from reviewer.queue.deciding import send_decision
    from reviewer.signing.sshsig import SigningError, signer_for

    decision: Decision = options.decision
    if options.revision < 1:
        raise DecisionFailed("--revision must be 1 or more", 2)
    if decision != "approve" and not options.reason.strip():
        raise DecisionFailed("--reason must say why (or what to change); nothing was sent", 2)
    digest = options.digest.strip().lower() if options.digest else None
    if digest is not None and not _DIGEST.match(digest):
        raise DecisionFailed(
            "--digest must be the plan's whole SHA-256, 64 hex digits, as the app shows it", 2
        )
    try:
        settings = load_settings(options.queue)
        key_path = configured_signing_key(options.key)
        signer = signer_for(key_path) if key_path is not None else None
    except (ConfigError, SigningError) as error:
        raise DecisionFailed(f"{error}; nothing was sent", 2) from None
    try:
        async with queue.QueueClient(settings.queue_url, settings.token.reveal()) as client:
            if digest is None:
                digest = await _digest_of(client, options.proposal_id, options.revision)
            state = await send_decision(
                client, options.proposal_id, options.revision, digest, decision, options.reason, signer
            )
    except SigningError as error:
        raise DecisionFailed(f"{error}; nothing was sent") from None
    except queue.StaleRevision as error:
        raise DecisionFailed(
            f"revision {options.revision} is not the latest: revision {error.latest_revision} "
            f"(sha256 {error.latest_plan_sha256}) is waiting; review it first"
        ) from None
    except queue.AlreadyDecided as error:
        by = f" by {error.body.decided_by}" if error.body.decided_by else ""
        raise DecisionFailed(f"not sent: {error.body.message} (the proposal is {error.state}{by})") from None
    except queue.QueueError as error:
        raise DecisionFailed(str(error)) from None
    except ValueError as error:  # a proposal id outside the format, refused before any request
        raise DecisionFailed(str(error), 2) from None
    print(describe(state, signed=signer is not None))
    return 0


async def _digest_of(client: Any, proposal_id: str, revision: int) -> str:
    record = await client.get_proposal(proposal_id)
    for info in record.revisions:
        if info.revision == revision:
            digest: str = info.plan_sha256
            return digest
    raise DecisionFailed(f"{proposal_id} has no revision {revision} (latest: {record.latest.revision})")


def describe(state: DecisionState, signed: bool) -> str:
    """One line for the terminal: what the queue now says, in the words the app uses."""
    from reviewer.plan.sanitize import safe_text
    from reviewer.policy.quorum import describe_approvals

    how = "signed" if signed else "unsigned"
    by = safe_text(state.decided_by or "")
    head = f"{state.proposal_id} revision {state.revision} (sha256 {state.plan_sha256[:12]}…)"
    if state.state == "approved":
        return f"{head}: approved by {by} ({how})"
    if state.state == "rejected":
        reason = safe_text(state.reason or "")
        return f"{head}: rejected by {by} ({how})" + (f": {reason}" if reason else "")
    if state.state == "changes_requested":
        return f"{head}: changes requested by {by} ({how}): {safe_text(state.reason or '')}"
    if state.state == "pending" and state.approvals:
        so_far = describe_approvals(map(safe_text, state.approvals), state.approvals_required)
        return f"{head}: pending, {so_far} ({how})"
    return f"{head}: {state.state} ({how})"
