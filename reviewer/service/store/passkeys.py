"""Reviewers' passkeys: one-time enrolment links, the passkeys they registered, and the owner of a
passkey when it decides, as functions of one open transaction.

A passkey belongs to the sign-in that enrolled it (its `tokens` row): a minted reviewer token, or a
provider's person, whose row outlives renewals. The end of that row (revoked, expired, the person out
of the reviewers group) ends the passkey's power on the next request, as removing the passkey does.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Final

from reviewer.service import rules
from reviewer.service.auth import Identity
from reviewer.service.errors import Conflict, Forbidden, NotFound
from reviewer.service.review_links import review_link
from reviewer.service.rules import Row
from reviewer.service.store.base import StoreState, Transaction
from reviewer.signing.passkeys import RegisteredPasskey

LINK_TTL: Final = 600.0
"""An enrolment link is good for ten minutes, and once."""

_ACTIVE_OWNER: Final = (
    "tokens.revoked_at IS NULL AND (tokens.expires_at IS NULL OR tokens.expires_at > :now) "
    "AND tokens.role = 'reviewer'"
)


@dataclass(frozen=True)
class PasskeyInfo:
    """A registered passkey as `reviewer passkey list` shows it (never its public key's bytes)."""

    reviewer: str
    credential_id: str
    label: str
    added_at: datetime
    sign_count: int


def create_link(db: Transaction, identity: Identity, link_sha256: str, now: float) -> float:
    """Record an enrolment link for the caller's sign-in; when it expires."""
    expires_at = now + LINK_TTL
    db.run(
        "INSERT INTO passkey_links (link_sha256, token_id, created_at, expires_at) "
        "VALUES (:link_sha256, :token_id, :now, :expires_at)",
        link_sha256=link_sha256,
        token_id=identity.token_id,
        now=now,
        expires_at=expires_at,
    )
    return expires_at


def link_owner(db: Transaction, link_sha256: str, now: float) -> tuple[str, str | None]:
    """The reviewer a usable link enrols, and the challenge its page was given (if any); a link that
    is unknown, used, expired, or whose sign-in ended is one 404, saying to make another."""
    row = db.one(
        "SELECT tokens.name, passkey_links.challenge FROM passkey_links JOIN tokens "
        "ON tokens.id = passkey_links.token_id WHERE passkey_links.link_sha256 = :link_sha256 "
        f"AND passkey_links.used_at IS NULL AND passkey_links.expires_at > :now AND {_ACTIVE_OWNER}",
        link_sha256=link_sha256,
        now=now,
    )
    if row is None:
        raise NotFound(
            "this enrolment link is unknown, used or expired; make another with `reviewer passkey enroll`"
        )
    return str(row["name"]), row["challenge"]


def set_challenge(db: Transaction, link_sha256: str, challenge: str, now: float) -> str:
    """Give the link's page a registration challenge; the reviewer it enrols."""
    name, _ = link_owner(db, link_sha256, now)
    db.run(
        "UPDATE passkey_links SET challenge = :challenge WHERE link_sha256 = :link_sha256",
        challenge=challenge,
        link_sha256=link_sha256,
    )
    return name


def register(
    db: Transaction, link_sha256: str, passkey: RegisteredPasskey, sign_count: int, label: str, now: float
) -> None:
    """Spend the link and register the passkey for its sign-in."""
    link = db.one(
        "SELECT token_id FROM passkey_links WHERE link_sha256 = :link_sha256 AND used_at IS NULL",
        link_sha256=link_sha256,
    )
    if link is None:
        raise NotFound("this enrolment link was used meanwhile; make another with `reviewer passkey enroll`")
    held = db.one("SELECT id FROM passkeys WHERE credential_id = :id", id=passkey.credential_id)
    if held is not None:
        raise Conflict("this passkey is already registered on this queue")
    db.run(
        "UPDATE passkey_links SET used_at = :now WHERE link_sha256 = :link_sha256",
        now=now,
        link_sha256=link_sha256,
    )
    db.run(
        "INSERT INTO passkeys (credential_id, token_id, public_key, sign_count, rp_id, origin, label, "
        "added_at) VALUES (:credential_id, :token_id, :public_key, :sign_count, :rp_id, :origin, :label, "
        ":now)",
        credential_id=passkey.credential_id,
        token_id=link["token_id"],
        public_key=passkey.public_key,
        sign_count=sign_count,
        rp_id=passkey.rp_id,
        origin=passkey.origin,
        label=label,
        now=now,
    )


def list_passkeys(db: Transaction, identity: Identity | None, now: float) -> list[PasskeyInfo]:
    """The active passkeys of the caller's sign-in, or of every active reviewer (None)."""
    rows = db.all(
        "SELECT tokens.name, passkeys.credential_id, passkeys.label, passkeys.added_at, passkeys.sign_count "
        "FROM passkeys JOIN tokens ON tokens.id = passkeys.token_id WHERE passkeys.removed_at IS NULL "
        f"AND {_ACTIVE_OWNER} AND (CAST(:token_id AS BIGINT) IS NULL OR tokens.id = :token_id) "
        "ORDER BY tokens.name, passkeys.added_at",
        token_id=None if identity is None else identity.token_id,
        now=now,
    )
    return [
        PasskeyInfo(
            row["name"],
            row["credential_id"],
            row["label"],
            rules.required_timestamp(row["added_at"]),
            row["sign_count"],
        )
        for row in rows
    ]


def remove_passkey(db: Transaction, identity: Identity, credential_id: str, now: float) -> bool:
    """Remove one of the caller's own passkeys (by its id, or a start of it no other shares)."""
    rows = db.all(
        "SELECT credential_id FROM passkeys WHERE token_id = :token_id AND removed_at IS NULL",
        token_id=identity.token_id,
    )
    matching = [row["credential_id"] for row in rows if row["credential_id"].startswith(credential_id)]
    if len(matching) > 1:
        raise Conflict(f"{len(matching)} of your passkeys begin with {credential_id!r}; give more of the id")
    if not matching:
        return False
    db.run("UPDATE passkeys SET removed_at = :now WHERE credential_id = :id", now=now, id=matching[0])
    return True


def registered(db: Transaction, now: float, provider_signs_in: bool = False) -> list[RegisteredPasskey]:
    """Every passkey that may decide now, with its owner's current name (`reviewer passkey export`):
    where reviewers sign in through the provider, none a plain minted token enrolled, as the queue
    takes no decision from one (`decisions.decide_by_passkey`)."""
    rows = db.all(
        "SELECT tokens.name, passkeys.credential_id, passkeys.public_key, passkeys.rp_id, passkeys.origin "
        f"FROM passkeys JOIN tokens ON tokens.id = passkeys.token_id WHERE passkeys.removed_at IS NULL "
        f"AND {_ACTIVE_OWNER} AND NOT (:provider AND tokens.kind = 'minted') "
        "ORDER BY tokens.name, passkeys.added_at",
        now=now,
        provider=provider_signs_in,
    )
    return [
        RegisteredPasskey(row["name"], row["credential_id"], row["public_key"], row["rp_id"], row["origin"])
        for row in rows
    ]


def deciding_passkey(
    db: Transaction, credential_id: str, now: float
) -> tuple[RegisteredPasskey, int, Identity]:
    """The passkey that made an assertion, its stored signature counter, and its owner as a caller;
    `Forbidden` for a passkey never enrolled here, removed, or whose sign-in ended."""
    row = db.one(
        "SELECT passkeys.credential_id, passkeys.public_key, passkeys.rp_id, passkeys.origin, "
        "passkeys.sign_count, tokens.id, tokens.name, tokens.role, tokens.kind, tokens.issuer, "
        "tokens.subject "
        "FROM passkeys JOIN tokens ON tokens.id = passkeys.token_id WHERE passkeys.credential_id = :id "
        f"AND passkeys.removed_at IS NULL AND {_ACTIVE_OWNER}",
        id=credential_id,
        now=now,
    )
    if row is None:
        raise Forbidden(
            "this passkey is not enrolled on this queue, was removed, or its reviewer's sign-in ended; "
            "nothing was decided"
        )
    subject = None if row["subject"] is None else f"{row['issuer']}#{row['subject']}"
    identity = Identity(row["id"], row["name"], row["role"], row["kind"], subject)
    passkey = RegisteredPasskey(
        row["name"], row["credential_id"], row["public_key"], row["rp_id"], row["origin"]
    )
    return passkey, int(row["sign_count"]), identity


def removed_signers(db: Transaction, proposal_id: str, revision: int) -> list[Row]:
    """The passkeys removed that made approvals of this revision, as the removed SSH keys are read
    (`name`, `fingerprint` as the trail records it, `removed_at`): their approvals are withdrawn."""
    return db.all(
        "SELECT tokens.name AS name, 'passkey:' || passkeys.credential_id AS fingerprint, "
        "passkeys.removed_at FROM passkeys JOIN tokens ON tokens.id = passkeys.token_id "
        "WHERE passkeys.removed_at IS NOT NULL "
        "AND 'passkey:' || passkeys.credential_id IN (SELECT key_fingerprint FROM trail "
        "WHERE proposal_id = :proposal_id AND revision = :revision AND event = 'approved')",
        proposal_id=proposal_id,
        revision=revision,
    )


def count_signature(db: Transaction, credential_id: str, sign_count: int) -> None:
    """Keep the authenticator's counter: an assertion whose counter does not pass it is a clone's."""
    db.run(
        "UPDATE passkeys SET sign_count = :count WHERE credential_id = :id",
        count=sign_count,
        id=credential_id,
    )


def review_link_secret(db: Transaction, fresh: str) -> str:
    """The key of the review pages' links, shared by every replica: `fresh` if none was made yet."""
    db.run(
        "INSERT INTO review_link_key (id, secret) VALUES (1, :secret) ON CONFLICT DO NOTHING", secret=fresh
    )
    row = db.one("SELECT secret FROM review_link_key WHERE id = 1")
    assert row is not None
    return str(row["secret"])


def event_links(store: StoreState, db: Transaction, proposal_id: str, revision: int) -> dict[str, Any]:
    """`links.review` for an event of a revision waiting for a decision, on a queue serving pages."""
    if store.web_origin is None:
        return {}
    secret = bytes.fromhex(review_link_secret(db, secrets.token_hex(32)))
    return {"links": {"review": review_link(store.web_origin, secret, proposal_id, revision)}}
