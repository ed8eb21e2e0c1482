"""A queue served by `httpx.MockTransport` from fixed answers, for snapshots that must not vary.

The answers are the API's own pydantic models with fixed times, so a picture never depends on the
clock, the host or a real service's timing; the real service is exercised by test_live.py.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import httpx

from reviewer.plan.proposal import parse_proposal, plan_sha256
from reviewer.queue.messages import (
    DecisionRequest,
    DecisionState,
    ErrorBody,
    ProposalPage,
    ProposalRecord,
    ProposalSummary,
    RevisionInfo,
    TrailEvent,
    Whoami,
)
from reviewer.reading.summary import read_plan
from tests.queue_harness import body, proposal

AT = datetime(2026, 10, 15, 9, 0, tzinfo=UTC)
_REVISION = re.compile(r"^/v1/proposals/([^/]+)/revisions/(\d+)$")
_DECISIONS = re.compile(r"^/v1/proposals/([^/]+)/decisions$")
_RECORD = re.compile(r"^/v1/proposals/([^/]+)$")


@dataclass
class FakeProposal:
    plans: list[bytes]
    proposed_by: str = "deskline-agent"
    state: str = "pending"
    decided_by: str | None = None
    history: list[TrailEvent] = field(default_factory=list)
    approvals: list[str] = field(default_factory=list)
    approvals_required: int = 1

    def digest(self, revision: int) -> str:
        return plan_sha256(parse_proposal(self.plans[revision - 1]))

    @property
    def latest(self) -> int:
        return len(self.plans)


@dataclass
class FakeQueue:
    """Proposals by id, newest first in the list; `stale_once` makes the next decision a 412 after
    which revision 2 appears (an agent re-planning between open and approve)."""

    me: Whoami = field(default_factory=lambda: Whoami(name="alice", role="reviewer"))
    proposals: dict[str, FakeProposal] = field(default_factory=dict)
    replan_on_decision: dict[str, bytes] = field(default_factory=dict)
    replan_after_decision: dict[str, bytes] = field(default_factory=dict)
    """The agent's next revision, submitted as soon as the decision on the current one is answered
    (a request for changes, and the re-plan that answers it before the app's next poll)."""
    reads_plans: bool = False
    """Each list row carries the reading of its plan, as the queue stores one at submission."""

    def add(
        self,
        proposal_id: str,
        *,
        calls: int = 3,
        title: str = "Merge tickets",
        plan: bytes | None = None,
        **state: Any,
    ) -> None:
        """A proposal of `calls` generated calls, or the proposal file `plan` (its own id)."""
        plan = plan or body(proposal(proposal_id, 1, calls=calls, title=title))
        self.proposals[proposal_id] = FakeProposal([plan], **state)

    def transport(self) -> httpx.MockTransport:
        return httpx.MockTransport(self.answer)

    def answer(self, request: httpx.Request) -> httpx.Response:
        path = request.url.path
        if path == "/v1/whoami":
            return _json(self.me)
        if path == "/v1/proposals":
            return self._list(request)
        if match := _REVISION.match(path):
            entry = self.proposals[match[1]]
            return httpx.Response(200, content=entry.plans[int(match[2]) - 1])
        if match := _DECISIONS.match(path):
            return self._decide(match[1], DecisionRequest.model_validate_json(request.content))
        if match := _RECORD.match(path):
            return _json(self._record(match[1]))
        return _json(ErrorBody(error="not_found", message="no such path"), 404)

    def _state(self, proposal_id: str) -> DecisionState:
        entry = self.proposals[proposal_id]
        return DecisionState(
            proposal_id=proposal_id,
            revision=entry.latest,
            plan_sha256=entry.digest(entry.latest),
            state=entry.state,
            decided_by=entry.decided_by,  # type: ignore[arg-type]
            approvals=entry.approvals,
            approvals_required=entry.approvals_required,
        )

    def _list(self, request: httpx.Request) -> httpx.Response:
        summaries = []
        for proposal_id, entry in reversed(self.proposals.items()):
            plan = json.loads(entry.plans[-1])
            summaries.append(
                ProposalSummary(
                    proposal_id=proposal_id,
                    revision=entry.latest,
                    title=plan["title"],
                    agent_name=plan["agent"]["name"],
                    proposed_by=entry.proposed_by,
                    plan_sha256=entry.digest(entry.latest),
                    call_count=len(plan["calls"]),
                    submitted_at=AT,
                    state=entry.state,
                    decided_by=entry.decided_by,  # type: ignore[arg-type]
                    reading=read_plan(parse_proposal(entry.plans[-1])) if self.reads_plans else None,
                    approvals=entry.approvals if entry.state == "pending" else [],
                )
            )
        page = ProposalPage(proposals=summaries)
        etag = f'"{hash(page.model_dump_json()) & 0xFFFFFFFF:x}"'
        if request.headers.get("if-none-match") == etag:
            return httpx.Response(304, headers={"ETag": etag})
        return _json(page, headers={"ETag": etag})

    def _record(self, proposal_id: str) -> ProposalRecord:
        entry = self.proposals[proposal_id]
        revisions = [
            RevisionInfo(
                revision=number,
                plan_sha256=entry.digest(number),
                title="",
                call_count=0,
                submitted_by=entry.proposed_by,
                submitted_at=AT,
                state="superseded" if number < entry.latest else entry.state,
            )  # type: ignore[arg-type]
            for number in range(1, entry.latest + 1)
        ]
        submitted = [
            TrailEvent(
                seq=number,
                at=AT,
                actor=entry.proposed_by,
                event="submitted",
                revision=number,
                plan_sha256=entry.digest(number),
            )
            for number in range(1, entry.latest + 1)
        ]
        return ProposalRecord(
            proposal_id=proposal_id,
            proposed_by=entry.proposed_by,
            latest=self._state(proposal_id),
            revisions=revisions,
            history=submitted + entry.history,
        )

    def _decide(self, proposal_id: str, decision: DecisionRequest) -> httpx.Response:
        entry = self.proposals[proposal_id]
        if proposal_id in self.replan_on_decision:
            entry.plans.append(self.replan_on_decision.pop(proposal_id))
        if decision.revision != entry.latest or decision.plan_sha256 != entry.digest(entry.latest):
            return _json(
                ErrorBody(
                    error="stale_revision",
                    message="not the latest revision",
                    latest_revision=entry.latest,
                    latest_plan_sha256=entry.digest(entry.latest),
                ),
                412,
            )
        if entry.state != "pending":
            return _json(
                ErrorBody(
                    error="not_pending",
                    message="decided",
                    state=entry.state,  # type: ignore[arg-type]
                    decided_by=entry.decided_by,
                ),
                409,
            )
        entry.state = {"approve": "approved", "reject": "rejected"}.get(
            decision.decision, "changes_requested"
        )
        entry.decided_by = self.me.name
        entry.history.append(
            TrailEvent(
                seq=99,
                at=AT,
                actor=self.me.name,
                event=entry.state,  # type: ignore[arg-type]
                revision=entry.latest,
                plan_sha256=decision.plan_sha256,
                reason=decision.reason or None,
            )
        )
        answer = self._state(proposal_id)
        if entry.state == "changes_requested":
            answer = answer.model_copy(update={"reason": decision.reason})
        if proposal_id in self.replan_after_decision:
            entry.plans.append(self.replan_after_decision.pop(proposal_id))
            entry.state, entry.decided_by = "pending", None
        return _json(answer, 201)


def _json(model: Any, status: int = 200, headers: dict[str, str] | None = None) -> httpx.Response:
    return httpx.Response(
        status,
        content=model.model_dump_json(exclude_none=True),
        headers={"Content-Type": "application/json", **(headers or {})},
    )


def replanned(proposal_id: str, calls: int = 4) -> bytes:
    return body(proposal(proposal_id, 2, calls=calls))
