"""Proposal ids a person can type: the start of an id names the one proposal whose id begins so.

A page says `reviewer review k3j5x2qa7m-close-t1`; a reviewer on a phone types `reviewer show k3j5`.
A prefix is matched only against the ids the queue lists under the reviewer's own token, then every
request names the whole id, so the queue answers for it. What was typed names one proposal only when
no other id begins so: an agent that saw the announced id can submit one whose whole id is its first
characters, so a typed id that is one proposal's and begins another's names neither, and the error
lists them all, newest first, with their titles. `=ID` names that whole id and nothing else.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Final

from reviewer.plan.sanitize import clip, safe_text
from reviewer.queue.client import NotFound, QueueClient
from reviewer.queue.messages import ProposalSummary

CANDIDATES_SHOWN: Final = 8
"""Ids an ambiguous prefix lists; past these, how many more."""
PAGE: Final = 200


class UnknownProposal(LookupError):
    """No proposal id is, or begins with, what was typed."""

    def __init__(self, typed: str) -> None:
        super().__init__(
            f"the queue holds no proposal {safe_text(clip(typed, 128))!r}, and no id begins so: "
            "`reviewer list` shows what waits"
        )


class AmbiguousProposal(LookupError):
    """What was typed begins several ids: it names none of them."""

    def __init__(self, typed: str, candidates: list[ProposalSummary]) -> None:
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
            f"{safe_text(clip(typed, 128))!r} begins {len(candidates):,} proposal ids; type more of "
            f"the one you mean (or {EXACT}ID for an id that begins others):\n" + "\n".join(shown)
        )


EXACT: Final = "="
"""Before an id, names that whole id only (`=a55aa`), where it also begins others."""


async def resolve_proposal_id(client: QueueClient, typed: str) -> str:
    """The whole id `typed` names: the one id it begins (itself included), or with `=`, itself.

    Raises `UnknownProposal`, `AmbiguousProposal`, `ValueError` (not an id's characters) or the
    client's `QueueError`."""
    if typed.startswith(EXACT):
        try:
            await client.get_proposal(typed[len(EXACT) :])
        except NotFound:
            raise UnknownProposal(typed) from None
        return typed[len(EXACT) :]
    candidates = [summary async for summary in _listed(client) if summary.proposal_id.startswith(typed)]
    if not candidates:
        try:  # listed or not (another's, past its pages), a whole id the queue holds is itself
            await client.get_proposal(typed)
        except NotFound:
            raise UnknownProposal(typed) from None
        return typed
    if len(candidates) > 1:
        raise AmbiguousProposal(typed, candidates)
    return candidates[0].proposal_id


async def _listed(client: QueueClient) -> AsyncIterator[ProposalSummary]:
    """Every proposal the queue lists, newest first, page by page."""
    cursor = None
    while True:
        listing = await client.list_proposals(cursor=cursor, limit=PAGE)
        assert listing.page is not None  # no etag was sent, so the answer is a page
        for summary in listing.page.proposals:
            yield summary
        cursor = listing.page.next_cursor
        if cursor is None:
            return
