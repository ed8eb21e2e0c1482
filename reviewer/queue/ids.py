"""Proposal ids a person can type: the start of an id names the one proposal whose id begins so.

A page says `reviewer review k3j5x2qa7m-close-t1`; a reviewer on a phone types `reviewer show k3j5`.
The queue stays the authority: an id it holds is taken as it is (even when it begins another), and a
prefix is matched only against the ids the queue lists under the reviewer's own token, then every
request names the whole id, so the queue answers for it. A prefix that begins several ids names none:
the error lists them, newest first, with their titles.
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
            "the one you mean:\n" + "\n".join(shown)
        )


async def resolve_proposal_id(client: QueueClient, typed: str) -> str:
    """The whole id `typed` names: itself when the queue holds it, else the one id it begins.

    Raises `UnknownProposal`, `AmbiguousProposal`, `ValueError` (not an id's characters) or the
    client's `QueueError`."""
    try:
        await client.get_proposal(typed)
    except NotFound:
        pass
    else:
        return typed
    candidates = [summary async for summary in _listed(client) if summary.proposal_id.startswith(typed)]
    if not candidates:
        raise UnknownProposal(typed)
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
