"""Proposals: a revision submitted (and decided by the policy in the same transaction), the list and
its version, a proposal's record and its revisions' bodies, as functions of one open transaction."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from reviewer.plan.proposal import Proposal, ProposalError
from reviewer.policy.verdict import ChangeRequest, Verdict
from reviewer.queue.messages import (
    DecisionState,
    ProposalPage,
    ProposalRecord,
    ProposalSummary,
    RevisionInfo,
    SubmissionAnswer,
    TrailEvent,
)
from reviewer.reading import summary
from reviewer.reading.summary import PlanReading
from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.errors import NotFound
from reviewer.service.listing import Chooser, Listed
from reviewer.service.rules import Row
from reviewer.service.store import change_windows, decisions, events, index, outbox, passkeys, tokens
from reviewer.service.store.base import StoreState, Transaction


@dataclass(frozen=True)
class Submission:
    """A validated proposal revision, ready to store: its identity, digest and original bytes."""

    proposal_id: str
    revision: int
    plan_sha256: str
    title: str
    agent_name: str
    call_count: int
    body: bytes | bytearray
    proposal: Proposal | None = None
    """The parsed proposal, when the caller has it, for the policy to read without parsing again."""


@dataclass(frozen=True)
class ListVersion:
    """What the proposal list depends on: the last write and the next deadline to pass."""

    last_seq: int
    next_deadline: float | None


LIST_VERSION: Final = (
    "(SELECT coalesce(max(seq), 0) FROM trail) AS last_seq, "
    "(SELECT min(deadline) FROM proposals WHERE deadline > :now) AS next_deadline"
)
"""Two index lookups: enough for an ETag that changes on every write and expiry."""


def submit(
    store: StoreState,
    db: Transaction,
    identity: Identity,
    submission: Submission,
    verdict: Verdict | None,
    asked: tuple[ChangeRequest, ...],
    now: float,
    reading: PlanReading | None = None,
) -> tuple[bool, SubmissionAnswer]:
    """Store a revision (`QueueStore.submit`) in the caller's write transaction; answers (False, its
    record) when this very plan is already stored. `verdict` was evaluated before the lock, after the
    changes `asked` of earlier revisions; `reading` too, stored for the list and the waiting event."""
    tokens.require_active(db, identity, store.clock)
    row = db.one(
        "SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=submission.proposal_id
    )
    stored = db.one(
        "SELECT plan_sha256 FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
        proposal_id=submission.proposal_id,
        revision=submission.revision,
    )
    earlier = rules.submission_outcome(
        row,
        identity,
        submission.proposal_id,
        submission.revision,
        submission.plan_sha256,
        None if stored is None else stored["plan_sha256"],
        now,
    )
    if earlier is not None:
        return False, earlier
    seq = index.append_trail(
        db,
        now,
        identity.name,
        "submitted",
        submission.proposal_id,
        submission.revision,
        submission.plan_sha256,
        identity=identity.principal,
    )
    pending_expires_at = now + store.pending_ttl
    # One statement for the first revision and each re-plan: a re-plan keeps the owner and
    # clears the decision of the revision it supersedes.
    db.run(
        "INSERT INTO proposals (proposal_id, owner, latest_revision, latest_seq, plan_sha256, "
        "title, agent_name, call_count, submitted_at, pending_expires_at, deadline, summary) "
        "VALUES (:proposal_id, :owner, :revision, :seq, :plan_sha256, :title, :agent_name, "
        ":call_count, :now, :pending_expires_at, :pending_expires_at, :summary) "
        "ON CONFLICT (proposal_id) DO UPDATE SET latest_revision = excluded.latest_revision, "
        "latest_seq = excluded.latest_seq, plan_sha256 = excluded.plan_sha256, "
        "title = excluded.title, agent_name = excluded.agent_name, "
        "call_count = excluded.call_count, submitted_at = excluded.submitted_at, "
        "pending_expires_at = excluded.pending_expires_at, decision = NULL, decided_by = NULL, "
        "decided_at = NULL, reason = NULL, decision_id = NULL, approval_expires_at = NULL, "
        "claim_id = NULL, claimed_by = NULL, claimed_at = NULL, lease_expires_at = NULL, "
        "executed_at = NULL, deadline = excluded.deadline, summary = excluded.summary",
        proposal_id=submission.proposal_id,
        owner=identity.name,
        revision=submission.revision,
        seq=seq,
        plan_sha256=submission.plan_sha256,
        title=submission.title,
        agent_name=submission.agent_name,
        call_count=submission.call_count,
        now=now,
        pending_expires_at=pending_expires_at,
        summary=None if reading is None else summary.stored(reading),
    )
    db.run(
        "INSERT INTO revisions (proposal_id, revision, plan_sha256, title, call_count, submitted_by, "
        "submitted_at, body) VALUES (:proposal_id, :revision, :plan_sha256, :title, :call_count, "
        ":submitted_by, :now, :body)",
        proposal_id=submission.proposal_id,
        revision=submission.revision,
        plan_sha256=submission.plan_sha256,
        title=submission.title,
        call_count=submission.call_count,
        submitted_by=identity.name,
        now=now,
        body=submission.body,
    )
    key = (submission.proposal_id, submission.revision)
    # A request for changes recorded since the verdict was evaluated: evaluated again, below.
    if verdict is not None and decisions.changes_requested_before(db, *key) == asked:
        store.verdicts[key] = verdict
    else:
        store.verdicts.pop(key, None)
    verdict = decisions.verdict_of(
        store, db, submission.proposal_id, submission.revision, submission.proposal
    )
    state = decisions.decide_by_policy(
        store, db, submission.proposal_id, submission.revision, submission.plan_sha256, verdict, now
    )
    if state == "pending" and store.notifying.targets:
        stored_row = index.proposal_row(db, submission.proposal_id)
        windows = change_windows.window_state(store.policy, verdict.environment, [], now)
        runs_from = None if windows is None or windows.may_run else windows.runs_from
        outbox.emit(
            store,
            db,
            now,
            events.event_key("proposal.waiting", submission.proposal_id, submission.revision),
            events.waiting(stored_row, bytes(submission.body), now, reading=reading, runs_from=runs_from)
            | passkeys.event_links(store, db, submission.proposal_id, submission.revision),
        )
    return True, SubmissionAnswer(
        proposal_id=submission.proposal_id,
        revision=submission.revision,
        plan_sha256=submission.plan_sha256,
        state=state,
    )


def list_version(db: Transaction, now: float) -> ListVersion:
    version = db.one("SELECT " + LIST_VERSION, now=now)
    assert version is not None
    return ListVersion(int(version["last_seq"]), version["next_deadline"])


def caller_and_list_version(
    db: Transaction, token_sha256: str, now: float
) -> tuple[Identity | None, ListVersion]:
    """`QueueStore.caller_and_list_version` in one statement."""
    row = db.one(
        f"SELECT {tokens.TOKEN_COLUMNS}, "
        + LIST_VERSION
        + f" FROM (SELECT 1 AS always) AS one_row LEFT JOIN tokens ON {tokens.TOKEN_VALID}",
        token_sha256=token_sha256,
        now=now,
    )
    assert row is not None
    identity = None if row["id"] is None else tokens.identity_of(row, token_sha256)
    return identity, ListVersion(int(row["last_seq"]), row["next_deadline"])


MAX_SCANNED: Final = 5000
"""Rows one list request reads at most: a filter that matches little answers what it found and a
cursor to read on from, never a walk of the whole history in one request."""


def listed_rows(
    db: Transaction, chooser: Chooser, before_seq: int | None, limit: int, batch_size: int
) -> tuple[list[Listed], int | None]:
    """Up to `limit` rows of the list that `chooser` keeps, newest first (`QueueStore.list_proposals`),
    and the cursor of the next page (None at the end)."""
    before = before_seq if before_seq is not None else 2**62
    chosen: list[Listed] = []
    scanned = 0
    size = limit + 1  # enough when the filter keeps every row, as the unfiltered list's does
    while scanned < MAX_SCANNED:
        batch = db.all(
            "SELECT * FROM proposals WHERE latest_seq < :before ORDER BY latest_seq DESC LIMIT :batch",
            before=before,
            batch=size,
        )
        for row in batch:
            scanned += 1
            before = row["latest_seq"]
            listed = chooser.choose(row)
            if listed is None:
                continue
            if len(chosen) == limit:
                return chosen, chosen[-1].row["latest_seq"]
            chosen.append(listed)
        if len(batch) < size:
            return chosen, None
        size = batch_size
    return chosen, before


def reading_in(db: Transaction) -> Callable[[Row], PlanReading | None]:
    """Each listed row's reading: the one stored with it, or (a row stored before readings were kept)
    its latest revision's, read once; None for a body that is not a plan (a store test's)."""

    def reading_of(row: Row) -> PlanReading | None:
        try:
            return events.row_reading(row, lambda: get_body(db, row["proposal_id"], row["latest_revision"]))
        except ProposalError:
            return None

    return reading_of


def approvals_recorded(db: Transaction, chosen: list[Listed]) -> dict[str, list[str]]:
    """The approvals of each undecided row's latest revision as the trail records them (an approval
    cast, less a `withdrawn` entry that took it back), in the order cast: one statement for the
    whole page, over the span of `latest_seq` it covers (rows of that span the page left out are
    read and dropped), never one a row."""
    undecided = {listed.row["proposal_id"] for listed in chosen if listed.row["decision"] is None}
    if not undecided:
        return {}
    spans = [listed.row["latest_seq"] for listed in chosen]
    rows = db.all(
        "SELECT trail.proposal_id, trail.actor, trail.event FROM proposals JOIN trail "
        "ON trail.proposal_id = proposals.proposal_id AND trail.revision = proposals.latest_revision "
        "WHERE proposals.latest_seq BETWEEN :oldest AND :newest AND proposals.decision IS NULL "
        "AND trail.event IN ('approved', 'withdrawn') ORDER BY trail.seq",
        oldest=min(spans),
        newest=max(spans),
    )
    approvals: dict[str, dict[str, str]] = {}
    for row in rows:
        if row["proposal_id"] not in undecided:
            continue
        cast = approvals.setdefault(row["proposal_id"], {})
        person = row["actor"].casefold()  # one person, whatever the case of the name
        if row["event"] == "approved":
            cast.setdefault(person, row["actor"])
        else:
            cast.pop(person, None)
    return {proposal_id: list(cast.values()) for proposal_id, cast in approvals.items()}


def page(
    chosen: list[Listed], next_seq: int | None, now: float, approvals: dict[str, list[str]]
) -> ProposalPage:
    """The page of the rows `listed_rows` chose, with their `approvals_recorded`, and the cursor
    of the next one."""
    summaries = []
    for listed in chosen:
        row = listed.row
        decision_state = rules.decision_state(row, now)
        summaries.append(
            ProposalSummary(
                proposal_id=row["proposal_id"],
                revision=row["latest_revision"],
                title=row["title"],
                agent_name=row["agent_name"],
                proposed_by=row["owner"],
                plan_sha256=row["plan_sha256"],
                call_count=row["call_count"],
                submitted_at=rules.required_timestamp(row["submitted_at"]),
                state=decision_state.state,
                decided_by=decision_state.decided_by,
                expires_at=decision_state.expires_at,
                claimed_by=decision_state.claimed_by,
                outcome_unknown=decision_state.outcome_unknown,
                reading=listed.reading,
                yours=listed.yours,
                approvals=approvals.get(row["proposal_id"], []) if decision_state.state == "pending" else [],
            )
        )
    return ProposalPage(proposals=summaries, next_cursor=None if next_seq is None else str(next_seq))


def get_record(
    store: StoreState, db: Transaction, identity: Identity, proposal_id: str, now: float
) -> ProposalRecord:
    row = index.visible(db, identity, proposal_id)
    revision_rows = db.all(
        "SELECT revision, plan_sha256, title, call_count, submitted_by, submitted_at "
        "FROM revisions WHERE proposal_id = :proposal_id ORDER BY revision",
        proposal_id=proposal_id,
    )
    trail_rows = db.all(
        "SELECT * FROM trail WHERE proposal_id = :proposal_id ORDER BY seq", proposal_id=proposal_id
    )
    latest = decisions.voted_state(store, db, row, now)
    _counted, withdrawn = decisions.cast_and_withdrawn(db, proposal_id, row["latest_revision"], now)
    revisions = [
        RevisionInfo(
            revision=revision["revision"],
            plan_sha256=revision["plan_sha256"],
            title=revision["title"],
            call_count=revision["call_count"],
            submitted_by=revision["submitted_by"],
            submitted_at=rules.required_timestamp(revision["submitted_at"]),
            state=latest.state if revision["revision"] == latest.revision else "superseded",
        )
        for revision in revision_rows
    ]
    history = [
        TrailEvent(
            seq=event["seq"],
            at=rules.required_timestamp(event["at"]),
            actor=event["actor"],
            event=event["event"],
            revision=event["revision"],
            plan_sha256=event["plan_sha256"],
            reason=event["reason"],
            statement=event["statement"],
            signature=event["signature"],
            identity=event["identity"],
        )
        for event in trail_rows
    ]
    history = decisions.with_withdrawals(history, withdrawn, latest.revision, latest.plan_sha256)
    return ProposalRecord(
        proposal_id=proposal_id,
        proposed_by=row["owner"],
        latest=latest,
        revisions=revisions,
        history=history,
    )


def get_revision_body(db: Transaction, identity: Identity, proposal_id: str, revision: int) -> bytes:
    index.visible(db, identity, proposal_id)
    return get_body(db, proposal_id, revision)


def get_body(db: Transaction, proposal_id: str, revision: int) -> bytes:
    row = db.one(
        "SELECT body FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
        proposal_id=proposal_id,
        revision=revision,
    )
    if row is None:
        raise NotFound(f"proposal {proposal_id!r} has no revision {revision}")
    return bytes(row["body"])


def decision_state(store: StoreState, db: Transaction, identity: Identity, proposal_id: str) -> DecisionState:
    row = index.visible(db, identity, proposal_id)
    return decisions.voted_state(store, db, row, store.clock())


CLOSED_BY_RESTORE: Final = (
    "closed by a restore of the queue's database from a backup: it may have been decided or run "
    "after the backup was taken; submit the plan again"
)
CLOSE: Final = (
    "UPDATE proposals SET reason = :reason, deadline = :now, "
    "pending_expires_at = CASE WHEN decision IS NULL THEN :now ELSE pending_expires_at END, "
    "approval_expires_at = CASE WHEN decision = 'approve' AND claimed_at IS NULL THEN :now "
    "ELSE approval_expires_at END, "
    "lease_expires_at = CASE WHEN claimed_at IS NOT NULL THEN :now ELSE lease_expires_at END "
    "WHERE proposal_id = :proposal_id"
)
"""Close one proposal for good, as a restore does: pending or approved, it expires now; claimed, its
lease ends now (its outcome is unknown); `reason` says why. Time only moves forward, so it stays so."""
OPEN_STATES: Final = frozenset({"pending", "approved", "claimed"})


def close_open(db: Transaction, reason: str, now: float) -> list[str]:
    """Close every proposal still open (pending, approved, claimed without a report); their ids."""
    rows = db.all("SELECT * FROM proposals ORDER BY proposal_id")
    closing = [row["proposal_id"] for row in rows if rules.state_of(row, now) in OPEN_STATES]
    for proposal_id in closing:
        db.run(CLOSE, reason=reason, now=now, proposal_id=proposal_id)
        db.changed.add(proposal_id)
    return closing
