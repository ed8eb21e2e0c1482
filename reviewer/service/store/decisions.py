"""Decisions and their quorum: the policy's verdict on each revision (evaluated once), the decisions
that count and the approvals withdrawn since, a reviewer's decision, the policy's own, and the
revision's final decision, as functions of one open transaction."""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime
from typing import Final

from pydantic import ValidationError

from reviewer.plan.proposal import Proposal, scan_proposal
from reviewer.policy.bounded import EvaluatorClosed
from reviewer.policy.quorum import PROVIDER_PREFIX, Requirement
from reviewer.policy.verdict import ChangeRequest, Verdict, evaluate
from reviewer.queue.messages import (
    BREAK_GLASS_PREFIX,
    Decision,
    DecisionRequest,
    DecisionState,
    State,
    TrailEvent,
)
from reviewer.reading.analysis import Analysis
from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.errors import Forbidden, Invalid, SignatureRefused, Unavailable
from reviewer.service.rules import Row
from reviewer.service.signed_decisions import (
    CastDecision,
    KeyRemoval,
    VerifiedSignature,
    Withdrawal,
    admit_decision,
    outcome,
    policy_state,
    with_votes,
    without_removed_keys,
)
from reviewer.service.store import (
    change_windows,
    events,
    idempotency,
    index,
    outbox,
    passkeys,
    refusals,
    tokens,
)
from reviewer.service.store.base import StoreState, Transaction
from reviewer.signing.passkeys import PasskeyAssertion
from reviewer.signing.sshsig import SIGNED_AT_FORMAT, DecisionStatement, SigningError

TRAIL_EVENTS: Final[dict[Decision, str]] = {
    "approve": "approved",
    "reject": "rejected",
    "request_changes": "changes_requested",
}
"""The trail's word for each decision."""


def verdict_of(
    store: StoreState, db: Transaction, proposal_id: str, revision: int, proposal: Proposal | None = None
) -> Verdict:
    """The policy's verdict on this revision (evaluated once per revision and per policy: a
    revision never changes, and a restart with another policy evaluates afresh)."""
    key = (proposal_id, revision)
    cached = store.verdicts.get(key)
    if cached is not None:
        return cached
    if store.policy.trivial:
        verdict = Verdict(None, store.policy.default.requirement, "human")
    else:
        row = db.one(
            "SELECT body FROM revisions WHERE proposal_id = :proposal_id AND revision = :revision",
            proposal_id=proposal_id,
            revision=revision,
        )
        assert row is not None
        asked = changes_requested_before(db, proposal_id, revision)
        verdict = evaluate_policy(store, bytes(row["body"]), proposal, asked)
    store.verdicts[key] = verdict
    return verdict


def evaluate_policy(
    store: StoreState,
    body: bytes | bytearray,
    proposal: Proposal | None,
    asked: tuple[ChangeRequest, ...],
    analysis: Analysis | None = None,
) -> Verdict:
    """The policy's verdict on the proposal whose JSON is `body` (parsed as `proposal`, if given, and
    read as `analysis`), after the changes `asked` of its earlier revisions. The queue stopping
    meanwhile is a 503, not a verdict: the caller's transaction writes nothing and the agent submits
    again."""
    if store.policy_evaluator is not None:
        try:
            return store.policy_evaluator.verdict(bytes(body), proposal, asked)
        except EvaluatorClosed as closed:
            raise Unavailable("the queue is stopping; submit the plan again") from closed
    if proposal is None:
        proposal = scan_proposal(bytes(body), "stored proposal")
    return evaluate(
        store.policy,
        proposal,
        analysis,
        signing=store.policy_signing is not None,
        changes_requested=asked,
    )


def changes_requested_before(db: Transaction, proposal_id: str, revision: int) -> tuple[ChangeRequest, ...]:
    """Every request for changes on revisions of `proposal_id` before `revision`, oldest first.

    A policy judges a revision with its history (`plan.changes_requested`): the third re-plan of a
    delete that a reviewer asked to keep may want more eyes than the first. The trail is append-only
    and a request for changes closes its revision, so once revision N exists what was asked before it
    never changes, and a verdict evaluated with it holds for good.
    """
    rows = db.all(
        "SELECT revision, actor, reason FROM trail WHERE proposal_id = :proposal_id "
        "AND revision < :revision AND event = 'changes_requested' ORDER BY seq",
        proposal_id=proposal_id,
        revision=revision,
    )
    return tuple(ChangeRequest(row["revision"], row["actor"], row["reason"] or "") for row in rows)


def rule_of(
    store: StoreState, db: Transaction, proposal_id: str, revision: int
) -> tuple[Requirement, str | None]:
    """What deciding this revision takes, and the environment it comes from."""
    verdict = verdict_of(store, db, proposal_id, revision)
    return verdict.requirement, verdict.environment


def environment(store: StoreState, db: Transaction, proposal_id: str, revision: int) -> str | None:
    """The policy environment of a revision's plan (None for `[default]`), for the metrics' figures."""
    return verdict_of(store, db, proposal_id, revision).environment


def cast_decisions(db: Transaction, proposal_id: str, revision: int, now: float) -> list[CastDecision]:
    """The decisions on this revision that count at `now` (`cast_and_withdrawn`)."""
    return cast_and_withdrawn(db, proposal_id, revision, now)[0]


def cast_and_withdrawn(
    db: Transaction, proposal_id: str, revision: int, now: float
) -> tuple[list[CastDecision], list[Withdrawal]]:
    """The decisions on this revision that count at `now`, and the approvals withdrawn since their
    key or passkey was removed or their token ended (`without_removed_keys`)."""
    rows = db.all(
        "SELECT seq, actor, identity, event, reason, at, statement, signature, key_fingerprint FROM trail "
        "WHERE proposal_id = :proposal_id AND revision = :revision AND event IN ('approved', 'rejected') "
        "ORDER BY seq",
        proposal_id=proposal_id,
        revision=revision,
    )
    bound = bound_tokens(db) if rows else []
    cast = [
        CastDecision(
            reviewer=row["actor"],
            decision="reject" if row["event"] == "rejected" else "approve",
            reason=row["reason"],
            at=rules.required_timestamp(row["at"]),
            statement=row["statement"],
            signature=row["signature"],
            key_fingerprint=row["key_fingerprint"],
            seq=row["seq"],
            identity=row["identity"],
            person_id=person_behind(row, bound),
        )
        for row in rows
    ]
    if not any(item.decision == "approve" for item in cast):
        return cast, []
    removed = db.all(
        "SELECT name, fingerprint, removed_at FROM ssh_keys "
        "WHERE removed_at IS NOT NULL AND fingerprint IN (SELECT key_fingerprint FROM trail "
        "WHERE proposal_id = :proposal_id AND revision = :revision AND event = 'approved')",
        proposal_id=proposal_id,
        revision=revision,
    ) + passkeys.removed_signers(db, proposal_id, revision)
    ended = ended_tokens(db, proposal_id, revision, now)
    if not removed and not ended:
        return cast, []
    decided = db.one(
        "SELECT decided_at FROM decisions WHERE proposal_id = :proposal_id AND revision = :revision",
        proposal_id=proposal_id,
        revision=revision,
    )
    removals = [
        KeyRemoval(row["name"], row["fingerprint"], rules.required_timestamp(row["removed_at"]))
        for row in removed
    ] + ended
    decided_at = None if decided is None else rules.required_timestamp(decided["decided_at"])
    return without_removed_keys(cast, removals, decided_at)


def bound_tokens(db: Transaction) -> list[Row]:
    """The minted reviewer tokens bound to a provider's person (`token create --person`)."""
    return db.all(
        "SELECT name, issuer, subject, created_at, revoked_at FROM tokens "
        "WHERE kind <> 'provider' AND subject IS NOT NULL"
    )


def person_behind(row: Row, bound: list[Row]) -> str | None:
    """The provider's person behind a decision in the trail: the identity the trail recorded for a
    provider session; for a minted token, the person the token of that name valid when it decided
    was bound to (None when it was bound to no one)."""
    identity = row["identity"]
    if identity is not None and identity.startswith(PROVIDER_PREFIX):
        return str(identity)
    for token in bound:
        valid_then = token["created_at"] <= row["at"] and (
            token["revoked_at"] is None or token["revoked_at"] >= row["at"]
        )
        if valid_then and rules.same_name(token["name"], row["actor"]):
            return f"{PROVIDER_PREFIX}{token['issuer']}#{token['subject']}"
    return None


def ended_tokens(db: Transaction, proposal_id: str, revision: int, now: float) -> list[KeyRemoval]:
    """The tokens of this revision's approvers that ended: revoked (by the operator, or when the
    provider's person left the reviewers' group) or expired by `now`. An ended token withdraws its
    approvals as a removed key does (fingerprint None: any approval), each named as its approval is.

    A provider's person is matched by the identity the trail recorded (`oidc:ISSUER#SUBJECT`), which
    outlives a rename at the provider; a minted token, and an approval from before the trail
    recorded identities, by name. Each withdraws the approvals it matched, by their place in the
    trail: another person who holds the name since keeps theirs."""
    rows = db.all(
        "SELECT DISTINCT trail.seq, trail.actor, tokens.kind, tokens.revoked_at, tokens.expires_at "
        "FROM trail JOIN tokens ON CASE WHEN tokens.kind = 'provider' "
        "THEN trail.identity = 'oidc:' || tokens.issuer || '#' || tokens.subject "
        "ELSE (trail.identity IS NULL OR trail.identity NOT LIKE 'oidc:%') "
        "AND lower(tokens.name) = lower(trail.actor) END "
        "WHERE trail.proposal_id = :proposal_id AND trail.revision = :revision "
        "AND trail.event = 'approved' AND (tokens.revoked_at IS NOT NULL OR tokens.expires_at <= :now)",
        proposal_id=proposal_id,
        revision=revision,
        now=now,
    )
    ended = []
    for row in rows:
        revoked, expires = row["revoked_at"], row["expires_at"]
        if revoked is not None and (expires is None or revoked <= expires):
            cause = "token was revoked"
            if row["kind"] == "provider":
                cause = (
                    "sign-in was ended (revoked on the queue, or out of the reviewers group at the "
                    "identity provider)"
                )
            ended.append(KeyRemoval(row["actor"], None, rules.required_timestamp(revoked), cause, row["seq"]))
        else:
            at = rules.required_timestamp(expires)
            ended.append(KeyRemoval(row["actor"], None, at, "token expired", row["seq"]))
    return ended


def voted_state(store: StoreState, db: Transaction, row: Row, now: float) -> DecisionState:
    """The decision state with the quorum so far, the signed decisions and the executors' refusals of
    the latest revision."""
    proposal_id, revision = row["proposal_id"], row["latest_revision"]
    verdict = verdict_of(store, db, proposal_id, revision)
    cast = cast_decisions(db, proposal_id, revision, now)
    state = with_votes(rules.decision_state(row, now), verdict.requirement, cast)
    update: dict[str, object] = {"refusals": refusals.refusals_of(db, proposal_id, revision)}
    if not store.policy.trivial:
        update["policy"] = policy_state(verdict)
        update["window"] = change_windows.window_state(store.policy, verdict.environment, cast, now)
    return state.model_copy(update=update)


def decide(
    store: StoreState,
    db: Transaction,
    identity: Identity,
    proposal_id: str,
    request: DecisionRequest,
    idempotency_key: str,
    fingerprint: str,
    now: float,
    passkey: VerifiedSignature | None = None,
) -> tuple[bool, DecisionState]:
    """A reviewer's decision (`QueueStore.decide`) in the caller's write transaction; `passkey`, the
    assertion `decide_by_passkey` verified."""
    row, earlier = idempotency.idempotent_write(
        db, identity, proposal_id, idempotency_key, fingerprint, "decision", DecisionState, store.clock
    )
    if earlier is not None:
        return True, earlier
    rules.check_decision(row, identity, request.revision, request.plan_sha256, now, bool(request.break_glass))
    already_approved = rules.state_of(row, now) == "approved"
    if request.break_glass:
        request = request.model_copy(update={"reason": BREAK_GLASS_PREFIX + request.reason})
    rule, environment = rule_of(store, db, proposal_id, request.revision)
    cast = cast_decisions(db, proposal_id, request.revision, now)
    signed = admit_decision(
        rule,
        cast,
        identity.name,
        proposal_id,
        request,
        tokens.signing_keys(db, identity.name),
        environment,
        identity.principal,
        identity.person_id,
        passkey,
    )
    index.append_trail(
        db,
        now,
        identity.name,
        TRAIL_EVENTS[request.decision],
        proposal_id,
        request.revision,
        request.plan_sha256,
        request.reason or None,
        signed,
        identity=identity.principal,
    )
    if request.decision == "request_changes":
        # Not a vote: one reviewer's request closes the revision, as one rejection does; the
        # approvals so far stay with this revision and count for none after it.
        record_decision(store, db, proposal_id, request, identity.name, now)
        answer = with_votes(index.answer(db, proposal_id, now), rule, cast)
        idempotency.remember(db, identity, idempotency_key, fingerprint, answer, now)
        return False, answer
    cast.append(
        CastDecision(
            identity.name,
            request.decision,
            request.reason or None,
            rules.required_timestamp(now),
            statement=signed.statement if signed else None,
            signature=signed.signature if signed else None,
            key_fingerprint=signed.key_fingerprint if signed else None,
            identity=identity.principal,
        )
    )
    result = outcome(rule, cast)
    if result.state != "pending" and not already_approved:
        decided_by = ", ".join(result.approvals) if result.state == "approved" else identity.name
        record_decision(store, db, proposal_id, request, decided_by, now)
    if request.break_glass:
        emit_break_glass(store, db, proposal_id, identity.name, request.reason, environment, cast, now)
    answer = with_votes(index.answer(db, proposal_id, now), rule, cast)
    window = change_windows.window_state(store.policy, environment, cast, now)
    answer = answer.model_copy(update={"window": window})
    idempotency.remember(db, identity, idempotency_key, fingerprint, answer, now)
    return False, answer


PASSKEY_FRESHNESS: Final = 300.0
"""How old a statement a passkey signed may be when it arrives: the page asks for one when the button
is pressed, so an older one is a replay, or a page left open on a decision already made elsewhere."""


def decide_by_passkey(
    store: StoreState,
    db: Transaction,
    proposal_id: str,
    statement_text: str,
    assertion: PasskeyAssertion,
    reason: str,
    now: float,
    provider_signs_in: bool = False,
) -> tuple[bool, DecisionState]:
    """A decision from the review page: the passkey's owner decides, under the same rules as
    `decide`, once the assertion holds over the statement (origin, RP id, user verification, a
    counter past the one kept) and the statement names this proposal, its reviewer and a time now.
    Where reviewers sign in through the provider, a passkey a plain minted token enrolled (before
    the provider was set up) decides nothing, as that token does not."""
    passkey, sign_count, identity = passkeys.deciding_passkey(db, assertion.credential_id, now)
    if provider_signs_in and identity.kind == "minted":
        raise Forbidden(
            f"this passkey was enrolled under {identity.name}'s minted token, and reviewers sign in "
            "through the identity provider here; enrol it again after `reviewer login`"
        )
    try:
        statement = DecisionStatement.parse(statement_text)
    except SigningError as error:
        raise SignatureRefused(str(error)) from None
    if statement.proposal_id != proposal_id:
        raise SignatureRefused(f"statement.proposal_id is {statement.proposal_id!r}, not {proposal_id!r}")
    if statement.reviewer != identity.name:
        raise SignatureRefused(
            f"statement.reviewer is {statement.reviewer!r}, but the passkey is {identity.name!r}'s"
        )
    signed_at = datetime.strptime(statement.signed_at, SIGNED_AT_FORMAT).replace(tzinfo=UTC).timestamp()
    if not now - PASSKEY_FRESHNESS <= signed_at <= now + 60:
        raise SignatureRefused(
            f"statement.signed_at is {statement.signed_at}, not within {PASSKEY_FRESHNESS:.0f} s of the "
            "queue's time; press the button again"
        )
    try:
        counted = passkey.verify(statement.to_bytes(), assertion, sign_count)
    except SigningError as error:
        raise SignatureRefused(str(error)) from None
    passkeys.count_signature(db, passkey.credential_id, counted)
    try:
        request = DecisionRequest(
            revision=statement.revision,
            plan_sha256=statement.plan_sha256,
            decision=statement.decision,
            reason=reason,
            statement=statement_text,
            signature=assertion.to_text(),
        )
    except ValidationError as error:
        raise Invalid(
            "; ".join(str(problem["msg"]).removeprefix("Value error, ") for problem in error.errors())
        ) from None
    verified = VerifiedSignature(statement_text, assertion.to_text(), f"passkey:{passkey.credential_id}")
    key = "passkey-" + hashlib.sha256(statement_text.encode()).hexdigest()[:48]
    fingerprint = idempotency.fingerprint(proposal_id, request)
    return decide(store, db, identity, proposal_id, request, key, fingerprint, now, verified)


def emit_break_glass(
    store: StoreState,
    db: Transaction,
    proposal_id: str,
    reviewer: str,
    reason: str,
    environment: str | None,
    cast: list[CastDecision],
    now: float,
) -> None:
    """`proposal.break_glass` for a break-glass approval, with who broke glass so far of how many."""
    if not store.notifying.targets:
        return
    row = index.proposal_row(db, proposal_id)
    window = change_windows.window_state(store.policy, environment, cast, now)
    given = change_windows.break_glass_given(cast)
    required = None if window is None else window.break_glass_required
    outbox.emit(
        store,
        db,
        now,
        events.event_key("proposal.break_glass", proposal_id, row["latest_revision"], reviewer),
        events.break_glass(row, reviewer, reason.removeprefix(BREAK_GLASS_PREFIX), given, required, now),
    )


def pending_candidates(db: Transaction, now: float) -> list[tuple[str, int]]:
    """Each pending proposal and its latest revision, for `QueueStore.reevaluate_pending`."""
    return [(row["proposal_id"], row["latest_revision"]) for row in index.pending_rows(db, now)]


def reevaluate(store: StoreState, db: Transaction, proposal_id: str, revision: int, now: float) -> bool:
    """Evaluate one pending revision again under the store's policy; True when that decided it."""
    row = db.one("SELECT * FROM proposals WHERE proposal_id = :proposal_id", proposal_id=proposal_id)
    if row is None or row["latest_revision"] != revision or rules.state_of(row, now) != "pending":
        return False
    verdict = verdict_of(store, db, proposal_id, revision)
    if verdict.outcome != "human":
        again_under = f"evaluated again under policy {store.policy.sha256[:12]}"
        note = f"{verdict.reason or 'approved'} ({again_under})"
        again = Verdict(**{**vars(verdict), "reason": note})
        decide_by_policy(store, db, proposal_id, revision, row["plan_sha256"], again, now)
        return True
    result = outcome(verdict.requirement, cast_decisions(db, proposal_id, revision, now))
    if result.state != "pending":
        decided_by = ", ".join(result.approvals) if result.state == "approved" else result.rejected_by or ""
        decision: Decision = "approve" if result.state == "approved" else "reject"
        request = DecisionRequest(
            revision=revision,
            plan_sha256=row["plan_sha256"],
            decision=decision,
            reason=result.reason or "",
        )
        record_decision(store, db, proposal_id, request, decided_by, now)
        return True
    return False


def decide_by_policy(
    store: StoreState,
    db: Transaction,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    verdict: Verdict,
    now: float,
) -> State:
    """Record the policy's own decision, as `policy:<rule>`, when it rejects or approves."""
    if verdict.outcome == "human" or verdict.decided_by is None:
        return "pending"
    decision: Decision = "reject" if verdict.outcome == "reject" else "approve"
    signed = None
    if decision == "approve" and verdict.requirement.signatures:
        assert store.policy_signing is not None  # evaluate() asks a human otherwise
        signed = store.policy_signing.sign(proposal_id, revision, plan_sha256, now)
    request = DecisionRequest(
        revision=revision, plan_sha256=plan_sha256, decision=decision, reason=verdict.reason or ""
    )
    index.append_trail(
        db,
        now,
        verdict.decided_by,
        "approved" if decision == "approve" else "rejected",
        proposal_id,
        revision,
        plan_sha256,
        verdict.reason,
        signed,
        identity=verdict.decided_by,
    )
    record_decision(store, db, proposal_id, request, verdict.decided_by, now)
    return "approved" if decision == "approve" else "rejected"


def record_decision(
    store: StoreState,
    db: Transaction,
    proposal_id: str,
    request: DecisionRequest,
    decided_by: str,
    now: float,
) -> None:
    """The revision's final decision (a quorum met, or a rejection), which a claim then uses."""
    approval_expires_at = now + store.approval_ttl if request.decision == "approve" else None
    decision = db.one(
        "INSERT INTO decisions (proposal_id, revision, plan_sha256, decision, reason, decided_by, "
        "decided_at, expires_at) VALUES (:proposal_id, :revision, :plan_sha256, :decision, :reason, "
        ":decided_by, :now, :expires_at) RETURNING id",
        proposal_id=proposal_id,
        revision=request.revision,
        plan_sha256=request.plan_sha256,
        decision=request.decision,
        reason=request.reason,
        decided_by=decided_by,
        now=now,
        expires_at=approval_expires_at,
    )
    assert decision is not None
    db.run(
        "UPDATE proposals SET decision = :decision, decided_by = :decided_by, decided_at = :now, "
        "reason = :reason, decision_id = :decision_id, approval_expires_at = :expires_at, "
        "deadline = :expires_at WHERE proposal_id = :proposal_id",
        decision=request.decision,
        decided_by=decided_by,
        now=now,
        reason=request.reason or None,
        decision_id=decision["id"],
        expires_at=approval_expires_at,
        proposal_id=proposal_id,
    )
    if store.notifying.targets:
        event: events.EventName = (
            "proposal.changes_requested" if request.decision == "request_changes" else "proposal.decided"
        )
        outbox.emit(
            store,
            db,
            now,
            events.event_key(event, proposal_id, request.revision),
            events.decided(index.proposal_row(db, proposal_id), now, event),
        )


def with_withdrawals(
    history: list[TrailEvent], withdrawn: list[Withdrawal], revision: int, plan_sha256: str
) -> list[TrailEvent]:
    """The trail with a `withdrawn` event where each withdrawn approval stopped counting (when its key
    was removed, or its token expired); it carries the seq of the approval it withdraws. A withdrawal
    the trail recorded itself (a sign-in that ended, `endings`) is already there, under its own seq."""
    recorded = {(event.revision, event.actor.casefold()) for event in history if event.event == "withdrawn"}
    withdrawn = [item for item in withdrawn if (revision, item.approval.reviewer.casefold()) not in recorded]
    events = [
        TrailEvent(
            seq=item.approval.seq or 0,
            at=item.removal.at,
            actor=item.approval.reviewer,
            event="withdrawn",
            revision=revision,
            plan_sha256=plan_sha256,
            reason=item.reason,
        )
        for item in sorted(withdrawn, key=lambda item: item.removal.at)
    ]
    merged: list[TrailEvent] = []
    for event in history:
        while events and events[0].at < event.at:
            merged.append(events.pop(0))
        merged.append(event)
    return merged + events
