"""A passkey's assertion over a decision statement, checked as the queue and an executor check it.

The authenticator is played by `tests.signing.authenticator`, so each flag and field can be set
wrong on purpose; the browser's own assertions are tested in `tests/service/web/test_review_page.py`.
"""

from __future__ import annotations

import pytest

from reviewer.signing.passkeys import (
    AllowedPasskeys,
    AllowedPasskeysError,
    BadAssertion,
    PasskeyAssertion,
    is_passkey_assertion,
    verify_with_passkeys,
)
from reviewer.signing.sshsig import DecisionStatement
from tests.signing.authenticator import USER_PRESENT, Authenticator

STATEMENT = DecisionStatement("p-1", 2, "a" * 64, "approve", "alice", "2026-12-06T03:00:00Z")


def test_an_assertion_over_the_statement_verifies_and_returns_the_counter() -> None:
    phone = Authenticator()
    assertion = phone.assert_over(STATEMENT.to_bytes(), counter=7)
    assert phone.registered().verify(STATEMENT.to_bytes(), assertion, sign_count=6) == 7
    statement, passkey = verify_with_passkeys(
        STATEMENT.to_bytes().decode(), assertion.to_text(), [phone.registered()]
    )
    assert statement == STATEMENT and passkey.reviewer == "alice"


def test_the_text_form_reads_back_as_itself_and_is_told_from_an_sshsig() -> None:
    assertion = Authenticator().assert_over(STATEMENT.to_bytes())
    assert PasskeyAssertion.parse(assertion.to_text()) == assertion
    assert is_passkey_assertion(assertion.to_text())
    assert not is_passkey_assertion("-----BEGIN SSH SIGNATURE-----\nU1NIU0lH\n-----END SSH SIGNATURE-----")
    with pytest.raises(BadAssertion, match="not a reviewer.passkey-assertion/v1"):
        PasskeyAssertion.parse('{"format": "something else"}')


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"flags": USER_PRESENT}, "verif"),
        ({"origin": "https://evil.example"}, "origin"),
        ({"rp_id": "evil.example"}, "RP ID"),
        ({"counter": 3}, "count"),
    ],
    ids=["no user verification", "another origin", "another relying party", "counter went back"],
)
def test_an_assertion_the_queue_must_refuse(change: dict[str, object], words: str) -> None:
    phone = Authenticator()
    assertion = phone.assert_over(STATEMENT.to_bytes(), **change)  # type: ignore[arg-type]
    with pytest.raises(BadAssertion, match=f"(?i){words}"):
        phone.registered().verify(STATEMENT.to_bytes(), assertion, sign_count=5)


def test_an_assertion_over_another_statement_or_by_another_passkey_is_refused() -> None:
    phone, stranger = Authenticator(), Authenticator(b"credential-two")
    other = DecisionStatement("p-1", 3, "a" * 64, "approve", "alice", "2026-12-06T03:00:00Z")
    with pytest.raises(BadAssertion, match="(?i)challenge"):
        phone.registered().verify(STATEMENT.to_bytes(), phone.assert_over(other.to_bytes()))
    with pytest.raises(BadAssertion, match="not registered for alice"):
        verify_with_passkeys(
            STATEMENT.to_bytes().decode(),
            stranger.assert_over(STATEMENT.to_bytes()).to_text(),
            [phone.registered()],
        )
    with pytest.raises(BadAssertion, match="not registered for alice"):  # bob's passkey, alice's name
        verify_with_passkeys(
            STATEMENT.to_bytes().decode(),
            phone.assert_over(STATEMENT.to_bytes()).to_text(),
            [phone.registered("bob")],
        )


def test_a_passkeys_file_reads_back_and_a_broken_one_is_refused_in_words() -> None:
    allowed = AllowedPasskeys((Authenticator().registered(),))
    assert AllowedPasskeys.parse(allowed.to_text()) == allowed
    with pytest.raises(AllowedPasskeysError, match="not a reviewer.passkeys/v1 file"):
        AllowedPasskeys.parse('{"format": "reviewer.passkeys/v0", "passkeys": []}', "keys.json")
    with pytest.raises(AllowedPasskeysError, match="passkey 1 must name reviewer"):
        AllowedPasskeys.parse('{"format": "reviewer.passkeys/v1", "passkeys": [{"reviewer": 1}]}')
