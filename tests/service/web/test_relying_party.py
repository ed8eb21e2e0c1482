"""`--web-origin` read as a browser reports an origin: the default port left out, host in lower case,
plain HTTP only on localhost (an address is no relying party id), anything else refused in words."""

from __future__ import annotations

import pytest

from reviewer.service.web.relying_party import BadOrigin, RelyingParty


@pytest.mark.parametrize(
    ("given", "origin"),
    [
        ("https://Queue.example:443", "https://queue.example"),
        ("https://queue.example:8443/", "https://queue.example:8443"),
        ("http://localhost:80", "http://localhost"),
        ("http://localhost:8080", "http://localhost:8080"),
    ],
)
def test_an_origin_is_kept_as_the_browser_reports_it(given: str, origin: str) -> None:
    assert RelyingParty.parse(given).origin == origin


@pytest.mark.parametrize(
    "given",
    [
        "http://queue.example",
        "http://127.0.0.1:8080",
        "http://[::1]:8080",
        "https://queue.example/review",
        "https://queue.example:99999",
        "https://user@queue.example",
        "ftp://queue.example",
    ],
)
def test_an_origin_no_browser_would_run_passkeys_on_is_refused(given: str) -> None:
    with pytest.raises(BadOrigin, match="--web-origin"):
        RelyingParty.parse(given)
