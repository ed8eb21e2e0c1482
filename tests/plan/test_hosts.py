"""The base URL's host as it will be resolved, and the alarms a look-alike deserves."""

from __future__ import annotations

import httpx
import pytest

from reviewer.agent.execution import off_target, same_base_url
from reviewer.plan.hosts import destination, read_host
from reviewer.policy.file import parse_policy


def test_a_cyrillic_letter_is_shown_as_the_name_that_will_be_resolved() -> None:
    reading = read_host("https://\u0430pi.example.com/v1")
    assert reading.host == "xn--pi-6kc.example.com"
    assert reading.resolved_url == "https://xn--pi-6kc.example.com/v1"
    assert reading.written_host == "\u0430pi.example.com"
    assert [alarm for alarm in reading.alarms if "passes for Latin" in alarm]


def test_a_look_alike_written_in_punycode_is_decoded_and_flagged() -> None:
    reading = read_host("https://xn--pi-6kc.example.com/v1")
    assert reading.written_host == "\u0430pi.example.com" and reading.alarms


def test_userinfo_is_not_the_host() -> None:
    reading = read_host("http://api.example.com@evil.example/v1")
    assert reading.host == "evil.example" and reading.resolved_url == "http://evil.example/v1"
    assert reading.alarms == ("'api.example.com' before the @ is not the host: requests go to evil.example",)


@pytest.mark.parametrize(
    ("base_url", "words"),
    [
        ("http://10.0.0.5/v1", "the IP address 10.0.0.5, not a name"),
        ("http://[2001:db8::1]/v1", "the IP address 2001:db8::1"),
        ("http://2130706433/v1", "the IP address 127.0.0.1 written as a number"),
        ("http://0x7f.1/v1", "the IP address 127.0.0.1 written as a number"),
        ("http://api.example.com:notaport/v1", "does not parse"),
        ("http://exa mple.com/v1", "characters no DNS name has"),
    ],
)
def test_an_address_or_a_broken_host_where_a_name_was_expected_is_an_alarm(base_url: str, words: str) -> None:
    assert any(words in alarm for alarm in read_host(base_url).alarms), read_host(base_url)


@pytest.mark.parametrize(
    "base_url",
    ["https://api.example.com/v1", "http://127.0.0.1:8080", "http://[::1]:8470", "http://localhost:8080/v1"],
)
def test_a_plain_name_or_loopback_adds_nothing(base_url: str) -> None:
    assert read_host(base_url).plain


def test_a_name_in_one_script_is_shown_encoded_without_an_alarm() -> None:
    reading = read_host("https://b\u00fccher.example/x")
    assert (reading.host, reading.written_host, reading.alarms) == (
        "xn--bcher-kva.example",
        "b\u00fccher.example",
        (),
    )


@pytest.mark.parametrize(
    ("written", "reached"),
    [
        ("https://straße.example/v1", "xn--strae-oqa.example"),  # IDNA 2008, not 2003's strasse
        ("https://XN--STRAE-OQA.example/v1", "xn--strae-oqa.example"),
        ("https://ＡＰＩ.example/v1", "api.example"),
        ("https://api.example./v1", "api.example"),
    ],
)
@pytest.mark.parametrize("pattern_host", ["reached", "written"])
def test_the_policy_the_screen_and_the_executor_name_the_same_host(
    written: str, reached: str, pattern_host: str
) -> None:
    """One function says where a base URL goes: the environment that owns that host owns the plan,
    the screen shows that host, and the executor holds requests to it."""
    owned = reached if pattern_host == "reached" else httpx.URL(written.replace("ＡＰＩ", "api")).host
    policy = parse_policy(f'[environments.production]\nbase_urls = ["https://{owned}/*"]\napprovals = 2\n')
    assert destination(written).host == reached
    assert (policy.owning(written) or policy.default).name == "production"
    reading = read_host(written)
    assert reading.host == reached
    request = httpx.URL(f"https://{reached}/v1/tickets")
    refused = off_target("/v1/tickets", request, written)
    if "ＡＰＩ" in written:
        # httpx cannot encode a fullwidth name: the executor refuses the plan, and the screen says so.
        assert refused is not None and "does not parse" in refused
        assert any("the executor refuses it" in alarm for alarm in reading.alarms)
    else:
        assert refused is None
        assert same_base_url(written, f"https://{reached}/v1")
    assert not policy.owning(f"https://{reached}.evil.example/v1")
