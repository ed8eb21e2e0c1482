"""Sending a decision under the reviewer's own credential, signed when a key is configured.

One signing for the command line (`reviewer approve` / `reviewer reject`, through `send_decision`) and
the terminal app (which sends with its own retry key), so a decision is signed the same way wherever it
is made, and a signing failure (no agent, the key not
in it, a key file others can read) stops it before anything reaches the queue.
"""

from __future__ import annotations

import asyncio
from datetime import datetime
from typing import TYPE_CHECKING

from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.client import AlreadyDecided, QueueClient, StaleRevision
from reviewer.queue.messages import Decision, DecisionState

if TYPE_CHECKING:  # an unsigned decision loads no cryptography
    from reviewer.signing.signed_approvals import SignedStatement
    from reviewer.signing.sshsig import Signer


async def sign_decision(
    signer: Signer,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    decision: Decision,
    reviewer: str,
    clock: datetime | None = None,
) -> SignedStatement:
    """Sign in a thread: an agent may wait for its user to confirm (`ssh-add -c`) or a key to be touched."""
    from reviewer.signing.signed_approvals import SignedStatement
    from reviewer.signing.sshsig import DecisionStatement, sign_statement

    statement = DecisionStatement.now(proposal_id, revision, plan_sha256, decision, reviewer, clock)
    signature = await asyncio.to_thread(sign_statement, statement, signer)
    return SignedStatement(statement.to_bytes().decode(), signature)


async def send_decision(
    client: QueueClient,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    decision: Decision,
    reason: str = "",
    signer: Signer | None = None,
    clock: datetime | None = None,
    break_glass: bool = False,
) -> DecisionState:
    """Decide, signing first when `signer` is given; the statement names the token's own identity.
    `break_glass`: an approval that lets the plan run outside its change windows (`reason` says why)."""
    if signer is None:
        return await client.decide(
            proposal_id, revision, plan_sha256, decision, reason, break_glass=break_glass
        )
    identity = await client.whoami()
    signed = await sign_decision(signer, proposal_id, revision, plan_sha256, decision, identity.name, clock)
    return await client.decide(
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
