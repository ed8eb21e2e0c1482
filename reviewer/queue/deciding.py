"""Sending a decision under the reviewer's own credential, signed when a key is configured.

One signing for the command line (`reviewer approve` / `reviewer reject`, through `send_decision`) and
the terminal app (which sends with its own retry key, signing in a thread), so a decision is signed
the same way wherever it is made, and a signing failure (no agent, the key not in it, a key file
others can read) stops it before anything reaches the queue.
"""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING

from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.refusals import AlreadyDecided, StaleRevision

if TYPE_CHECKING:  # an unsigned decision loads no cryptography, and the command line no pydantic
    from reviewer.queue.answers import StateFields
    from reviewer.queue.messages import Decision
    from reviewer.queue.shell_client import ShellQueue
    from reviewer.signing.signed_approvals import SignedStatement
    from reviewer.signing.sshsig import Signer


def signed_statement(
    signer: Signer,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    decision: Decision,
    reviewer: str,
    clock: datetime | None = None,
) -> SignedStatement:
    """The decision statement, signed: an agent may wait for its user to confirm (`ssh-add -c`) or
    a key to be touched."""
    from reviewer.signing.signed_approvals import SignedStatement
    from reviewer.signing.sshsig import DecisionStatement, sign_statement

    statement = DecisionStatement.now(proposal_id, revision, plan_sha256, decision, reviewer, clock)
    return SignedStatement(statement.to_bytes().decode(), sign_statement(statement, signer))


def send_decision(
    client: ShellQueue,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    decision: Decision,
    reason: str = "",
    signer: Signer | None = None,
    clock: datetime | None = None,
    break_glass: bool = False,
) -> StateFields:
    """Decide, signing first when `signer` is given; the statement names the token's own identity.
    `break_glass`: an approval that lets the plan run outside its change windows (`reason` says why)."""
    if signer is None:
        return client.decide(proposal_id, revision, plan_sha256, decision, reason, break_glass=break_glass)
    identity = client.whoami()
    signed = signed_statement(signer, proposal_id, revision, plan_sha256, decision, identity.name, clock)
    return client.decide(
        proposal_id,
        revision,
        plan_sha256,
        decision,
        reason,
        statement=signed.statement,
        signature=signed.signature,
        break_glass=break_glass,
    )


def stale_words(error: StaleRevision, proposal_id: str, revision: int, digest: str | None) -> str:
    """A 412 in words: the revision named is no longer the latest, or it is and the digest named is
    not its digest (a mistyped or truncated digest is not a re-plan)."""
    latest, latest_digest = error.latest_revision, error.latest_plan_sha256 or ""
    if latest == revision:
        return (
            f"the digest {safe_text(clip(digest or '', 64))} does not match revision {revision}'s "
            f"(sha256 {latest_digest}); nothing was sent: check the plan with `reviewer show "
            f"{safe_text(proposal_id)}`"
        )
    return (
        f"revision {revision} is not the latest: revision {latest} (sha256 {latest_digest}) is waiting; "
        "review it first"
    )


def not_pending_words(error: AlreadyDecided, ran_by: str | None = None) -> str:
    """A 409 in words: the state, and who: the agent whose run executed it (`ran_by`, from the trail),
    or the reviewers who decided it."""
    if error.state == "executed":
        run = f" by a run of {safe_text(ran_by)}" if ran_by else ""
        approved = f", approved by {safe_text(error.decided_by)}" if error.decided_by else ""
        return f"already executed{run}{approved}"
    by = f" by {safe_text(error.decided_by)}" if error.decided_by else ""
    return f"the proposal is already {error.state}{by}"
