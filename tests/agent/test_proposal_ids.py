"""Ids `Gate.run` gives a proposal: short enough to type on a phone, unique, the title's words after."""

from __future__ import annotations

import re

from reviewer.plan.proposal import PROPOSAL_ID_PATTERN
from reviewer.queue.ids import ID_MAX_CHARS, new_proposal_id

TITLE = "Merge t1 and t2 into a new ticket, delete t3"


def test_an_id_is_short_random_first_and_says_what_it_is() -> None:
    """At most 24 characters: ten random ones (no 0/o, 1/l/i) then the title's first words, the
    first few characters enough to type (`reviewer show k3j5`)."""
    proposal_id = new_proposal_id(TITLE)
    assert len(proposal_id) <= ID_MAX_CHARS == 24
    assert re.fullmatch(r"[2-9a-hjkmnp-tv-z]{10}-merge-t1-and", proposal_id), proposal_id
    assert re.match(PROPOSAL_ID_PATTERN, proposal_id)


def test_ids_of_one_title_are_unique_from_their_start() -> None:
    """The same task every day under the same title: 20,000 ids, all different in their first ten
    characters, so a prefix a person types tells them apart."""
    starts = {new_proposal_id(TITLE)[:10] for _ in range(20_000)}
    assert len(starts) == 20_000


def test_a_title_without_letters_gives_the_random_part_alone() -> None:
    for title in ("", "---", "Ωμέγα ✓", "\u202e\x1b"):
        proposal_id = new_proposal_id(title)
        assert re.fullmatch(r"[2-9a-hjkmnp-tv-z]{10}", proposal_id), (title, proposal_id)
