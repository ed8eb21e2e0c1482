"""What the review page shows of one revision, read from the store: what `reviewer show` and the 50x20
screen show (claim, where it runs, counts, alarms, money, the quorum, the full digest, every call, a
page of calls at a time), each string from the proposal sanitized (hidden characters shown), for the
template to escape."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from reviewer.plan.proposal import scan_proposal
from reviewer.plan.sanitize import clip, safe_text
from reviewer.policy.quorum import describe_approvals
from reviewer.queue.overview import PlanSummary, revision_facts, summarize
from reviewer.reading.analysis import Analysis
from reviewer.reading.plain import call_lines, common_args, common_lines, extremes_lines
from reviewer.reading.summary import counts_words
from reviewer.reading.totals import totals_words
from reviewer.service.auth import Identity
from reviewer.service.errors import NotFound
from reviewer.service.store import QueueStore

CALLS_PER_PAGE: Final = 200
PAGE_READER: Final = Identity(0, "review page", "reviewer")
"""The page reads as a reviewer does (every proposal is visible to one); the link's key let it in."""


@dataclass(frozen=True)
class ReviewView:
    """One revision as the page shows it; every string already safe text."""

    proposal_id: str
    revision: int
    latest_revision: int
    state: str
    title: str
    task: str
    environment: str
    base_url: str
    api: str
    proposed_by: str
    counts: str
    money: str
    alarms: list[str]
    needs: str
    runs: str
    """When the plan may run under its change windows (`WindowState.words`): "runs from ..."."""
    approvals: str
    decided: str
    plan_sha256: str
    digest_matches: bool
    extremes: list[str]
    common: list[str]
    calls: list[str]
    call_count: int
    page: int
    pages: int

    @property
    def superseded(self) -> bool:
        return self.revision != self.latest_revision

    @property
    def decidable(self) -> bool:
        """Buttons only for the latest revision, still pending, whose plan hashes to its digest."""
        return not self.superseded and self.state == "pending" and self.digest_matches


def _shown(text: str | None, limit: int = 300) -> str:
    return safe_text(clip(text or "", limit))


def review_view(store: QueueStore, proposal_id: str, revision: int, page: int) -> ReviewView:
    """The page of `revision` of `proposal_id` (404 when there is no such revision)."""
    record = store.get_record(PAGE_READER, proposal_id)
    try:
        facts = revision_facts(record, revision)
    except LookupError:
        raise NotFound(f"proposal {proposal_id!r} has no revision {revision}") from None
    proposal = scan_proposal(store.get_revision_body(PAGE_READER, proposal_id, revision), "stored proposal")
    latest = record.latest
    current = revision == latest.revision
    analysis = Analysis(proposal)
    summary = summarize(proposal, facts, analysis)
    reading = summary.reading
    assert reading is not None  # `summarize` reads the plan it is given
    pages = max(1, -(-len(analysis) // CALLS_PER_PAGE))
    page = min(max(page, 1), pages)
    common = common_args(analysis)
    first = (page - 1) * CALLS_PER_PAGE
    calls = [
        line.text()
        for number, line in enumerate(call_lines(analysis, common))
        if first <= number < first + CALLS_PER_PAGE
    ]
    return ReviewView(
        proposal_id=_shown(summary.proposal_id, 128),
        revision=revision,
        latest_revision=latest.revision,
        state=summary.state,
        title=_shown(summary.title, 2000),
        task=_shown(summary.task, 2000),
        environment=_shown(reading.environment or "no environment", 80),
        base_url=_shown(reading.base_url or "no base URL", 300),
        api=_shown(reading.api, 80),
        proposed_by=_shown(summary.proposed_by, 80),
        counts=counts_words(reading),
        money=totals_words(reading.totals, limit=20) if reading.totals else "",
        alarms=[_shown(alarm.text, 600) for alarm in reading.alarms],
        needs=_shown(latest.policy.needs if latest.policy and current else "", 300),
        runs=latest.window.words() if current and latest.window is not None else "",
        approvals=_approvals(summary) if current else "",
        decided=_decided(latest.decided_by, latest.reason) if current and summary.state != "pending" else "",
        plan_sha256=summary.plan_sha256,
        digest_matches=summary.digest_matches is True,
        extremes=extremes_lines(analysis.extremes),
        common=common_lines(common),
        calls=calls,
        call_count=len(analysis),
        page=page,
        pages=pages,
    )


def _approvals(summary: PlanSummary) -> str:
    return describe_approvals(map(_shown, summary.approvals), summary.approvals_required) + " so far"


def _decided(decided_by: str | None, reason: str | None) -> str:
    by = f" by {_shown(decided_by, 200)}" if decided_by else ""
    why = f": {_shown(reason, 600)}" if reason else ""
    return f"{by}{why}"
