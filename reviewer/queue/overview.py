"""What waits and what one plan asks: `reviewer list` and `reviewer show`, without the app.

A reviewer on a phone's SSH session, or a script, reads the queue here: each pending proposal with its
environment, counts, money and alarms as the queue read them at submission (one request a page,
whatever the number pending), and one revision as the review screen reads it (its claim,
counts, alarms, extremes and every call) with the full digest and the exact `reviewer approve` line.
The digest shown is the queue's, and only once the fetched plan hashes to it. Every string from a
proposal is sanitized for the terminal; `--json` escapes it as JSON does.
"""

from __future__ import annotations

import shlex
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, Protocol

from reviewer.plan.proposal import Proposal, plan_sha256
from reviewer.plan.sanitize import clip, safe_text
from reviewer.policy.quorum import describe_approvals, describe_withdrawals
from reviewer.queue.answers import RowFields, StateFields, window_words, withdrawals_of
from reviewer.queue.shell_client import ShellQueue
from reviewer.reading.summary import PlanReading, counts_words, read_plan
from reviewer.reading.totals import totals_words

if TYPE_CHECKING:  # `show` reads a plan's calls; the list only what the queue stored of each
    from reviewer.reading.analysis import Analysis

MAX_PAGE: Final = 200
"""Proposals a list request asks for at once: the most the queue answers in a page."""


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
    proposed_by: str
    submitted_at: str
    state: str
    reading: PlanReading | None
    """What the plan does (`reviewer.reading.summary`); None for a plan the queue could not read."""
    plan_sha256: str
    """The queue's digest of this revision: the one `reviewer approve` must name."""
    digest_matches: bool | None
    """Whether the plan fetched hashes to it: when not, nothing here offers to approve it. None in
    the list, which fetches no plan (`reviewer show` does, and checks)."""
    approvals: list[str] = field(default_factory=list)
    approvals_required: int = 1
    claimed_by: str | None = None
    outcome_unknown: bool = False
    """A run claimed the approval and did not report by the end of its lease: it may have written."""
    refusals: list[Refused] = field(default_factory=list)
    runs: str | None = None
    """When the plan may run under its change windows (`WindowState.words`); None without windows."""
    withdrawn: list[tuple[str, str]] = field(default_factory=list)
    """Each approval of this revision that stopped counting: who cast it, what ended it (raw)."""
    yours: bool = True
    """Whether the environment the queue's policy gives it lets this reviewer decide it."""

    def approve_argv(self, queue_url: str | None = None) -> list[str]:
        """The command that approves exactly this revision (empty unless the digest was checked)."""
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
        shown = {key: value for key, value in asdict(self).items() if key != "reading"}
        return {**shown, **reading_json(self.reading), "approve_command": self.approve_argv(queue_url)}


def reading_json(reading: PlanReading | None) -> dict[str, object]:
    """The reading's fields as `--json` gives them beside the queue's, the amounts as strings."""
    if reading is None:
        return {"plan_read": False}
    return {
        "environment": reading.environment,
        "base_url": reading.base_url,
        "api": reading.api,
        "calls": reading.calls,
        "creates": reading.creates,
        "updates": reading.updates,
        "deletes": reading.deletes,
        "reads": reading.reads,
        "unknown": reading.unknown,
        "alarms": [alarm.text for alarm in reading.alarms],
        "alarm_names": list(reading.alarm_names),
        "totals": [total.as_json() for total in reading.totals],
    }


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


class _Revision(Protocol):
    """One revision as a record lists it: the shell's view and the store's message alike."""

    @property
    def revision(self) -> int: ...
    @property
    def plan_sha256(self) -> str: ...
    @property
    def submitted_by(self) -> str: ...
    @property
    def submitted_at(self) -> datetime: ...


class _Latest(Protocol):
    """The proposal's state, which is its latest revision's."""

    @property
    def revision(self) -> int: ...
    @property
    def state(self) -> str: ...
    @property
    def approvals(self) -> Sequence[str]: ...
    @property
    def approvals_required(self) -> int: ...


class _Record(Protocol):
    @property
    def latest(self) -> _Latest: ...
    @property
    def revisions(self) -> Sequence[_Revision]: ...


def revision_facts(record: _Record, number: int) -> QueueFacts:
    """What the queue records of revision `number` (`LookupError` when the record has none): who
    submitted it and when, its digest, and the proposal's state and approvals, which are its own
    while it is the latest revision and `superseded` once another came. `show` and the review page
    read a revision by this one rule."""
    info = next((item for item in record.revisions if item.revision == number), None)
    if info is None:
        raise LookupError(number)
    latest = record.latest
    return QueueFacts(
        info.plan_sha256,
        info.submitted_by,
        info.submitted_at.isoformat(),
        latest.revision,
        latest.state if number == latest.revision else "superseded",
        list(latest.approvals),
        latest.approvals_required,
    )


def refusals_of(latest: StateFields) -> list[Refused]:
    return [
        Refused(item.kind, item.message, item.refused_by, item.at.isoformat()) for item in latest.refusals
    ]


def summarize(proposal: Proposal, facts: QueueFacts, analysis: Analysis | None = None) -> PlanSummary:
    """A fetched revision as `show` tells it: its plan read as the queue reads it at submission."""
    return PlanSummary(
        proposal_id=proposal.proposal_id,
        revision=proposal.revision,
        latest_revision=facts.latest_revision,
        title=proposal.title,
        task=proposal.task,
        proposed_by=facts.proposed_by,
        submitted_at=facts.submitted_at,
        state=facts.state,
        reading=read_plan(proposal, analysis),
        plan_sha256=facts.plan_sha256,
        digest_matches=plan_sha256(proposal) == facts.plan_sha256,
        approvals=facts.approvals,
        approvals_required=facts.approvals_required,
        claimed_by=facts.claimed_by,
        outcome_unknown=facts.outcome_unknown,
        refusals=facts.refusals,
        runs=facts.runs,
        withdrawn=facts.withdrawn,
    )


def listed(row: RowFields) -> PlanSummary:
    """A row of the queue's list as the list tells it: the reading the queue stored at submission."""
    return PlanSummary(
        proposal_id=row.proposal_id,
        revision=row.revision,
        latest_revision=row.revision,
        title=row.title,
        task=None,
        proposed_by=row.proposed_by,
        submitted_at=row.submitted_at.isoformat(),
        state=row.state,
        reading=row.reading,
        plan_sha256=row.plan_sha256,
        digest_matches=None,
        approvals=list(row.approvals),
        claimed_by=row.claimed_by,
        outcome_unknown=bool(row.outcome_unknown),
        yours=row.yours,
    )


@dataclass(frozen=True)
class Waiting:
    """What `reviewer list` found: the pending it shows, and whether `limit` left more unshown."""

    summaries: list[PlanSummary]
    more: bool = False


def pending_summaries(client: ShellQueue, filters: Mapping[str, str], limit: int | None = None) -> Waiting:
    """The pending proposals the queue's `filters` keep (`GET /v1/proposals`'s words), newest
    submission first, up to `limit`: one request a page, whatever the number pending."""
    found: list[PlanSummary] = []
    cursor = None
    while limit is None or len(found) < limit:
        page_size = MAX_PAGE if limit is None else min(MAX_PAGE, limit - len(found))
        page = client.list_page("pending", cursor, page_size, filters)
        found.extend(listed(row) for row in page.proposals)
        cursor = page.next_cursor
        if cursor is None:
            return Waiting(sorted(found, key=_yours_then_newest))
    return Waiting(sorted(found[:limit], key=_yours_then_newest), more=True)


def _yours_then_newest(summary: PlanSummary) -> tuple[bool, float]:
    return (not summary.yours, -datetime.fromisoformat(summary.submitted_at).timestamp())


def one_summary(client: ShellQueue, proposal_id: str, revision: int | None) -> tuple[PlanSummary, Analysis]:
    """One revision (the latest by default), with the queue's state and quorum, and its analysis."""
    record = client.record(proposal_id)
    latest = record.latest
    number = revision if revision is not None else latest.revision
    try:
        facts = revision_facts(record, number)
    except LookupError:
        raise LookupError(f"{proposal_id} has no revision {number} (latest: {latest.revision})") from None
    proposal = client.revision(proposal_id, number)
    if number == latest.revision:
        facts = replace(
            facts,
            claimed_by=latest.claimed_by,
            outcome_unknown=bool(latest.outcome_unknown),
            refusals=refusals_of(latest),
            runs=window_words(latest.window) if latest.window is not None else None,
        )
    facts = replace(facts, withdrawn=withdrawals_of(record.history, number))
    from reviewer.reading.analysis import Analysis

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
    if len(indent) + len(text) <= width and text == text.strip() and text.isprintable():
        return [indent + text]  # what wrap would make of a line that fits: 3,000 rows are 12,000 lines
    wrapped = textwrap.wrap(
        text, width, initial_indent=indent, subsequent_indent=indent + "  ", break_on_hyphens=False
    )
    return wrapped or [indent]


def reading_lines(
    reading: PlanReading | None, width: int, indent: str = "", currencies: int = 3
) -> list[str]:
    """The counts, the money and each alarm (`!`), as the list and `show` both say them."""
    if reading is None:
        return _wrapped("the queue could not read this plan: see `reviewer show`", width, indent)
    lines = _wrapped(counts_words(reading), width, indent)
    if reading.totals:
        lines.extend(_wrapped(f"moves {totals_words(reading.totals, limit=currencies)}", width, indent))
    for alarm in reading.alarms:
        lines.extend(_wrapped(f"! {_shown(alarm.text)}", width, indent))
    if reading.more_alarms:
        lines.extend(_wrapped(f"! and {reading.more_alarms:,} more alarms", width, indent))
    return lines


def list_lines(waiting: Waiting, width: int) -> list[str]:
    """The list for a terminal `width` wide: a few short lines a proposal, its alarms marked `!`;
    those whose environment the reviewer does not decide after the rest, under a line saying so."""
    if not waiting.summaries:
        return ["nothing waits for you: no proposal is pending here (`--all`: every environment)"]
    lines: list[str] = []
    others = False
    for summary in waiting.summaries:
        if not summary.yours and not others:
            others = True
            lines.extend(_wrapped("waiting in environments the policy does not let you decide:", width))
            lines.append("")
        lines.append(f"{_shown(summary.proposal_id, 128)}  rev {summary.revision}")
        lines.extend(_wrapped(_shown(summary.title), width, "  "))
        environment = summary.reading.environment if summary.reading else None
        where = f"{_shown(environment or 'no environment', 40)} · by {_shown(summary.proposed_by, 64)}"
        lines.extend(_wrapped(f"{where} · {moment_words(summary.submitted_at)}", width, "  "))
        lines.extend(reading_lines(summary.reading, width, "  "))
        lines.append("")
    if waiting.more:
        lines.extend(_wrapped(f"{len(waiting.summaries):,} shown; more wait (a larger --limit)", width))
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
    reading = summary.reading
    environment, base_url, api = (
        (reading.environment, reading.base_url, reading.api) if reading else (None, None, "?")
    )
    lines.extend(
        _wrapped(
            f"runs on {_shown(environment or 'no environment', 40)} · "
            f"{_shown(base_url or 'no base URL', 200)} · {_shown(api, 40)}",
            width,
        )
    )
    proposed_at = moment_words(summary.submitted_at, seconds=True)
    lines.extend(_wrapped(f"proposed by {_shown(summary.proposed_by, 64)}, {proposed_at}", width))
    lines.extend(run_lines(summary, width))
    lines.extend(reading_lines(reading, width, currencies=20))
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
    from reviewer.reading.plain import call_lines, common_args, common_lines, extremes_lines

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
    from reviewer.reading.plain import call_lines, common_args, common_lines, extremes_lines

    common = common_args(analysis)
    return {
        "extremes": extremes_lines(analysis.extremes),
        "common_args": common_lines(common),
        "plan": [call.as_json() for call in call_lines(analysis, common)],
    }
