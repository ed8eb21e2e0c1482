"""What waits and what one plan asks: `reviewer list` and `reviewer show`, without the app.

A reviewer on a phone's SSH session, or a script, reads the queue here: each pending proposal with its
environment, counts, money and alarms, and one revision as the review screen reads it (its claim,
counts, alarms, extremes and every call) with the full digest and the exact `reviewer approve` line.
The digest shown is the queue's, and only once the fetched plan hashes to it. Every string from a
proposal is sanitized for the terminal; `--json` escapes it as JSON does.
"""

from __future__ import annotations

import shlex
import textwrap
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime

from reviewer.plan.proposal import Proposal, plan_sha256
from reviewer.plan.sanitize import clip, safe_text
from reviewer.policy.quorum import describe_approvals, describe_withdrawals
from reviewer.queue.client import QueueClient
from reviewer.queue.messages import DecisionState, ProposalSummary, withdrawals_of
from reviewer.reading.analysis import Analysis
from reviewer.reading.plain import call_lines, common_args, common_lines, extremes_lines
from reviewer.reading.totals import Total, totals_words


@dataclass(frozen=True)
class Refused:
    """An executor's refusal of the revision (it claimed nothing and ran nothing); `message` raw."""

    kind: str
    message: str
    refused_by: str
    at: str


@dataclass(frozen=True)
class PlanSummary:
    """One revision as the list and `show` tell it; strings as the proposal has them (raw)."""

    proposal_id: str
    revision: int
    latest_revision: int
    title: str
    task: str | None
    environment: str | None
    base_url: str | None
    api: str
    proposed_by: str
    submitted_at: str
    state: str
    calls: int
    creates: int
    updates: int
    deletes: int
    reads: int
    unknown: int
    """Calls whose effect nobody knows (an MCP tool that says nothing of itself): never creates."""
    alarms: list[str]
    plan_sha256: str
    """The queue's digest of this revision: the one `reviewer approve` must name."""
    digest_matches: bool
    """Whether the plan fetched hashes to it: when not, nothing here offers to approve it."""
    approvals: list[str] = field(default_factory=list)
    approvals_required: int = 1
    totals: tuple[Total, ...] = ()
    """The money the plan moves, per currency (`reviewer.reading.totals`)."""
    claimed_by: str | None = None
    outcome_unknown: bool = False
    """A run claimed the approval and did not report by the end of its lease: it may have written."""
    refusals: list[Refused] = field(default_factory=list)
    runs: str | None = None
    """When the plan may run under its change windows (`WindowState.words`); None without windows."""
    withdrawn: list[tuple[str, str]] = field(default_factory=list)
    """Each approval of this revision that stopped counting: who cast it, what ended it (raw)."""

    def approve_argv(self, queue_url: str | None = None) -> list[str]:
        """The command that approves exactly this revision (empty when the digest does not match)."""
        if not self.digest_matches:
            return []
        queue = ["--queue", queue_url] if queue_url else []
        return [
            "reviewer",
            "approve",
            self.proposal_id,
            "--revision",
            str(self.revision),
            *queue,
            "--digest",
            self.plan_sha256,
        ]

    def as_json(self, queue_url: str | None = None) -> dict[str, object]:
        shown = {**asdict(self), "totals": [total.as_json() for total in self.totals]}
        return {**shown, "approve_command": self.approve_argv(queue_url)}


@dataclass(frozen=True)
class QueueFacts:
    """What the queue records of a revision, beside its plan."""

    plan_sha256: str
    proposed_by: str
    submitted_at: str
    latest_revision: int
    state: str
    approvals: list[str] = field(default_factory=list)
    approvals_required: int = 1
    claimed_by: str | None = None
    outcome_unknown: bool = False
    refusals: list[Refused] = field(default_factory=list)
    runs: str | None = None
    withdrawn: list[tuple[str, str]] = field(default_factory=list)


def refusals_of(latest: DecisionState) -> list[Refused]:
    return [
        Refused(item.kind, item.message, item.refused_by, item.at.isoformat()) for item in latest.refusals
    ]


def summarize(proposal: Proposal, facts: QueueFacts, analysis: Analysis | None = None) -> PlanSummary:
    analysis = Analysis(proposal) if analysis is None else analysis
    ratios = analysis.ratios
    return PlanSummary(
        proposal_id=proposal.proposal_id,
        revision=proposal.revision,
        latest_revision=facts.latest_revision,
        title=proposal.title,
        task=proposal.task,
        environment=proposal.target.environment,
        base_url=proposal.target.base_url,
        api=proposal.target.api,
        proposed_by=facts.proposed_by,
        submitted_at=facts.submitted_at,
        state=facts.state,
        calls=ratios.calls,
        creates=ratios.creates,
        updates=ratios.updates,
        deletes=ratios.deletes,
        reads=ratios.reads,
        unknown=ratios.other,
        alarms=list(analysis.alarms),
        plan_sha256=facts.plan_sha256,
        digest_matches=plan_sha256(proposal) == facts.plan_sha256,
        approvals=facts.approvals,
        approvals_required=facts.approvals_required,
        totals=analysis.totals,
        claimed_by=facts.claimed_by,
        outcome_unknown=facts.outcome_unknown,
        refusals=facts.refusals,
        runs=facts.runs,
        withdrawn=facts.withdrawn,
    )


async def pending_summaries(client: QueueClient) -> list[PlanSummary]:
    """Every pending proposal's latest revision, newest submission first."""
    waiting: list[ProposalSummary] = []
    cursor = None
    while True:
        listing = await client.list_proposals(state="pending", cursor=cursor)
        assert listing.page is not None  # no etag was sent, so the answer is a page
        waiting.extend(listing.page.proposals)
        cursor = listing.page.next_cursor
        if cursor is None:
            break
    waiting.sort(key=lambda summary: summary.submitted_at, reverse=True)
    summaries = []
    for summary in waiting:
        proposal = await client.get_revision(summary.proposal_id, summary.revision)
        facts = QueueFacts(
            summary.plan_sha256,
            summary.proposed_by,
            summary.submitted_at.isoformat(),
            summary.revision,
            summary.state,
        )
        summaries.append(summarize(proposal, facts))
    return summaries


async def one_summary(
    client: QueueClient, proposal_id: str, revision: int | None
) -> tuple[PlanSummary, Analysis]:
    """One revision (the latest by default), with the queue's state and quorum, and its analysis."""
    record = await client.get_proposal(proposal_id)
    infos = {info.revision: info for info in record.revisions}
    number = revision if revision is not None else record.latest.revision
    info = infos.get(number)
    if info is None:
        raise LookupError(f"{proposal_id} has no revision {number} (latest: {record.latest.revision})")
    proposal = await client.get_revision(proposal_id, number)
    latest = record.latest
    current = number == latest.revision
    facts = QueueFacts(
        info.plan_sha256,
        info.submitted_by,
        info.submitted_at.isoformat(),
        latest.revision,
        latest.state if current else "superseded",
        list(latest.approvals),
        latest.approvals_required,
        claimed_by=latest.claimed_by if current else None,
        outcome_unknown=current and bool(latest.outcome_unknown),
        refusals=refusals_of(latest) if current else [],
        runs=latest.window.words() if current and latest.window is not None else None,
        withdrawn=withdrawals_of(record.history, number),
    )
    analysis = Analysis(proposal)
    return summarize(proposal, facts, analysis), analysis


def moment_words(iso_time: str, *, seconds: bool = False) -> str:
    """`2026-12-06 23:40 UTC`: a queue's time in UTC, saying so, for readers in any zone (a time
    without its zone is an hour off for half of a team). A time the queue gave without a zone is its
    UTC, as every queue writes."""
    moment = datetime.fromisoformat(iso_time)
    moment = moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC" if seconds else f"{moment:%Y-%m-%d %H:%M} UTC"


def _shown(value: str, limit: int = 300) -> str:
    return safe_text(clip(value, limit))


def _wrapped(text: str, width: int, indent: str = "") -> list[str]:
    wrapped = textwrap.wrap(
        text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
    )
    return wrapped or [indent]


def counts(summary: PlanSummary) -> str:
    parts = [
        f"{summary.calls:,} calls",
        f"{summary.creates:,} create",
        f"{summary.updates:,} update",
        f"{summary.deletes:,} delete",
    ]
    if summary.unknown:
        parts.append(f"{summary.unknown:,} effect unknown")
    if summary.reads:
        parts.append(f"{summary.reads:,} read")
    return ", ".join(parts)


def list_lines(summaries: list[PlanSummary], width: int) -> list[str]:
    """The list for a terminal `width` wide: a few short lines a proposal, its alarms marked `!`."""
    if not summaries:
        return ["nothing waits: no proposal is pending"]
    lines: list[str] = []
    for summary in summaries:
        lines.append(f"{_shown(summary.proposal_id, 128)}  rev {summary.revision}")
        lines.extend(_wrapped(_shown(summary.title), width, "  "))
        where = (
            f"{_shown(summary.environment or 'no environment', 40)} · by {_shown(summary.proposed_by, 64)}"
        )
        lines.extend(_wrapped(f"{where} · {moment_words(summary.submitted_at)}", width, "  "))
        lines.extend(_wrapped(counts(summary), width, "  "))
        if summary.totals:
            lines.extend(_wrapped(f"moves {totals_words(summary.totals)}", width, "  "))
        for alarm in summary.alarms:
            lines.extend(_wrapped(f"! {_shown(alarm)}", width, "  "))
        lines.append("")
    lines.extend(_wrapped("reviewer show ID (or its start): every call, the approve line", width))
    return lines


def show_lines(
    summary: PlanSummary, width: int, queue_url: str | None = None, analysis: Analysis | None = None
) -> list[str]:
    """One revision for a terminal `width` wide, as the review screen reads it (with `analysis`, its
    extremes and every call), ending with the line that approves it."""
    lines = [
        f"{_shown(summary.proposal_id, 128)} revision {summary.revision} of {summary.latest_revision}: "
        f"{summary.state}"
    ]
    lines.extend(_wrapped(_shown(summary.title), width))
    if summary.task:
        lines.extend(_wrapped(f"task: {_shown(summary.task, 600)}", width))
    lines.extend(
        _wrapped(
            f"runs on {_shown(summary.environment or 'no environment', 40)} · "
            f"{_shown(summary.base_url or 'no base URL', 200)} · {_shown(summary.api, 40)}",
            width,
        )
    )
    proposed_at = moment_words(summary.submitted_at, seconds=True)
    lines.extend(_wrapped(f"proposed by {_shown(summary.proposed_by, 64)}, {proposed_at}", width))
    lines.extend(run_lines(summary, width))
    lines.extend(_wrapped(counts(summary), width))
    if summary.totals:
        lines.extend(_wrapped(f"moves {totals_words(summary.totals, limit=20)}", width))
    for alarm in summary.alarms:
        lines.extend(_wrapped(f"! {_shown(alarm)}", width))
    if summary.state == "pending":
        approvals = describe_approvals(map(_shown, summary.approvals), summary.approvals_required)
        lines.extend(_wrapped(f"approvals: {approvals} so far", width))
    if summary.runs is not None and summary.state in ("pending", "approved"):
        lines.extend(_wrapped(summary.runs, width))
    if summary.withdrawn:
        withdrawn = describe_withdrawals((_shown(who, 64), why) for who, why in summary.withdrawn)
        lines.extend(_wrapped(withdrawn, width))
    if analysis is not None:
        lines.extend(plan_lines(analysis, width))
    lines.append("plan sha256 (the queue's):")
    lines.append(summary.plan_sha256)
    if not summary.digest_matches:
        lines.extend(
            _wrapped(
                "DIGEST MISMATCH: the plan fetched does not hash to the queue's digest; do not approve it",
                width,
            )
        )
        return lines
    if summary.state == "pending" and summary.revision == summary.latest_revision:
        lines.append("to approve it after reading the plan:")
        argv = [shlex.quote(word) for word in summary.approve_argv(queue_url)]
        lines.append(" ".join(argv[:3]) + " \\")
        lines.append("  " + " ".join(argv[3:-2]) + " \\")
        lines.append("  " + " ".join(argv[-2:]))
    return lines


def run_lines(summary: PlanSummary, width: int) -> list[str]:
    """What became of the approval: a run whose outcome nobody knows, and each executor that refused it."""
    lines: list[str] = []
    if summary.outcome_unknown:
        lines.extend(
            _wrapped(
                f"! outcome unknown: the run claimed by {_shown(summary.claimed_by or 'a runner', 64)} did "
                "not report by the end of its lease; it may have written, and never runs again",
                width,
            )
        )
    for refused in summary.refusals:
        lines.extend(
            _wrapped(
                f"! refused by executor {_shown(refused.refused_by, 64)} ({_shown(refused.kind, 20)}), "
                f"{refused.at[:19]}: {_shown(refused.message, 600)}; it claimed nothing and ran nothing",
                width,
            )
        )
    return lines


def plan_lines(analysis: Analysis, width: int) -> list[str]:
    """The extremes, then every call: the arguments its tool's calls share said once above them."""
    lines: list[str] = []
    extremes = extremes_lines(analysis.extremes)
    if extremes:
        lines.extend(["", "extremes:"])
        for line in extremes:
            lines.extend(_wrapped(line, width, "  "))
    common = common_args(analysis)
    lines.extend(["", f"calls ({len(analysis):,}):"])
    for line in common_lines(common):
        lines.extend(_wrapped(line, width, "  "))
    for call in call_lines(analysis, common):
        lines.extend(_wrapped(call.text(), width, "  "))
    lines.append("")
    return lines


def plan_json(analysis: Analysis) -> dict[str, object]:
    """What `plan_lines` says, for `reviewer show --json`."""
    common = common_args(analysis)
    return {
        "extremes": extremes_lines(analysis.extremes),
        "common_args": common_lines(common),
        "plan": [call.as_json() for call in call_lines(analysis, common)],
    }
