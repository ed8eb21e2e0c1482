"""The store's tokens and reviewers' SSH keys: minting, rotating, revoking and resolving tokens, and the
keys decisions are signed with, as functions of one open transaction."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from datetime import datetime
from typing import Final

from reviewer.policy.quorum import person
from reviewer.service import rules
from reviewer.service.auth import Identity, Kind, Role, hashes_match
from reviewer.service.errors import Conflict, Unauthorized
from reviewer.service.rules import Row
from reviewer.service.store.base import Clock, Transaction
from reviewer.signing.sshsig import PublicKey


@dataclass(frozen=True)
class TokenInfo:
    name: str
    role: Role
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None
    previous_valid_until: datetime | None = None
    """After a rotation: until when the replaced token is still accepted."""
    kind: Kind = "minted"
    subject: str | None = None
    """A provider's person: `ISSUER#SUBJECT`."""
    session_ends_at: datetime | None = None
    """A provider's person: when the session of the last identity token the queue accepted ends."""


TOKEN_COLUMNS: Final = (
    "tokens.id, tokens.name, tokens.role, tokens.token_sha256, tokens.previous_sha256, tokens.kind, "
    "tokens.issuer, tokens.subject"
)
"""What `identity_of` reads of a token's row."""
TOKEN_VALID: Final = (
    "(tokens.token_sha256 = :token_sha256 OR (tokens.previous_sha256 = :token_sha256 "
    "AND tokens.previous_expires_at > :now)) AND tokens.revoked_at IS NULL "
    "AND (tokens.expires_at IS NULL OR tokens.expires_at > :now)"
)
"""The row of a token that authenticates at `:now`: its current secret, or the one a rotation
replaced within its grace period; not revoked, not expired."""


@dataclass(frozen=True)
class RegisteredKey:
    """An SSH public key a reviewer signs decisions with."""

    name: str
    public_key: str
    fingerprint: str
    comment: str
    added_at: datetime


# tokens


def create_token(
    db: Transaction,
    name: str,
    role: Role,
    token_sha256: str,
    expires_at: float | None,
    now: float,
    kind: Kind = "minted",
    person: tuple[str, str] | None = None,
) -> None:
    """`person`: the provider's (issuer, subject) of the person a reviewer's token belongs to."""
    rules.check_new_token(name, role, _same_person(db, name))
    issuer, subject = person if person is not None else (None, None)
    db.run(
        "INSERT INTO tokens (name, role, token_sha256, created_at, expires_at, kind, issuer, subject) "
        "VALUES (:name, :role, :token_sha256, :now, :expires_at, :kind, :issuer, :subject)",
        name=name,
        role=role,
        token_sha256=token_sha256,
        now=now,
        expires_at=expires_at,
        kind=kind,
        issuer=issuer,
        subject=subject,
    )


def list_tokens(db: Transaction) -> list[TokenInfo]:
    """Every row, whatever it holds: a time no date can show (a row written before durations were
    bounded) is shown as the latest or earliest date there is, never a crash."""
    rows = db.all(
        "SELECT name, role, created_at, revoked_at, expires_at, previous_expires_at, kind, issuer, "
        "subject, session_ends_at FROM tokens ORDER BY name, created_at"
    )
    return [
        TokenInfo(
            row["name"],
            row["role"],
            rules.clamped_timestamp(row["created_at"]),
            rules.shown_timestamp(row["revoked_at"]),
            rules.shown_timestamp(row["expires_at"]),
            rules.shown_timestamp(row["previous_expires_at"]),
            row["kind"],
            None if row["subject"] is None else f"{row['issuer']}#{row['subject']}",
            rules.shown_timestamp(row["session_ends_at"]),
        )
        for row in rows
    ]


def rotate_token(
    db: Transaction, name: str, token_sha256: str, grace: float, expires_at: float | None, now: float
) -> bool:
    rotated = db.run(
        "UPDATE tokens SET previous_sha256 = token_sha256, previous_expires_at = :until, "
        "token_sha256 = :token_sha256, expires_at = :expires_at "
        "WHERE lower(name) = lower(:name) AND revoked_at IS NULL "
        # An expired token stays expired: a new secret would bring back the approvals its end withdrew.
        "AND (expires_at IS NULL OR expires_at > :now) AND kind <> 'provider'",
        now=now,
        until=now + grace,
        token_sha256=token_sha256,
        expires_at=expires_at,
        name=name,
    )
    return rotated > 0


def token_refusal(db: Transaction, token_sha256: str, now: float) -> str | None:
    row = db.one(
        "SELECT token_sha256, expires_at, previous_expires_at FROM tokens "
        "WHERE (token_sha256 = :token_sha256 OR previous_sha256 = :token_sha256) "
        "AND revoked_at IS NULL",
        token_sha256=token_sha256,
    )
    if row is None:
        return None
    if not hashes_match(row["token_sha256"], token_sha256):
        ended = rules.required_timestamp(row["previous_expires_at"])
        return (
            "this token was replaced by a rotation, and its grace period ended at "
            f"{ended:%Y-%m-%d %H:%M:%S} UTC"
        )
    return expiry(row, now)


def active_tokens(db: Transaction, name: str) -> list[Row]:
    """The id and kind of each active token of `name` (without regard to case): what a revocation ends."""
    return db.all(
        "SELECT id, kind FROM tokens WHERE lower(name) = lower(:name) AND revoked_at IS NULL", name=name
    )


def revoke_token(db: Transaction, name: str, now: float) -> bool:
    revoked = db.run(
        "UPDATE tokens SET revoked_at = :now WHERE lower(name) = lower(:name) AND revoked_at IS NULL",
        now=now,
        name=name,
    )
    return revoked > 0


def resolve_token(db: Transaction, token_sha256: str, now: float) -> Identity | None:
    row = db.one(
        f"SELECT {TOKEN_COLUMNS} FROM tokens WHERE {TOKEN_VALID}",
        token_sha256=token_sha256,
        now=now,
    )
    return identity_of(row, token_sha256)


def require_active(db: Transaction, identity: Identity, clock: Clock) -> None:
    """Read the caller's token again inside the write: a revocation or its expiry meanwhile
    refuses the write."""
    row = db.one("SELECT revoked_at, expires_at FROM tokens WHERE id = :token_id", token_id=identity.token_id)
    rules.require_active_token(row)
    assert row is not None
    expired = expiry(row, clock())
    if expired is not None:
        raise Unauthorized(f"{expired}; ask the queue's operator for one")


def expiry(row: Row, now: float) -> str | None:
    """What a 401 says of a token row's expiry at `now`, None while it is valid."""
    if row["expires_at"] is None or row["expires_at"] > now:
        return None
    return f"this token expired at {rules.required_timestamp(row['expires_at']):%Y-%m-%d %H:%M:%S} UTC"


def identity_of(row: Row | None, token_sha256: str) -> Identity | None:
    """The identity of a token's row that `TOKEN_VALID` found, compared in constant time with the
    hash presented: its current secret, or the one a rotation replaced (within its grace)."""
    if row is None:
        return None
    current = hashes_match(row["token_sha256"], token_sha256)
    previous = row["previous_sha256"] is not None and hashes_match(row["previous_sha256"], token_sha256)
    if not (current or previous):
        return None
    bound = None if row["subject"] is None else f"{row['issuer']}#{row['subject']}"
    return Identity(row["id"], row["name"], row["role"], row["kind"], bound)


# reviewers' SSH keys


def add_ssh_key(db: Transaction, name: str, key: PublicKey, comment: str, now: float) -> None:
    role = db.one("SELECT role FROM tokens WHERE lower(name) = lower(:name) LIMIT 1", name=name)
    if role is None or role["role"] != "reviewer":
        raise Conflict(f"{name!r} is not a reviewer's token name; keys sign reviewers' decisions")
    held = db.one(
        "SELECT name FROM ssh_keys WHERE fingerprint = :fingerprint AND removed_at IS NULL",
        fingerprint=key.fingerprint,
    )
    if held is not None:
        whose = "this reviewer" if rules.same_name(held["name"], name) else repr(held["name"])
        raise Conflict(f"the key {key.fingerprint} is already registered for {whose}")
    db.run(
        "INSERT INTO ssh_keys (name, public_key, fingerprint, comment, added_at) "
        "VALUES (:name, :public_key, :fingerprint, :comment, :now)",
        name=name,
        public_key=key.openssh(),
        fingerprint=key.fingerprint,
        comment=comment,
        now=now,
    )


def remove_ssh_key(db: Transaction, name: str, fingerprint: str, now: float) -> bool:
    removed = db.run(
        "UPDATE ssh_keys SET removed_at = :now "
        "WHERE lower(name) = lower(:name) AND fingerprint = :fingerprint AND removed_at IS NULL",
        now=now,
        name=name,
        fingerprint=fingerprint,
    )
    return removed > 0


def list_ssh_keys(db: Transaction, name: str | None) -> list[RegisteredKey]:
    rows = db.all(
        "SELECT name, public_key, fingerprint, comment, added_at FROM ssh_keys "
        "WHERE removed_at IS NULL AND (CAST(:name AS TEXT) IS NULL OR lower(name) = lower(:name)) "
        "ORDER BY name, added_at",
        name=name,
    )
    return [
        RegisteredKey(
            row["name"],
            row["public_key"],
            row["fingerprint"],
            row["comment"],
            rules.required_timestamp(row["added_at"]),
        )
        for row in rows
    ]


def signing_keys(db: Transaction, name: str) -> list[PublicKey]:
    rows = db.all(
        "SELECT public_key FROM ssh_keys WHERE lower(name) = lower(:name) AND removed_at IS NULL",
        name=name,
    )
    return [PublicKey.from_openssh(row["public_key"]) for row in rows]


# people the team's OpenID provider signs in

PERSON_COLUMNS: Final = "id, name, role, revoked_at, session_ends_at, created_at"


def provider_person(db: Transaction, issuer: str, subject: str) -> Row | None:
    """The active row of the provider's person `issuer`, `subject`, if they signed in before."""
    return db.one(
        f"SELECT {PERSON_COLUMNS} FROM tokens WHERE kind = 'provider' AND issuer = :issuer "
        "AND subject = :subject AND revoked_at IS NULL",
        issuer=issuer,
        subject=subject,
    )


def sign_in(
    db: Transaction,
    issuer: str,
    subject: str,
    name: str,
    reviewer: bool,
    issued_at: float,
    session_ends_at: float,
    now: float,
) -> int | None:
    """Record a sign-in the provider vouched for; the row's id, which idempotency keys and claims
    are scoped to, stays the person's across renewals.

    A person the provider no longer counts a reviewer (None) has their row ended now, which
    withdraws their pending approvals as a revocation does; a token issued before their session began
    ends nothing (the provider's word at its time, which a later sign-in outdates). A token issued before
    the operator ended the person's session (`reviewer token revoke`) does not start a new one: only a
    sign-in after it does.
    """
    active = provider_person(db, issuer, subject)
    if not reviewer:
        if active is not None and issued_at >= active["created_at"]:
            db.run("UPDATE tokens SET revoked_at = :now WHERE id = :id", now=now, id=active["id"])
        return None
    if active is None:
        ended = db.one(
            "SELECT max(revoked_at) AS ended FROM tokens WHERE kind = 'provider' AND issuer = :issuer "
            "AND subject = :subject",
            issuer=issuer,
            subject=subject,
        )
        if ended is not None and ended["ended"] is not None and issued_at <= ended["ended"]:
            raise Unauthorized("this session was ended on the queue; sign in again (`reviewer login`)")
        rules.check_name_free(name, "reviewer", _same_person(db, name), signs_in=True)
        row = db.one(
            "INSERT INTO tokens (name, role, token_sha256, created_at, kind, issuer, subject, "
            "session_ends_at) VALUES (:name, 'reviewer', :placeholder, :now, 'provider', :issuer, "
            ":subject, :session_ends_at) RETURNING id",
            name=name,
            # Not a SHA-256 of anything: no bearer token presented to the queue ever resolves to it.
            placeholder=f"provider:{secrets.token_hex(16)}",
            now=now,
            issuer=issuer,
            subject=subject,
            session_ends_at=session_ends_at,
        )
        assert row is not None
        return int(row["id"])
    if active["name"] != name:
        rules.check_name_free(name, "reviewer", _same_person(db, name, active["id"]), signs_in=True)
    db.run(
        "UPDATE tokens SET name = :name, session_ends_at = :session_ends_at WHERE id = :id",
        name=name,
        session_ends_at=max(session_ends_at, active["session_ends_at"] or 0.0),
        id=active["id"],
    )
    return int(active["id"])


def _same_person(db: Transaction, name: str, own_id: int | None = None) -> list[Row]:
    """The tokens, but the row `own_id`, whose names are the same person's as `name` (`person`)."""
    return [
        row
        for row in db.all("SELECT id, name, role, revoked_at FROM tokens")
        if row["id"] != own_id and person(row["name"]) == person(name)
    ]
