"""The queue's rules (who may decide, what is current, one winner, one run per approval) as plain
functions of the stores' rows.

Each store reads the rows it needs inside one serialized transaction, asks these functions what the
rules say, and writes what they allow; a refusal raised here rolls the transaction back. Keeping the
rules out of the stores means SQLite and PostgreSQL cannot drift apart on "412 before 403 before
409", and the rules are unit-tested without a database or HTTP.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any, Final, TypeVar

from reviewer.plan.sanitize import safe_text
from reviewer.queue.messages import Claim, DecisionState, RevisionState, State, SubmissionAnswer
from reviewer.service.auth import Identity, Role
from reviewer.service.errors import (
    BadRequest,
    ClaimRefused,
    Conflict,
    ExecutionRefused,
    Forbidden,
    IdempotencyMismatch,
    NotFound,
    NotPending,
    StaleRevision,
    Unauthorized,
)

Answer = TypeVar("Answer", DecisionState, Claim)
"""What an Idempotency-Key replays: a decision state, or a claim."""

Row = Mapping[str, Any]
"""A row as both stores return it: columns by name (`sqlite3.Row`, psycopg's `dict_row`)."""

TOKEN_NAME: Final = re.compile(r"[A-Za-z0-9._-]{1,64}")
"""Token names: what a reviewer reads as the author of a decision, so plain ASCII words only."""


def timestamp(seconds: float | None) -> datetime | None:
    return None if seconds is None else datetime.fromtimestamp(seconds, UTC)


def required_timestamp(seconds: float) -> datetime:
    return datetime.fromtimestamp(seconds, UTC)


LATEST_TIMESTAMP: Final = datetime.max.replace(tzinfo=UTC).timestamp()
"""The last second a date can show (9999-12-31): no time the queue stores goes past it."""


def clamped_timestamp(seconds: float) -> datetime:
    """`seconds` as a date, or the latest or earliest date there is for a time no date can show,
    so that listing a row written before times were bounded never fails."""
    try:
        return datetime.fromtimestamp(seconds, UTC)
    except (OverflowError, OSError, ValueError):
        return datetime.max.replace(tzinfo=UTC) if seconds > 0 else datetime.min.replace(tzinfo=UTC)


def shown_timestamp(seconds: float | None) -> datetime | None:
    return None if seconds is None else clamped_timestamp(seconds)


# tokens


def same_name(first: str, second: str) -> bool:
    """Names are one identity without regard to case: `Alice` may not approve what `alice` proposed."""
    return first.casefold() == second.casefold()


def check_token_name(name: str) -> str:
    """1 to 64 of `[A-Za-z0-9._-]`: no space, control or look-alike letter can hide in an author's name."""
    if TOKEN_NAME.fullmatch(name) is None:
        raise BadRequest(
            f"the token name {safe_text(name)!r} is not 1 to 64 letters, digits, '.', '_' or '-'; "
            "choose a name such as 'alice' or 'deploy-agent.eu'"
        )
    return name


def article(role: str) -> str:
    """`an agent`, `an auditor`, `a reviewer`, `a metrics` token."""
    return "an" if role[:1] in ("a", "e", "i", "o", "u") else "a"


def check_new_token(name: str, role: Role, earlier: list[Row]) -> None:
    """May a token named `name` be minted, given every token whose name is the same person's?"""
    check_token_name(name)
    check_name_free(name, role, earlier)


def check_name_free(name: str, role: Role, earlier: list[Row], signs_in: bool = False) -> None:
    """May `name` go to a new token of `role` (or, `signs_in`, to a provider's person deciding under
    it), given every other token whose name is the same person's (`policy.quorum.person`)?

    A name keeps the role of its first token, revoked or not: proposals are owned by name and a
    decider must not be the owner, so an agent's name that came back as a reviewer's could approve
    that agent's proposals. One active token per name, so revoking a name revokes the person.
    """
    for row in earlier:
        if row["role"] != role:
            then = "it cannot decide" if signs_in else f"choose another name for the {role} token"
            raise Conflict(
                f"the name {row['name']!r} was used for {article(row['role'])} {row['role']} token, and a "
                f"name keeps its role for life; {then}"
            )
    for row in earlier:
        if row["revoked_at"] is None:
            if signs_in:
                raise Conflict(
                    f"another active token is named {row['name']!r}; revoke it (`reviewer token revoke`) "
                    f"before {name} signs in"
                )
            raise Conflict(f"a token named {row['name']!r} exists; revoke it first or choose another name")


def require_active_token(row: Row | None) -> None:
    """The caller's token, read again inside a write: revoked meanwhile means the write is refused.

    Authentication happens when a request arrives; a decision whose body is still arriving when
    the operator revokes the token must not be recorded after the revocation.
    """
    if row is None or row["revoked_at"] is not None:
        raise Unauthorized("this token was revoked; ask the queue's operator for one")


# proposals


def require_visible(row: Row | None, identity: Identity, proposal_id: str) -> Row:
    """The proposal if this identity may see it; another agent's proposal is as absent as a missing one.

    A reviewer sees every proposal; an agent only those it submitted (revision 1 fixes the owner).
    """
    if row is None or (identity.role != "reviewer" and not same_name(row["owner"], identity.name)):
        raise NotFound(f"no proposal {proposal_id!r}; check the id, or whether it was submitted by you")
    return row


def derive_state(
    decision: str | None,
    approval_expires_at: float | None,
    claimed_at: float | None,
    executed_at: float | None,
    pending_expires_at: float,
    now: float,
) -> State:
    """The state of a latest revision at `now`, from the columns of its `proposals` row.

    A claim fixes the approval: a claimed revision neither expires nor turns back into approved,
    whatever the clock says, until its run's report makes it executed.
    """
    if executed_at is not None:
        return "executed"
    if claimed_at is not None:
        return "claimed"
    if decision == "reject":
        return "rejected"
    if decision == "request_changes":
        return "changes_requested"
    if decision == "approve":
        return "approved" if approval_expires_at is not None and now < approval_expires_at else "expired"
    return "pending" if now < pending_expires_at else "expired"


def state_of(row: Row, now: float) -> State:
    return derive_state(
        row["decision"],
        row["approval_expires_at"],
        row["claimed_at"],
        row["executed_at"],
        row["pending_expires_at"],
        now,
    )


def decision_state(row: Row, now: float) -> DecisionState:
    """What the decision endpoint answers for a `proposals` row at `now`."""
    state = state_of(row, now)
    if state in ("claimed", "executed"):
        expires_at = None  # the claim fixed the approval
    elif row["decision"] == "approve":
        expires_at = row["approval_expires_at"]
    elif row["decision"] is None:
        expires_at = row["pending_expires_at"]
    else:
        expires_at = None
    return DecisionState(
        proposal_id=row["proposal_id"],
        revision=row["latest_revision"],
        plan_sha256=row["plan_sha256"],
        state=state,
        decided_by=row["decided_by"],
        decided_at=timestamp(row["decided_at"]),
        reason=row["reason"],
        expires_at=timestamp(expires_at),
        claimed_by=row["claimed_by"],
        claimed_at=timestamp(row["claimed_at"]),
        lease_expires_at=timestamp(row["lease_expires_at"]),
        outcome_unknown=outcome_unknown(row, state, now),
        executed_at=timestamp(row["executed_at"]),
    )


def outcome_unknown(row: Row, state: State, now: float) -> bool | None:
    """True for a claim whose run has not reported by the end of its lease: it may have written."""
    if state != "claimed":
        return None
    return bool(now >= row["lease_expires_at"])


def submission_outcome(
    row: Row | None,
    identity: Identity,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    stored_sha256: str | None,
    now: float,
) -> SubmissionAnswer | None:
    """An earlier answer when this very plan is stored under this number, else None (store it).

    Refused: another agent's id (409), a number that is not the next one (409, saying which is).
    `stored_sha256` is the digest stored under `revision`, if any.
    """
    if row is not None and not same_name(row["owner"], identity.name):
        raise Conflict(f"proposal_id {proposal_id!r} belongs to another agent; choose another id")
    if row is not None and state_of(row, now) == "claimed" and now < row["lease_expires_at"]:
        raise ClaimRefused(
            f"revision {row['latest_revision']} of {proposal_id!r} is running under a claim by "
            f"{row['claimed_by']}; submit a new revision once that run is reported",
            state="claimed",
            claimed_by=row["claimed_by"],
        )
    if row is not None and stored_sha256 == plan_sha256:
        latest = revision == row["latest_revision"]
        state: RevisionState = state_of(row, now) if latest else "superseded"
        return SubmissionAnswer(
            proposal_id=proposal_id, revision=revision, plan_sha256=plan_sha256, state=state
        )
    expected = 1 if row is None else row["latest_revision"] + 1
    if revision != expected:
        stored_note = (
            f" and revision {revision} is stored with another plan"
            if row is not None and revision <= row["latest_revision"]
            else ""
        )
        raise Conflict(
            f"the next revision of {proposal_id!r} is {expected}{stored_note}; re-plan as revision {expected}"
        )
    return None


def require_latest(row: Row, revision: int, plan_sha256: str) -> None:
    """412 unless the request names the latest revision and its digest; checked before any state."""
    if revision != row["latest_revision"] or plan_sha256 != row["plan_sha256"]:
        what = "revision" if revision != row["latest_revision"] else "plan_sha256"
        raise StaleRevision(
            f"the {what} named is not the latest: {row['proposal_id']!r} is at revision "
            f"{row['latest_revision']} with plan_sha256 {row['plan_sha256']}; review that revision first",
            latest_revision=row["latest_revision"],
            latest_plan_sha256=row["plan_sha256"],
        )


def check_decision(
    row: Row, identity: Identity, revision: int, plan_sha256: str, now: float, break_glass: bool = False
) -> None:
    """May this reviewer decide the proposal now? Refusals in order: 412 (not the latest revision),
    403 (the decider's name owns the proposal), 409 (not pending; a break-glass approval may also be
    added to an approval no run claimed yet). The route refused non-reviewers."""
    require_latest(row, revision, plan_sha256)
    if same_name(row["owner"], identity.name):
        raise Forbidden(
            f"{identity.name!r} submitted {row['proposal_id']!r}: you proposed this; "
            "another reviewer must decide",
        )
    state = state_of(row, now)
    if state != "pending" and not (break_glass and state == "approved"):
        who = f" by {row['decided_by']}" if row["decided_by"] else ""
        raise NotPending(
            f"revision {row['latest_revision']} of {row['proposal_id']!r} is already {state}{who}; "
            "reload it before deciding",
            state=state,
            decided_by=row["decided_by"],
        )


def check_claim(row: Row, revision: int, plan_sha256: str, now: float) -> None:
    """May a run claim this approval now? 412 (not the latest revision and digest), then 409 unless
    approved now: pending, decided otherwise, expired, or already claimed (naming who holds it)."""
    require_latest(row, revision, plan_sha256)
    state = state_of(row, now)
    if state == "approved":
        return
    if state == "claimed":
        why = (
            f"a run by {row['claimed_by']} already holds its approval (claimed at "
            f"{required_timestamp(row['claimed_at']).isoformat()}); an approval authorizes one run"
        )
    else:
        why = {
            "pending": "no reviewer has approved it yet",
            "rejected": f"{row['decided_by']} rejected it",
            "changes_requested": f"{row['decided_by']} asked for changes ({safe_text(row['reason'] or '')}); "
            "submit the next revision for review",
            "expired": "its approval expired before a run claimed it; submit it again for a new decision",
            "executed": "its approval was already used by a run; an approval authorizes one",
        }[state]
    raise ClaimRefused(
        f"revision {row['latest_revision']} of {row['proposal_id']!r} cannot be claimed: {why}",
        state=state,
        decided_by=row["decided_by"],
        claimed_by=row["claimed_by"],
    )


def require_open_claim(newest_claim: Row | None, proposal_id: str) -> None:
    """A report is read only when its agent's newest claim of the proposal still waits for its report.

    An approval has one claim and a claim one report, so an older claim of this agent's is
    reported or belongs to a superseded revision; the newest decides.
    """
    if newest_claim is None:
        raise ExecutionRefused(
            f"no claim of {proposal_id!r} by this agent: claim the approval "
            "(POST /v1/proposals/{id}/claims) before the first real write"
        )
    if newest_claim["reported"]:
        raise ExecutionRefused(
            f"the run of claim {newest_claim['claim_id']} was already reported; a claim has one report",
            state="executed",
        )


def check_report(
    claim: Row | None,
    already_reported: bool,
    proposal_id: str,
    claim_id: str | None,
    revision: int,
    plan_sha256: str,
) -> Row:
    """The claim a report belongs to; 409 without one of the reporter's own (or with one already
    reported), 412 if the report names another revision or digest than its claim.

    A report belongs to its claim, not to whatever the proposal became meanwhile, so nothing about
    the proposal's current state is checked here: a run that wrote is never lost.
    """
    if claim_id is None:
        raise ExecutionRefused(
            f"a report of {proposal_id!r} must name its claim (claim_id): claim the approval "
            "(POST /v1/proposals/{id}/claims) before the first real write"
        )
    if claim is None:
        raise ExecutionRefused(f"no claim {claim_id} of {proposal_id!r} is yours; claim before running")
    if already_reported:
        raise ExecutionRefused(
            f"the run of claim {claim_id} was already reported; a claim has one report", state="executed"
        )
    if revision != claim["revision"] or plan_sha256 != claim["plan_sha256"]:
        raise StaleRevision(
            f"the report names revision {revision}, but its claim is for revision "
            f"{claim['revision']} with plan_sha256 {claim['plan_sha256']}",
            latest_revision=claim["revision"],
            latest_plan_sha256=claim["plan_sha256"],
        )
    return claim


def check_refusal(row: Row, stored_sha256: str | None, revision: int, plan_sha256: str) -> None:
    """An executor's refusal names a revision the queue holds with that very digest (412 otherwise).

    Nothing about the proposal's state is checked: a refusal is a fact about what the executor was
    offered, true whatever the proposal became meanwhile (and an executor refusing because its own
    ledger ran the approval may be offered one the queue shows as executed, or approved again).
    """
    if stored_sha256 != plan_sha256:
        what = "no revision" if stored_sha256 is None else "another plan under revision"
        raise StaleRevision(
            f"{row['proposal_id']!r} holds {what} {revision} with plan_sha256 {plan_sha256}; "
            f"its latest is revision {row['latest_revision']} with plan_sha256 {row['plan_sha256']}",
            latest_revision=row["latest_revision"],
            latest_plan_sha256=row["plan_sha256"],
        )


def earlier_answer(row: Row | None, fingerprint: str, what: str, answer_model: type[Answer]) -> Answer | None:
    """The answer already given under this token's Idempotency-Key, if any; 422 if it came with
    another body."""
    if row is None:
        return None
    if row["request_sha256"] != fingerprint:
        raise IdempotencyMismatch(
            f"this Idempotency-Key was used for a different {what}; use a new key for each new {what}"
        )
    return answer_model.model_validate_json(row["answer"])
