"""The executor's own check of an approval: enough distinct people, in its allowed-signers file (or
its passkeys file), signed exactly this proposal, revision and digest.

A pure function of what the queue returned and what the executor holds: the queue's word
("approved") is not evidence, so a database edited by hand, or a queue host in someone else's hands,
cannot make an agent run anything without the reviewers' keys.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Final

from reviewer.signing.allowed_signers import AllowedSigners
from reviewer.signing.passkeys import PasskeyAssertion, is_passkey_assertion, verify_with_passkeys
from reviewer.signing.sshsig import NAMESPACE, DecisionStatement, PublicKey, SigningError, SshSignature

MAX_CHECKED: Final = 100
"""Signatures examined at most: a hostile queue cannot make the executor spend unbounded time."""


@dataclass(frozen=True)
class SignedStatement:
    """A decision statement (its exact bytes as text) and the armored SSHSIG over it."""

    statement: str
    signature: str


@dataclass(frozen=True)
class SignatureCheck:
    """One statement as the executor judged it: by whom (as it claims), and whether it counts."""

    reviewer: str | None
    decision: str | None
    counted: bool
    problem: str | None = None


@dataclass(frozen=True)
class ApprovalCheck:
    """Whether the approval may run, and why not in words when it may not."""

    authorized: bool
    required: int
    signers: tuple[str, ...]
    rejected_by: tuple[str, ...]
    checks: tuple[SignatureCheck, ...]

    def explain(self) -> str:
        if self.rejected_by:
            return f"refused: a signed rejection by {', '.join(self.rejected_by)}"
        counted = f"{len(self.signers)} of {self.required} signed approvals"
        names = f" ({', '.join(self.signers)})" if self.signers else ""
        problems = [f"{check.reviewer or '?'}: {check.problem}" for check in self.checks if check.problem]
        refused = f"; not counted: {'; '.join(problems)}" if problems else ""
        return f"{counted}{names}{refused}"


@dataclass(frozen=True)
class Verified:
    """A statement whose signature holds, who may have made it, and what names the key that did."""

    statement: DecisionStatement
    key_name: str
    key_blob: bytes
    allowed: bool


def verify_trusted(
    allowed: AllowedSigners,
    item: SignedStatement,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    at: datetime,
) -> Verified:
    """An SSHSIG checked against the allowed-signers lines, or a passkey's assertion against the
    passkeys file (a passkey counts for the reviewer it is registered to, and no other)."""
    if not is_passkey_assertion(item.signature):
        statement, key = verify_decision(item, proposal_id, revision, plan_sha256)
        return Verified(
            statement,
            f"key {key.fingerprint}",
            key.blob,
            allowed.allows(statement.reviewer, key, NAMESPACE, at),
        )
    statement_by_passkey(item, proposal_id, revision, plan_sha256)
    statement, passkey = verify_with_passkeys(item.statement, item.signature, allowed.passkeys.passkeys)
    blob = f"passkey:{passkey.credential_id}".encode()
    return Verified(statement, f"passkey {passkey.credential_id[:16]}", blob, True)


def statement_by_passkey(
    item: SignedStatement, proposal_id: str, revision: int, plan_sha256: str
) -> tuple[DecisionStatement, str]:
    """The statement a passkey's assertion is over, when it names this proposal, revision and digest,
    and the passkey's credential id; the assertion itself is checked against registered keys only
    (`verify_trusted`), since it carries none."""
    statement = DecisionStatement.parse(item.statement)
    different = statement.names(proposal_id, revision, plan_sha256, statement.decision)
    if different:
        raise SigningError(f"names another decision ({different})")
    return statement, PasskeyAssertion.parse(item.signature).credential_id


def verify_decision(
    item: SignedStatement, proposal_id: str, revision: int, plan_sha256: str
) -> tuple[DecisionStatement, PublicKey]:
    """The statement and the key that signed it, when the signature is valid and the statement names
    this proposal, revision and digest; else `SigningError` saying which. Whether the key may sign
    for the reviewer named is the caller's question (an allowed-signers file, registered keys)."""
    statement = DecisionStatement.parse(item.statement)
    different = statement.names(proposal_id, revision, plan_sha256, statement.decision)
    if different:
        raise SigningError(f"names another decision ({different})")
    key = SshSignature.parse(item.signature).verify(statement.to_bytes())
    return statement, key


def check_signed_approvals(
    allowed: AllowedSigners,
    required: int,
    proposal_id: str,
    revision: int,
    plan_sha256: str,
    signed: Iterable[SignedStatement],
    at: datetime | None = None,
) -> ApprovalCheck:
    """Authorized only when `required` distinct principals approved this exact plan with valid
    signatures by keys the allowed-signers file gives them, and no such principal signed a rejection.

    Distinct means both the name and the key: one key listed under two names counts once, so a
    single person cannot reach a quorum of two by appearing twice in the file.
    """
    if required < 1:
        raise ValueError("at least one signature must be required")
    moment = at or datetime.now(UTC)
    checks: list[SignatureCheck] = []
    signers: list[str] = []
    rejected_by: list[str] = []
    keys_used: set[bytes] = set()
    for index, item in enumerate(signed):
        if index >= MAX_CHECKED:
            checks.append(
                SignatureCheck(None, None, False, f"more than {MAX_CHECKED} signatures; rest ignored")
            )
            break
        try:
            verified = verify_trusted(allowed, item, proposal_id, revision, plan_sha256, moment)
        except SigningError as error:
            claimed = _claimed_reviewer(item.statement)
            checks.append(SignatureCheck(claimed, None, False, str(error)))
            continue
        reviewer, decision = verified.statement.reviewer, verified.statement.decision

        def refuse(problem: str, reviewer: str = reviewer, decision: str = decision) -> None:
            checks.append(SignatureCheck(reviewer, decision, False, problem))

        if not verified.allowed:
            refuse(f"the {verified.key_name} is not allowed to sign for {reviewer}")
            continue
        if decision != "approve":  # a rejection, or changes asked for: either one approves nothing
            rejected_by.append(reviewer)
            checks.append(SignatureCheck(reviewer, decision, True))
            continue
        if reviewer in signers or verified.key_blob in keys_used:
            refuse("the same person (name or key) counts once")
            continue
        signers.append(reviewer)
        keys_used.add(verified.key_blob)
        checks.append(SignatureCheck(reviewer, decision, True))
    return ApprovalCheck(
        authorized=not rejected_by and len(signers) >= required,
        required=required,
        signers=tuple(signers),
        rejected_by=tuple(rejected_by),
        checks=tuple(checks),
    )


def _claimed_reviewer(statement: str) -> str | None:
    """Who a statement that failed its checks says it is from, to name it in the explanation."""
    try:
        return DecisionStatement.parse(statement).reviewer
    except SigningError:
        return None
