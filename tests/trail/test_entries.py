"""A leaf's bytes are RFC 8785's for its fields, whatever text a token's owner or an agent chose."""

from __future__ import annotations

import json

import rfc8785
from hypothesis import given
from hypothesis import strategies as st

from reviewer.trail.entries import describe, leaf

hostile = st.text(st.characters(blacklist_categories=["Cs"]), max_size=40)


@given(actor=hostile, proposal_id=hostile, reason=st.none() | hostile, signature=st.none() | hostile)
def test_a_leaf_is_the_rfc_8785_form_of_its_fields(
    actor: str, proposal_id: str, reason: str | None, signature: str | None
) -> None:
    content = leaf(
        index=7,
        seq=9,
        at=1_780_000_000.25,
        actor=actor,
        event="approved",
        proposal_id=proposal_id,
        revision=2,
        plan_sha256="5be1" * 16,
        reason=reason,
        statement="statement" if signature is not None else None,
        signature=signature,
        key_fingerprint="SHA256:x" if signature is not None else None,
    )
    assert content == rfc8785.dumps(json.loads(content))
    assert json.loads(content)["actor"] == actor


def test_an_entry_is_named_safely_however_long_or_hostile_its_text() -> None:
    content = leaf(
        index=0,
        seq=1,
        at=0.0,
        actor="\x1b[31mmallory" + "x" * 10_000_000,
        event="approved",
        proposal_id="p-1",
        revision=1,
        plan_sha256="0" * 64,
        reason=None,
    )
    named = describe(content)
    assert "\x1b" not in named and len(named) < 300
    assert named.startswith("approved: proposal p-1 revision 1 by ")
