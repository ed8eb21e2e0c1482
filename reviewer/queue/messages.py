"""The queue API's messages as pydantic models, shared by the service and its client.

Proposals themselves are not here: they are msgspec structs (`reviewer.plan.proposal`), sent and
answered as the agent's own JSON bytes, so a 100,000-call plan never passes through pydantic.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal, NotRequired

from pydantic import BaseModel, ConfigDict, Field, model_validator
from typing_extensions import TypedDict

from reviewer.plan.proposal import MAX_CALLS, MAX_SAFE_INTEGER, MAX_STRING_CHARS
from reviewer.queue.answers import RefusalKind as RefusalKind
from reviewer.queue.answers import State as State
from reviewer.queue.answers import TrailEventKind as TrailEventKind
from reviewer.queue.answers import window_words
from reviewer.reading.summary import PlanReading
from reviewer.signing.basics import MAX_SIGNATURE_CHARS, MAX_STATEMENT_BYTES

Role = Literal["agent", "reviewer", "metrics", "auditor"]
RevisionState = Literal[
    "pending", "approved", "claimed", "rejected", "changes_requested", "expired", "executed", "superseded"
]
"""A stored revision's state: `superseded` once a newer revision exists (it then authorizes nothing)."""
Decision = Literal["approve", "reject", "request_changes"]
"""`request_changes` closes the revision like a rejection, and asks its agent for the next one."""
RunEnding = Literal["completed", "stopped", "failed", "cancelled"]
"""How a real run ended: every planned call ran; it stopped before a call that was not the plan's (or
after one the API refused); the task or framework raised; or it was cancelled."""

BREAK_GLASS_PREFIX = "break glass: "
"""How the trail words a break-glass approval's reason: `break glass: the payment API is down`."""


def is_break_glass(reason: str | None) -> bool:
    """Whether an approval's reason, as the trail keeps it, is a break-glass approval's."""
    return (reason or "").startswith(BREAK_GLASS_PREFIX)


RevisionNumber = Annotated[int, Field(ge=1, le=MAX_SAFE_INTEGER)]
Sha256 = Annotated[str, Field(pattern=r"^[0-9a-f]{64}$")]
ClaimId = Annotated[str, Field(pattern=r"^[0-9a-f]{32}$")]


class Message(BaseModel):
    """Base of every API message: unknown fields are refused, not silently dropped."""

    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)


class QueueVersion(Message):
    """`GET /v1`, asked without a token: the release, the queue schema it writes, and the proposal
    format with every field it reads (`reviewer.plan.format_fields`), so an agent of another release
    leaves out what this queue would refuse. Read by releases to come as well: unknown fields in it
    are ignored, not refused."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)

    release: str
    schema_version: int
    proposal_format: str
    proposal_fields: list[str]


class Whoami(Message):
    name: str
    role: Role
    identity: str | None = None
    """How the caller signed in (see `TrailEvent.identity`)."""


class ProviderSignIn(Message):
    """How a reviewer signs in through the team's OpenID provider (`GET /v1/auth`)."""

    issuer: str
    client_id: str
    scopes: str
    device_authorization_endpoint: str | None = None
    token_endpoint: str
    session_seconds: float
    """The longest session the queue accepts before the client renews it."""


class SignInMethods(Message):
    """`GET /v1/auth`, asked without a token: how this queue's reviewers sign in. `oidc` is set when
    they sign in through the provider (then `reviewer login` runs its device authorization grant);
    otherwise a reviewer pastes a token minted for them."""

    minted_reviewer_tokens: bool
    """Whether a minted reviewer token decides here (a provider queue takes break-glass ones only)."""
    oidc: ProviderSignIn | None = None


class TrailCheckpoint(Message):
    """`GET /v1/trail/checkpoint`: the log's newest checkpoint as a signed note, the key that signs
    it (`ssh-ed25519 ...`), and, asked `since` an earlier size, the RFC 9162 consistency proof from
    that size to this one (base64 hashes; absent when `since` is 0 or more than the log holds)."""

    checkpoint: str
    public_key: str
    size: int
    since: int | None = None
    consistency: list[str] | None = None


class SubmissionAnswer(Message):
    """The answer to a submission (201 when stored now, 200 when the same plan was already stored)."""

    proposal_id: str
    revision: int
    plan_sha256: str
    state: RevisionState


class DecisionSignature(Message):
    """One signed decision as the queue verified and stored it: check it yourself with
    `ssh-keygen -Y verify -n reviewer-decision@v1 -I REVIEWER -f allowed_signers -s SIG < statement`
    (the statement's exact text, no newline added)."""

    reviewer: str
    decision: Decision
    statement: str
    signature: str
    key_fingerprint: str
    at: datetime


class PolicyRuleState(Message):
    """A policy rule that matched the revision: what it asks, or the error it raised (a human decides)."""

    rule: str
    asks: str
    error: str | None = None


class PolicyState(Message):
    """What the queue's policy asks of the revision: the environment whose rule applies (None for
    `[default]`), `needs` in words ("needs 2 approvals: rule `deletes in production`"), the rules that
    matched, and alarms of where the plan runs (its base URL is another environment's, its
    environment's name is a look-alike). `decided_by` is `policy:<rule>` when the policy itself
    rejected (`reason` is sent to the agent) or approved."""

    environment: str | None = None
    outcome: Literal["human", "reject", "approve"] = "human"
    needs: str
    decided_by: str | None = None
    reason: str | None = None
    rules: list[PolicyRuleState] = Field(default_factory=list)
    alarms: list[str] = Field(default_factory=list)


class WindowState(Message):
    """Whether the revision's plan may run now under its environment's change windows, by the queue's
    clock (never the agent's): `may_run`, and then `runs_until` (the queue's time the allowed span ends,
    None: no window ends it) and the `window` it ends at; or else the `window` that keeps it and
    `runs_from`, when it may run next (None: not within 400 days). `break_glass` names the reviewers whose
    break-glass approvals count; `break_glass_required` of them let it run at once, whatever the windows."""

    may_run: bool
    window: str | None = None
    kind: Literal["allow", "deny"] | None = None
    """What keeps a plan that may not run: a deny window it is inside, or allow windows it is outside."""
    runs_from: datetime | None = None
    runs_until: datetime | None = None
    break_glass: list[str] = Field(default_factory=list)
    break_glass_required: int | None = None

    def words(self) -> str:
        """One line, as `reviewer show`, `reviewer approve` and the review screen say it
        (`reviewer.queue.answers.window_words`)."""
        return window_words(self)


class ExecutorRefusal(Message):
    """An executor's refusal of an approval before it claimed it, as the queue stored it: who refused
    (the agent token's name), when, why (`kind`) and the executor's own words. `message` is the
    executor's text: untrusted, sanitize to show."""

    revision: int
    plan_sha256: str
    kind: RefusalKind
    message: str
    refused_by: str
    at: datetime


class DecisionState(Message):
    """The state of a proposal's latest revision.

    `expires_at` is when a pending proposal or an approval stops counting (or stopped, once
    `expired`); `decided_by`, `decided_at` and `reason` are set once a reviewer decided;
    `claimed_by`, `claimed_at` and `lease_expires_at` once a run claimed the approval, and
    `outcome_unknown` when that run has not reported by the end of its lease (it may have written:
    it is never re-runnable); `executed_at` once the run's report is stored. `plan_sha256` is the
    latest revision's digest, the one an approval names.
    """

    proposal_id: str
    revision: int
    plan_sha256: str
    state: State
    decided_by: str | None = None
    decided_at: datetime | None = None
    reason: str | None = None
    expires_at: datetime | None = None
    claimed_by: str | None = None
    claimed_at: datetime | None = None
    lease_expires_at: datetime | None = None
    outcome_unknown: bool | None = None
    executed_at: datetime | None = None
    approvals: list[str] = Field(default_factory=list)
    approvals_required: int = 1
    signatures_required: bool = False
    signatures: list[DecisionSignature] = Field(default_factory=list)
    policy: PolicyState | None = None
    refusals: list[ExecutorRefusal] = Field(default_factory=list, exclude_if=lambda refusals: not refusals)
    """Left out of the answer when there are none: an agent of a release before executors reported
    refusals refuses a field it does not know, and reads the state without it."""
    window: WindowState | None = Field(default=None, exclude_if=lambda window: window is None)
    """Set when the environment declares change windows: whether the plan may run now (left out
    otherwise, for the same agents)."""


class ProposalSummary(Message):
    """One row of the reviewer's list. `title` and `agent_name` are agent text: sanitize to show."""

    proposal_id: str
    revision: int
    title: str
    agent_name: str
    proposed_by: str
    plan_sha256: str
    call_count: int
    submitted_at: datetime
    state: State
    decided_by: str | None = None
    expires_at: datetime | None = None
    claimed_by: str | None = None
    outcome_unknown: bool | None = None
    reading: PlanReading | None = None
    """What the plan does, read once when it was submitted: where, counts, alarms worst first, money."""
    yours: bool = True
    """Whether the environment the policy gives it lets this reviewer decide it."""
    approvals: list[str] = Field(default_factory=list)
    """Pending: who approved this revision so far, as the trail records it (an approval the trail
    says was withdrawn, its reviewer's token revoked or expired or sign-in ended, is taken out). Any
    approval cast or withdrawn changes the row, so a reviewer's app knows which proposal's quorum
    moved without fetching each. The record (`DecisionState.approvals`) is what counts: it also
    takes out an approval whose signing key or passkey was removed since, which the trail does not
    record."""


class ProposalPage(Message):
    """Summaries, newest submission first; pass `next_cursor` back for the following page."""

    proposals: list[ProposalSummary]
    next_cursor: str | None = None


class RevisionInfo(Message):
    revision: int
    plan_sha256: str
    title: str
    call_count: int
    submitted_by: str
    submitted_at: datetime
    state: RevisionState


class TrailEvent(Message):
    """One entry of the append-only trail: a submission, a decision or an execution."""

    seq: int
    at: datetime
    actor: str
    event: TrailEventKind
    revision: int
    plan_sha256: str
    reason: str | None = None
    statement: str | None = None
    signature: str | None = None
    identity: str | None = None
    """How the actor signed in: `token:NAME`, `break-glass:NAME` (a reviewer's token for when the
    identity provider is down), `oidc:ISSUER#SUBJECT` (the provider's person), `policy:RULE`; None
    for events recorded before the queue kept it."""


class ProposalRecord(Message):
    """A proposal as the queue holds it: the latest revision's state, every revision, the trail.

    The plans themselves are fetched per revision (`GET .../revisions/{n}`), so polling a record
    stays cheap however large the plan is.
    """

    proposal_id: str
    proposed_by: str
    latest: DecisionState
    revisions: list[RevisionInfo]
    history: list[TrailEvent]


class DecisionRequest(Message):
    """A reviewer's decision; it names the revision and digest it was made on.

    `statement` and `signature` come together or not at all: the decision statement's exact text
    (`reviewer.signing.sshsig.DecisionStatement`) and the armored SSHSIG over it.
    """

    revision: RevisionNumber
    plan_sha256: Sha256
    decision: Decision
    reason: str = Field(default="", max_length=MAX_STRING_CHARS)
    statement: str | None = Field(default=None, max_length=MAX_STATEMENT_BYTES)
    signature: str | None = Field(default=None, max_length=MAX_SIGNATURE_CHARS)
    break_glass: bool | None = None
    """True: an approval that also lets the plan run outside its change windows once enough reviewers gave
    one (`reason` says why, and the trail keeps it as `break glass: REASON`); given on a revision
    already approved, it adds that word without deciding again."""

    @model_validator(mode="after")
    def _changes_need_a_reason(self) -> DecisionRequest:
        """Asking for changes without saying which leaves the agent nothing to re-plan from; breaking
        glass without saying why leaves the trail nothing to answer for."""
        if self.decision == "request_changes" and not self.reason.strip():
            raise ValueError("reason: required when the decision is request_changes; say what to change")
        if self.break_glass and (self.decision != "approve" or not self.reason.strip()):
            raise ValueError("break_glass: an approval only, with a reason saying why it cannot wait")
        posing = self.decision == "approve" and self.reason.casefold().startswith(BREAK_GLASS_PREFIX)
        if posing and not self.break_glass:
            raise ValueError(
                f"reason: {BREAK_GLASS_PREFIX!r} begins a break-glass approval only; say it otherwise"
            )
        return self


class ClaimRequest(Message):
    """A runner's claim of the approval of one revision's exact plan, before its first real write."""

    revision: RevisionNumber
    plan_sha256: Sha256


class RefusalReport(Message):
    """An executor's word that it refused the approval of one revision's exact plan before claiming it
    (`POST /v1/proposals/{id}/refusals`): nothing of it ran, and the reviewers should know why."""

    revision: RevisionNumber
    plan_sha256: Sha256
    kind: RefusalKind
    message: str = Field(min_length=1, max_length=MAX_STRING_CHARS, pattern=r"^[^\x00]*$")
    """The executor's words (no NUL: PostgreSQL's text holds none); shown escaped, as all agent text."""


class Claim(Message):
    """A single-use right to run one digest: the run's report names `claim_id`.

    Until the report arrives the approval is fixed (no expiry, no re-plan); past `lease_expires_at`
    without a report, reviewers see an unknown outcome.
    """

    claim_id: str
    proposal_id: str
    revision: int
    plan_sha256: str
    claimed_by: str
    claimed_at: datetime
    lease_expires_at: datetime
    window: WindowState | None = None
    """Set under change windows: `runs_until` is when this run must stop before its next write, in the
    queue's time (the executor counts down from `claimed_at` on its own monotonic clock)."""


class SentRequestId(TypedDict):
    """The request id a real write was sent with (under `header`), and the API's own id from its answer.

    What ties a call of the report to its line in the API's audit log (`reviewer verify`).
    """

    seq: RevisionNumber
    header: Annotated[str, Field(min_length=1, max_length=100)]
    request_id: Annotated[str, Field(min_length=1, max_length=200)]
    api_request_id: NotRequired[Annotated[str, Field(max_length=500)] | None]
    sent_at: NotRequired[Annotated[str, Field(max_length=40)] | None]


AuditText = Annotated[str, Field(max_length=500)]


class AuditedCall(TypedDict):
    """One call of the run as the audit source showed it: `matched`, `differs` (how), `missing`, or
    `ambiguous` (several entries could be it, and the log keeps no request id to tell them apart)."""

    seq: RevisionNumber
    verdict: Literal["matched", "differs", "missing", "ambiguous"]
    where: NotRequired[AuditText | None]
    """The log's file (or URL) and line that records it."""
    matched_by: NotRequired[AuditText | None]
    differences: NotRequired[Annotated[list[AuditText], Field(max_length=10)]]


class UnplannedWrite(TypedDict):
    """A write in the run's window that no approved call made, as the log tells it (hostile text)."""

    method: Annotated[str, Field(max_length=20)]
    path: AuditText
    """The request path with its query, or the resource where the log names no path."""
    action: NotRequired[AuditText | None]
    status: NotRequired[Annotated[int, Field(ge=0, le=999)] | None]
    request_id: NotRequired[AuditText | None]
    actor: NotRequired[AuditText | None]
    time: NotRequired[Annotated[str, Field(max_length=40)] | None]
    where: NotRequired[AuditText | None]
    note: NotRequired[AuditText | None]
    """What makes it stand out: `reuses call 2's request id`, a dry-run parameter the API ignored."""


MAX_UNPLANNED_LISTED = 100
"""Unplanned writes a report lists one by one; past this they are counted (`unplanned_count`)."""


class AuditVerification(TypedDict):
    """The real run held against an audit source by the runner that made it (docs/design.md, "Verifying
    against audit logs").

    `source` is `KIND:LOCATION` without credentials (a URL's query left out). `complete` false means
    the log could not vouch for the run (`problem` says why): unread, no entry in the window, or
    unreadable lines.
    """

    source: AuditText
    complete: bool
    calls: Annotated[list[AuditedCall], Field(max_length=MAX_CALLS)]
    """One entry per call the run made: as many as the largest plan holds."""
    unplanned: Annotated[list[UnplannedWrite], Field(max_length=MAX_UNPLANNED_LISTED)]
    unplanned_count: Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]
    problem: NotRequired[AuditText | None]
    dry_run_entries_excluded: NotRequired[Annotated[int, Field(ge=0, le=MAX_SAFE_INTEGER)]]
    """Entries in the log left out as the dry run's own requests, known by the request ids the
    proposal names (`dry_run.request_ids`): whoever ran the dry run wrote those ids, the agent's own
    process for the Python library, so this rests on the proposal's word, not the API's. Absent when
    none was left out, and from older runners."""


class ExecutionReport(Message):
    """What the real run did: its calls and, where the API has one, the matching audit-log lines.

    It belongs to the claim the run made (`claim_id`), so it is stored however the proposal moved on
    meanwhile. `ended` says how the run ended; `calls` are the calls that reached the API, each with
    its `outcome.status`: `unknown` for a request that was sent and never answered (a timeout or a
    dropped connection after sending: the API may have performed it). `unknown_outcomes` lists their
    seqs, and must: the queue refuses a report whose list and calls disagree.
    """

    revision: RevisionNumber
    plan_sha256: Sha256
    claim_id: ClaimId | None = None
    ended: RunEnding | None = None
    calls: list[dict[str, Any]]
    unknown_outcomes: list[RevisionNumber] = Field(default_factory=list)
    audit_log: list[dict[str, Any]] | None = None
    note: str | None = Field(default=None, max_length=MAX_STRING_CHARS)
    request_ids: list[SentRequestId] | None = None
    """Each real HTTP write's own request id and the API's (docs/design.md, "Verifying against audit logs");
    absent from older runners."""
    audit: AuditVerification | None = None
    """The run against the audit source its runner was given (`--audit`), read after the last call."""


class StoredExecution(Message):
    """An execution report as the queue stored it, with who reported it (the token's name) and when.

    `calls`, `audit_log` and `note` are the agent's report as sent: untrusted, sanitize to show.
    """

    revision: int
    plan_sha256: str
    executed_by: str
    at: datetime
    claim_id: str | None = None
    ended: RunEnding | None = None
    calls: list[dict[str, Any]]
    unknown_outcomes: list[int] = Field(default_factory=list)
    """Seqs of the calls sent and never answered: they may have been performed."""
    audit_log: list[dict[str, Any]] | None = None
    note: str | None = None
    request_ids: list[SentRequestId] | None = None
    audit: AuditVerification | None = None


class ExecutionHistory(Message):
    """Every execution reported for a proposal, oldest first (an approval authorizes one each)."""

    proposal_id: str
    executions: list[StoredExecution]


class ErrorBody(Message):
    """Every refusal: a stable `error` code and a `message` that says what to do.

    A 409 on a decision adds `state` and, when a reviewer decided, `decided_by`; a 412 adds the
    latest revision and digest so the reviewer can look again.
    """

    error: str
    message: str
    state: State | None = None
    decided_by: str | None = None
    claimed_by: str | None = None
    latest_revision: int | None = None
    latest_plan_sha256: str | None = None
    window: str | None = None
    """On a claim refused outside the change windows: the window that keeps the plan."""
    runs_from: datetime | None = None
    """... and when it may run next (absent: no window lets it within 400 days)."""
