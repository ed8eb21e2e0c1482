"""Idempotency-Keys: what makes two requests the same, the answer already given under a key, and the
answer kept in the transaction that made it, for a retry to get again."""

from __future__ import annotations

import hashlib
from typing import Any

import msgspec

from reviewer.queue.messages import (
    Claim,
    ClaimRequest,
    DecisionRequest,
    DecisionState,
    ExecutionReport,
    RefusalReport,
)
from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.rules import Row
from reviewer.service.store import index, tokens
from reviewer.service.store.base import Clock, Transaction


def fingerprint(
    proposal_id: str, request: DecisionRequest | ClaimRequest | ExecutionReport | RefusalReport
) -> str:
    """What makes two requests "the same body" for an Idempotency-Key: equal fields, in any key order.

    msgspec writes the sorted JSON of the model's fields as they are (no `model_dump` copy): a 64 MB
    execution report costs its encoded bytes here, not another copy of every object in it.
    """
    material: dict[str, Any] = {"proposal_id": proposal_id, **vars(request)}
    return hashlib.sha256(msgspec.json.encode(material, order="sorted")).hexdigest()


def idempotent_write(
    db: Transaction,
    identity: Identity,
    proposal_id: str,
    idempotency_key: str | None,
    fingerprint: str,
    what: str,
    answer_model: type[rules.Answer],
    clock: Clock,
) -> tuple[Row, rules.Answer | None]:
    """The start of every write under an Idempotency-Key: the token still active, the proposal
    visible to it, then the answer already given under the key (none without a key), 422 when
    the key came with another body."""
    tokens.require_active(db, identity, clock)
    row = index.visible(db, identity, proposal_id)
    if idempotency_key is None:
        return row, None
    earlier = idempotent(db, identity, idempotency_key)
    return row, rules.earlier_answer(earlier, fingerprint, what, answer_model)


def idempotent(db: Transaction, identity: Identity, idempotency_key: str) -> Row | None:
    return db.one(
        "SELECT request_sha256, answer FROM idempotency WHERE token_id = :token_id AND key = :key",
        token_id=identity.token_id,
        key=idempotency_key,
    )


def remember(
    db: Transaction,
    identity: Identity,
    idempotency_key: str,
    fingerprint: str,
    answer: DecisionState | Claim,
    now: float,
) -> None:
    """Keep the answer under the key, in the transaction that made it, for a retry to get again."""
    db.run(
        "INSERT INTO idempotency (token_id, key, request_sha256, answer, created_at) "
        "VALUES (:token_id, :key, :request_sha256, :answer, :now)",
        token_id=identity.token_id,
        key=idempotency_key,
        request_sha256=fingerprint,
        answer=answer.model_dump_json(),
        now=now,
    )
