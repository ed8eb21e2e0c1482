"""A placeholder's minted form (`reviewer.plan.placeholders`): what a client is handed, read back as the
placeholder it stands for wherever it is, and nothing read back that the grammar does not accept."""

from __future__ import annotations

import urllib.parse

import pytest

from reviewer.plan.placeholders import PLACEHOLDER, Reference, as_minted, from_minted


@pytest.mark.parametrize(
    "field", ["id", "owner.id", "items.0.id", "x-request_id", "a_.b", "a._b", "a_-b", "_x", "A-", "a__h"]
)
def test_every_field_the_grammar_takes_is_handed_out_url_safe_and_read_back_alike(field: str) -> None:
    reference = Reference(field, 12)
    minted = reference.minted()
    assert urllib.parse.quote(minted, safe="") == urllib.parse.quote_plus(minted) == minted
    assert set(minted) <= set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_")
    assert from_minted(f"/v1/{minted}/x") == f"/v1/{reference.text()}/x"
    assert as_minted({reference.text(): [f"see {reference.text()}."]}) == {minted: [f"see {minted}."]}


def test_a_value_round_trips_through_its_minted_form() -> None:
    value = {"path": "/v1/<items.0.id from call 3>", "n": 7, "list": ["<id from call 1>", None]}
    assert from_minted(as_minted(value)) == value


@pytest.mark.parametrize(
    "text",
    [
        "rvw--a--b--from-call-1--",  # a field with `--` is no field
        "rvw--0a--from-call-1--",  # a field starts with a name
        "rvw--a-00--from-call-1--",  # an index has no leading zero
        "rvw--a_x--from-call-1--",  # `_x` escapes nothing
        "rvw--id--from-call---",
    ],
)
def test_text_that_spells_no_placeholder_stays_as_it_is(text: str) -> None:
    assert from_minted(text) == text
    assert not PLACEHOLDER.search(from_minted(text))
