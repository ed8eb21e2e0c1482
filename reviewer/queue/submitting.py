"""`reviewer submit FILE...`: proposal files onto a live queue, under an agent token.

Every file is read and checked as the queue checks it before anything is sent, so a malformed file is
refused in the format's own words (`$.calls[3].effect: ...`) and none of the batch reaches the queue:
what was typed can be fixed and run again whole. Files go in the order given, so a proposal's
revision 1 before its revision 2. With `--new-id`, each proposal id the files name gets one fresh id
(random part first, as an agent's would), the same for every file that names it: the bundled samples
can be tried on a queue that saw them before.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Final

from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.ids import new_proposal_id, review_command

if TYPE_CHECKING:
    from reviewer.plan.proposal import Proposal
    from reviewer.queue.messages import SubmissionAnswer

COMMAND: Final = "reviewer submit"
EXECUTION_FORMAT: Final = "reviewer.execution/v1"


class SubmitRefused(Exception):
    """Nothing more is sent; the message says why, in one line."""

    def __init__(self, message: str, exit_code: int = 1) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Checked:
    """One file as it will be sent: the exact bytes read (or, under `--new-id`, the proposal again
    under its fresh id) and the id the queue will file it under."""

    path: Path
    body: bytes
    proposal_id: str


def run_submit(options: argparse.Namespace) -> int:
    """The command; its exit status (2: nothing sent, the input is wrong; 1: the queue refused)."""
    try:
        return asyncio.run(_submit(options))
    except SubmitRefused as refused:
        for line in str(refused).splitlines():  # one line a file refused
            print(f"{COMMAND}: {line}", file=sys.stderr)
        return refused.exit_code


async def _submit(options: argparse.Namespace) -> int:
    from reviewer.queue.client import QueueClient
    from reviewer.queue.config import QUEUE_ENV, ConfigError, agent_token, normalize_queue_url
    from reviewer.queue.refusals import QueueError
    from reviewer.queue.trust import use_ca_file

    checked = check_files(options.files, fresh_ids=options.new_id)
    try:
        chosen = options.queue or os.environ.get(QUEUE_ENV)
        if not chosen:
            raise ConfigError(f"no queue: pass --queue URL or set {QUEUE_ENV}")
        queue_url = normalize_queue_url(chosen)
        token = agent_token(options.token_file)
    except ConfigError as error:
        raise SubmitRefused(f"{error}; nothing was submitted", 2) from None
    use_ca_file(options.ca_file)
    async with QueueClient(queue_url, token.reveal()) as client:
        for index, item in enumerate(checked):
            try:
                answer = await client.submit(item.body)
            except QueueError as error:
                left = len(checked) - index - 1
                after = f" and the {left:,} after it were" if left else " was"
                words = safe_text(clip(str(error), 600))
                raise SubmitRefused(
                    f"{_path_words(item.path)}: {words}; this file{after} not submitted"
                ) from None
            print(*submitted_lines(item.path, answer), sep="\n", flush=True)
    return 0


def check_files(paths: list[Path], *, fresh_ids: bool) -> list[Checked]:
    """Every file read and checked, or `SubmitRefused` (exit 2) naming each one that is not a proposal
    the queue would take: one line a file."""
    from reviewer.plan.proposal import ProposalError, dumps, parse_proposal

    problems: list[str] = []
    read: list[tuple[Path, bytes, Proposal]] = []
    for path in paths:
        try:
            data = path.read_bytes()
        except OSError as error:
            problems.append(f"cannot read {_path_words(path)}: {error.strerror}")
            continue
        try:
            read.append((path, data, parse_proposal(data, _path_words(path))))
        except ProposalError as error:
            problems.append(safe_text(clip(_refusal_words(error, data), 600)))
    if problems:
        raise SubmitRefused("\n".join(f"{problem}; nothing was submitted" for problem in problems), 2)
    if not fresh_ids:
        return [Checked(path, data, proposal.proposal_id) for path, data, proposal in read]
    import msgspec

    fresh: dict[str, str] = {}
    checked = []
    for path, _, proposal in read:
        new_id = fresh.setdefault(proposal.proposal_id, new_proposal_id(proposal.title))
        checked.append(Checked(path, dumps(msgspec.structs.replace(proposal, proposal_id=new_id)), new_id))
    return checked


def submitted_lines(path: Path, answer: SubmissionAnswer) -> list[str]:
    """What the agent's person reads: the file, the id and revision the queue filed it under, its
    state, then the line a reviewer runs to open it, the id alone after the command."""
    proposal_id = safe_text(answer.proposal_id)
    return [
        f"{_path_words(path)}: {proposal_id} revision {answer.revision} "
        f"(sha256 {answer.plan_sha256[:12]}…), {safe_text(answer.state)}",
        f"  {review_command(proposal_id)}",
    ]


def _refusal_words(error: Exception, data: bytes) -> str:
    """The format's own words; for a run's report (`*.execution.json`), what the file is instead."""
    if EXECUTION_FORMAT.encode() in data[:200]:
        return f"{error} (this is a run's report, {EXECUTION_FORMAT}, not a proposal)"
    return str(error)


def _path_words(path: Path) -> str:
    return safe_text(clip(str(path), 300))
