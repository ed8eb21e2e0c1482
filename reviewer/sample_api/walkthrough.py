"""`reviewer walkthrough`: the reference scenario, run in every dry-run mode and for real, as a table.

Every cell comes from what actually happened against the sample ticket API on loopback: nothing in
the table is typed in. The real run executes the server dry run's plan, approved either by a
reviewer through a queue (`--queue URL`) or, without a queue, locally for the walkthrough only.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from rich.console import Console

    from reviewer.agent import Approval, Execution, QueueAgent
    from reviewer.plan.proposal import Call, Proposal

DRY_MODES: Final = ("server", "fake", "transport", "record")
COLUMN_TITLES: Final = {
    "server": "server dry run",
    "fake": "fake",
    "transport": "transport",
    "record": "record",
    "real": "real run",
}
DEFAULT_WAIT_SECONDS: Final = 600.0


class WalkthroughError(Exception):
    """The walkthrough cannot run as asked; the message says what to change."""


def register(subparsers: Any) -> None:
    """Add `reviewer walkthrough [--queue URL]` to the command line."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "walkthrough",
        help="run the reference scenario in every dry-run mode and for real, and print what each proved",
        description=(
            "Start the sample ticket API on loopback, run the reference task (open one ticket, close t1 "
            "and t2 into it, delete t3) through the server, fake, transport and record dry runs and then "
            "for real, and print the table of what each mode proved, with the audit-log verification."
        ),
    )
    parser.add_argument(
        "--queue",
        metavar="URL",
        help=(
            "submit the server dry run's plan to this queue and run it for real only once a reviewer "
            "approves it (the agent token comes from $REVIEWER_AGENT_TOKEN or --token-file)"
        ),
    )
    parser.add_argument("--token-file", type=Path, help="file holding the agent token for --queue")
    parser.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT_SECONDS,
        metavar="SECONDS",
        help=f"how long to wait for the reviewer's decision (default {DEFAULT_WAIT_SECONDS:g})",
    )
    parser.set_defaults(func=run_walkthrough)


@dataclass
class Column:
    """One column of the table: the calls as that mode answered them, and its write counts."""

    mode: str
    calls: Sequence[Call]
    write_requests: int
    writes_kept: int | None
    proposal: Proposal | None = None


@dataclass
class Walkthrough:
    columns: list[Column]
    execution: Execution
    approved_by: str
    verification: Any


def run_walkthrough(options: argparse.Namespace) -> int:
    import asyncio

    from rich.console import Console

    from reviewer.queue.config import ConfigError, agent_token

    console = Console()
    try:
        token = agent_token(options.token_file).reveal() if options.queue else None
    except ConfigError as error:
        console.print(f"walkthrough: {error}", markup=False, highlight=False, soft_wrap=True)
        return 2
    from reviewer.sample_api.server import sample_api_in_thread

    with sample_api_in_thread() as sample_api:
        console.print(f"sample ticket API on {sample_api.base_url}", markup=False, highlight=False)
        try:
            result = asyncio.run(
                walk(
                    sample_api.base_url,
                    queue_url=options.queue,
                    token=token,
                    wait=options.wait,
                    console=console,
                )
            )
        except WalkthroughError as error:
            console.print(f"walkthrough: {error}", markup=False, highlight=False, soft_wrap=True)
            return 1
    render(result, console)
    return 0


async def walk(
    base_url: str,
    *,
    queue_url: str | None = None,
    token: str | None = None,
    wait: float = DEFAULT_WAIT_SECONDS,
    console: Console | None = None,
) -> Walkthrough:
    """Run the scenario in each dry-run mode from a fresh API, then for real under an approval."""
    import httpx

    from reviewer.agent import execute_approved, local_approval
    from reviewer.queue.client import QueueClient
    from reviewer.queue.ids import new_proposal_id
    from reviewer.sample_api import tools

    columns: list[Column] = []
    async with httpx.AsyncClient(base_url=base_url) as api:
        for mode in DRY_MODES:
            await _reset(api)
            recording, proposal = await tools.dry_run_reference(
                api, mode, new_proposal_id("walkthrough"), base_url
            )
            columns.append(
                Column(mode, proposal.calls, recording.write_requests, recording.writes_kept, proposal)
            )
        plan = columns[0].proposal
        assert plan is not None
        await _reset(api)
        if queue_url is None:
            approval = local_approval(plan)
            execution = await execute_approved(None, approval, client=api, audit=tools.AUDIT)
        else:
            assert token is not None
            async with QueueClient(queue_url, token) as queue_client:
                from reviewer.agent import QueueAgent

                agent = QueueAgent(queue_client, poll_interval=0.5)
                approval = await _approval_from_queue(agent, plan, wait, console)
                execution = await _execute(agent, approval, api)
    columns.append(
        Column("real", execution.executed_calls(), execution.write_requests, execution.writes_kept)
    )
    return Walkthrough(columns, execution, approval.approved_by, _verify(execution))


async def _approval_from_queue(
    agent: QueueAgent, plan: Proposal, wait: float, console: Console | None
) -> Approval:
    from reviewer.agent import AgentError
    from reviewer.queue.refusals import QueueError

    try:
        answer = await agent.submit(plan)
        if console is not None:
            console.print(
                f"submitted {answer.proposal_id} revision {answer.revision} "
                f"(plan {answer.plan_sha256[:12]}…); waiting up to {wait:g} s for a reviewer's decision",
                markup=False,
                highlight=False,
            )
        return await agent.wait_for_decision(
            answer.proposal_id, answer.revision, plan_digest=answer.plan_sha256, timeout=wait
        )
    except (AgentError, QueueError) as error:
        raise WalkthroughError(str(error)) from error


async def _execute(agent: QueueAgent, approval: Approval, api: Any) -> Execution:
    """The approved plan run for real. The reference delete is refused by the API: shown in the
    table, not fatal. The executor's own refusal (a trail that went backwards, a claim already made)
    is one line of words, and nothing ran."""
    from reviewer.agent import AgentError, RunStopped
    from reviewer.queue.refusals import QueueError
    from reviewer.sample_api import tools

    try:
        return await agent.execute(approval, client=api, audit=tools.AUDIT)
    except RunStopped as stopped:
        stopped_run: Execution = stopped.execution
        return stopped_run
    except (AgentError, QueueError) as refused:
        raise WalkthroughError(f"the executor refused the approval: {refused}") from refused


async def _reset(api: Any) -> None:
    response = await api.post("/v1/reset")
    response.raise_for_status()


def _verify(execution: Execution) -> Any:
    """The real run against the approved plan, by the drift module's rules."""
    try:
        from reviewer.reading.verification import compare_execution
    except ImportError:
        return None
    return compare_execution(execution.approval.proposal, execution.executed_calls())


def row_label(call: Call) -> str:
    """`create`, `update t1`, `delete t3`: the effect and the ticket it names."""
    ticket = (call.args or {}).get("id")
    return f"{call.effect} {ticket}" if isinstance(ticket, str) else call.effect


def cell(mode: str, call: Call, verdict: str | None) -> str:
    """One cell, worded as the table in docs/reviewing.md words it, with what the outcome proves."""
    outcome = call.outcome
    if outcome is None:
        return "no outcome"
    if outcome.status == "recorded":
        return "recorded"
    if outcome.status == "ok":
        result = outcome.result if isinstance(outcome.result, dict) else {}
        if call.effect == "create" and "id" in result:
            prefix = "minted id" if mode in ("fake", "transport") else "id"
            return f"ok, {prefix} {result['id']}"
        return "ok"
    status = str(outcome.http_status) if outcome.http_status is not None else outcome.status
    if mode == "server" and verdict in ("chain noise", "real refusal"):
        return f"{status} ({verdict})"
    return status


def render(result: Walkthrough, console: Console) -> None:
    """Print the table, the audit verification and what the columns say together."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    from reviewer.reading.analysis import Analysis

    verdicts = {
        column.mode: [
            Analysis(column.proposal).row(index).verdict.value for index in range(len(column.calls))
        ]
        for column in result.columns
        if column.proposal is not None
    }
    table = Table(
        title="The reference task, in every dry-run mode and for real",
        box=box.SIMPLE_HEAVY,
        title_justify="left",
    )
    table.add_column("call")
    for column in result.columns:
        table.add_column(COLUMN_TITLES[column.mode], overflow="fold")
    plan_calls = result.columns[0].calls
    for index, planned in enumerate(plan_calls):
        cells = [Text(row_label(planned))]
        for column in result.columns:
            if index < len(column.calls):
                verdict = verdicts.get(column.mode, [None] * len(column.calls))[index]
                cells.append(Text(cell(column.mode, column.calls[index], verdict)))
            else:
                cells.append(Text("not run", style="dim"))
        table.add_row(*cells)
    table.add_section()
    counts = [Text("write requests / writes kept")]
    for column in result.columns:
        kept = "?" if column.writes_kept is None else str(column.writes_kept)
        dangerous = column.mode != "real" and column.writes_kept not in (0, None)
        counts.append(Text(f"{column.write_requests} / {kept}", style="bold red" if dangerous else ""))
    table.add_row(*counts)
    console.print(table)
    for line in summary_lines(result):
        console.print(Text(line))


def summary_lines(result: Walkthrough) -> list[str]:
    """What the table means, in sentences built from the same data."""
    lines = [f"The real run executed the server dry run's plan, approved by {result.approved_by}."]
    execution = result.execution
    if execution.stop is not None:
        lines.append(f"The real run stopped: {execution.stop.reason}")
    real = result.columns[-1].calls
    for call in real:
        if call.outcome is None or call.outcome.status != "refused":
            continue
        foreseen = [
            COLUMN_TITLES[column.mode]
            for column in result.columns[:-1]
            if any(
                dry.seq == call.seq
                and dry.outcome is not None
                and dry.outcome.http_status == call.outcome.http_status
                for dry in column.calls
            )
        ]
        who = f"only the {' and the '.join(foreseen)}" if foreseen else "no dry run"
        lines.append(f"{row_label(call)}: the real run met {call.outcome.http_status}; {who} saw it coming.")
    verification = result.verification
    if verification is None:
        lines.append("Audit verification: unavailable (the run reported no calls to compare).")
    else:
        lines.append(verification_sentence(verification, real))
        lines.append(
            f"Naive comparison (placeholders left as written): {verification.naive_identical} of "
            f"{verification.planned} calls identical."
        )
    if execution.audit_match is not None:
        summary = execution.audit_match.summary  # `audit: 3 of 4 calls matched; ...`
        lines.append(f"The API's audit log: {summary.removeprefix('audit: ')}.")
    return lines


def verification_sentence(verification: Any, real: Sequence[Call]) -> str:
    """`3 of 4 calls match once placeholders resolve; delete t3: refused 409`."""
    text = (
        f"Plan verification: {verification.matching_once_resolved} of {verification.planned} calls match "
        "once placeholders resolve"
    )
    for check in verification.checks:
        if check.status in ("same", "same once placeholders resolve"):
            continue
        call = real[check.executed_index]
        detail = f"{check.status} {check.http_status}" if check.http_status is not None else check.status
        if check.status == "different" and check.fields:
            detail += " (" + ", ".join(change.path for change in check.fields) + ")"
        text += f"; {row_label(call)}: {detail}"
    if verification.not_executed:
        text += f"; not executed: {len(verification.not_executed)}"
    return text
