"""Proposal ids a person can type: how they are made, and any part of one names the one proposal
whose id holds it.

A page says `reviewer review k3j5x2qa7m-close-t1`; a reviewer on a phone types `reviewer show k3j5`,
or the end of the random part they can still see (`x2qa7m`). What was typed is matched only against
the ids the queue lists under the reviewer's own token, then every request names the whole id, so the
queue answers for it. It names one proposal only when no other id holds it, wherever: an agent that
saw the announced id can submit one whose whole id is a piece of it, so a typed id that is one
proposal's and part of another's names neither, and the error lists them all, newest first, with
their titles. A start is not preferred to a middle: a planted id that begins with what the reviewer
typed from the middle of the announced one is listed beside it, never taken for it. `=ID` names that
whole id and nothing else.
"""

from __future__ import annotations

import re
import secrets
from collections.abc import Iterator
from typing import TYPE_CHECKING, Final

from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.refusals import NotFound

if TYPE_CHECKING:  # `reviewer demo` and the agents make ids: they load no client
    from reviewer.queue.answers import RowFields
    from reviewer.queue.shell_client import ShellQueue

ID_ALPHABET: Final = "23456789abcdefghjkmnpqrstvwxyz"
"""Letters and digits no one misreads on a phone: no 0/o, 1/l/i, and no u."""
ID_RANDOM_CHARS: Final = 10
"""About 49 random bits: two ids alike are unlikely among a queue's millions (birthday bound 2^-10
at a million), and any four or five of them in a row already tell a queue's proposals apart."""
ID_MAX_CHARS: Final = 24


def new_proposal_id(title: str) -> str:
    """An id a person can type: random characters first, so what a person sees first (a page's
    line cut short, `reviewer show k3j5`) names one proposal even when the same task runs every day
    under the same title, then the title's first words, so a page or a log line still says what it
    is. At most `ID_MAX_CHARS` characters."""
    random = "".join(secrets.choice(ID_ALPHABET) for _ in range(ID_RANDOM_CHARS))
    room = ID_MAX_CHARS - ID_RANDOM_CHARS - 1
    words = re.sub(r"[^A-Za-z0-9]+", "-", title).strip("-").lower()[:room].rstrip("-")
    return f"{random}-{words}" if words else random


def review_command(proposal_id: str) -> str:
    """The command line that opens the proposal in the terminal app: what a page, or `reviewer
    submit`, tells its reader."""
    return f"reviewer review {proposal_id}"


CANDIDATES_SHOWN: Final = 8
"""Ids an ambiguous prefix lists; past these, how many more."""
PAGE: Final = 200


class UnknownProposal(LookupError):
    """No proposal id is, or holds, what was typed."""

    def __init__(self, typed: str) -> None:
        super().__init__(
            f"the queue holds no proposal {safe_text(clip(typed, 128))!r}, and no id holds it: "
            "`reviewer list` shows what waits"
        )


class AmbiguousProposal(LookupError):
    """What was typed is part of several ids: it names none of them."""

    def __init__(self, typed: str, candidates: list[RowFields]) -> None:
        self.candidates = candidates
        shown = [
            f"  {safe_text(candidate.proposal_id)}  rev {candidate.revision}  {candidate.state}  "
            f"{safe_text(clip(candidate.title, 60))}"
            for candidate in candidates[:CANDIDATES_SHOWN]
        ]
        more = len(candidates) - CANDIDATES_SHOWN
        if more > 0:
            shown.append(f"  … and {more:,} more")
        super().__init__(
            f"{safe_text(clip(typed, 128))!r} is part of {len(candidates):,} proposal ids; type more of "
            f"the one you mean (or {EXACT}ID for an id that is part of others):\n" + "\n".join(shown)
        )


EXACT: Final = "="
"""Before an id, names that whole id only (`=a55aa`), where it is also part of others."""


def resolve_proposal_id(client: ShellQueue, typed: str) -> str:
    """The whole id `typed` names: the one id that holds it anywhere (itself included), or with `=`,
    itself.

    Raises `UnknownProposal`, `AmbiguousProposal`, `ValueError` (not an id's characters) or the
    client's `QueueError`."""
    if not any(character.isalnum() for character in typed):  # "" or "-" is part of every id
        raise UnknownProposal(typed)
    if typed.startswith(EXACT):
        try:
            client.record(typed[len(EXACT) :])
        except NotFound:
            raise UnknownProposal(typed) from None
        return typed[len(EXACT) :]
    from reviewer.queue.shell_client import id_part  # the agents make ids here: they load no client

    candidates = [row for row in _listed(client, id_part(typed)) if typed in row.proposal_id]
    if not candidates:
        try:  # listed or not (another's, past its pages), a whole id the queue holds is itself
            client.record(typed)
        except NotFound:
            raise UnknownProposal(typed) from None
        return typed
    if len(candidates) > 1:
        raise AmbiguousProposal(typed, candidates)
    return candidates[0].proposal_id


def _listed(client: ShellQueue, holding: str) -> Iterator[RowFields]:
    """Every proposal the queue lists whose id holds `holding`, newest first, page by page: one short
    page from a queue that narrows the list so, every page from one of an earlier release, which
    lists them all (the caller keeps those that hold it)."""
    cursor = None
    while True:
        page = client.list_page(None, cursor, PAGE, {"holding": holding})
        yield from page.proposals
        cursor = page.next_cursor
        if cursor is None:
            return
