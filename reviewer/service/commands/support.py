"""What the service's commands share: the store `--db` names, and a refusal on one line."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from reviewer.policy.bounded import PolicyEvaluator
    from reviewer.policy.file import Policy
    from reviewer.service.signed_decisions import PolicySigning
    from reviewer.service.store import Notifying, QueueStore


@contextmanager
def opened(args: argparse.Namespace, **options: Any) -> Iterator[QueueStore]:
    """The store `--db` names (`store_of`), closed when the command is done with it, whatever happens."""
    store = store_of(args, **options)
    try:
        yield store
    finally:
        store.close()


def store_of(
    args: argparse.Namespace,
    *,
    create: bool = False,
    policy: Policy | None = None,
    policy_signing: PolicySigning | None = None,
    policy_evaluator: PolicyEvaluator | None = None,
    notifying: Notifying | None = None,
    migrate: bool = False,
) -> QueueStore:
    """The store `--db` names; token commands never create one (a mistyped path is an error), and
    only `serve` and `db upgrade` migrate one (the others refuse an older schema, saying what to do)."""
    import time

    from reviewer.service.store import (
        DEFAULT_APPROVAL_TTL,
        DEFAULT_CLAIM_LEASE,
        DEFAULT_PENDING_TTL,
        Notifying,
        StoreSettings,
    )
    from reviewer.service.store.opener import open_with

    pending_ttl = getattr(args, "pending_ttl", None)
    approval_ttl = getattr(args, "approval_ttl", None)
    claim_lease = getattr(args, "claim_lease", None)
    settings = StoreSettings(
        time.time,
        DEFAULT_PENDING_TTL if pending_ttl is None else pending_ttl,
        DEFAULT_APPROVAL_TTL if approval_ttl is None else approval_ttl,
        DEFAULT_CLAIM_LEASE if claim_lease is None else claim_lease,
        policy,
        policy_signing,
        policy_evaluator,
        notifying or Notifying(),
    )
    return open_with(args.db, settings, create=create, migrate=migrate)


def refusal(command: str, message: str) -> int:
    print(f"reviewer {command}: {message}", file=sys.stderr)
    return 1


def db_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--db",
        default=None,
        metavar="PATH_OR_URL",
        # Not the path itself: finding it loads the platform's folder rules, which every command
        # (the demo's start among them) would then pay for.
        help="the queue's SQLite file, or a postgresql:// URL "
        "(default: queue.sqlite3 in reviewer's user data folder, e.g. ~/.local/share/reviewer)",
    )


LATEST_EXPIRY: Final = 253402300799.0
"""9999-12-31 23:59:59 UTC, the last second a date shows: a later expiry could not be listed."""


def duration(text: str) -> float:
    """`90d`, `12h`, `30m`, `45s` or a number of seconds, more than 0 (`listing.duration_seconds`)."""
    from reviewer.service.listing import duration_seconds

    try:
        seconds = duration_seconds(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(str(error)) from None
    if time.time() + seconds >= LATEST_EXPIRY:
        raise argparse.ArgumentTypeError(
            f"{text!r} ends after the year 9999, past any time the queue stores; "
            "leave --expires-in out for a token that does not expire"
        )
    return seconds
