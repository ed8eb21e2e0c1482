"""Environment names on their confusable skeleton, and base URLs under their patterns."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from reviewer.policy.names import BaseUrlPattern, skeleton


@pytest.mark.parametrize(
    "written",
    [
        "production",
        "prоduction",  # Cyrillic о
        "рrоduсtion",  # Cyrillic р, о, с
        "produ\u200bction",  # a zero-width space
        "pro\u2060duction",  # a word joiner
        "PRODUCTION",
        "ｐｒｏｄｕｃｔｉｏｎ",  # fullwidth
        " Production ",
        "production\ufe0f",  # a variation selector
    ],
)
def test_look_alikes_of_production_share_its_skeleton(written: str) -> None:
    assert skeleton(written) == skeleton("production") == "production"


@pytest.mark.parametrize("other", ["prod", "staging", "productions", "pr0duction", "próduction"])
def test_other_names_keep_their_own(other: str) -> None:
    assert skeleton(other) != skeleton("production")


@given(st.text(max_size=30))
def test_the_skeleton_is_a_fixed_point(text: str) -> None:
    """UTS #39: the skeleton of a skeleton is itself, so comparing skeletons is an equivalence."""
    assert skeleton(skeleton(text)) == skeleton(text)


@pytest.mark.parametrize(
    ("pattern", "url", "matches"),
    [
        ("https://api.prod.example/*", "https://api.prod.example/v1", True),
        ("https://api.prod.example/*", "https://api.prod.example", True),
        ("https://api.prod.example/*", "https://API.Prod.Example:443/v1/", True),
        ("https://api.prod.example/*", "http://api.prod.example/v1", False),
        ("https://api.prod.example/*", "https://api.prod.example:8443/v1", False),
        ("https://api.prod.example/*", "https://api.prod.example.evil/v1", False),
        ("https://api.prod.example/*", "https://api.prod.example@evil.example/v1", False),
        ("https://api.prod.example/*", "https://evil.example@api.prod.example/v1", True),
        ("https://api.prod.example/*", "https://аpi.prod.example/v1", False),  # Cyrillic а
        ("https://api.prod.example/v1/*", "https://api.prod.example/v1/tickets", True),
        ("https://api.prod.example/v1/*", "https://api.prod.example/v10", False),
        ("https://api.prod.example/v1", "https://api.prod.example/v1/", True),
        ("https://api.prod.example/v1", "https://api.prod.example/v1/x", False),
        ("https://*.prod.example/*", "https://k8s.eu1.prod.example/", True),
        ("https://*.prod.example/*", "https://prod.example/", False),
        ("https://*.prod.example/*", "https://notprod.example/", False),
        ("https://k8s.example:6443/*", "https://k8s.example:6443/api", True),
        ("https://api.prod.example/*", "not a url", False),
    ],
)
def test_base_url_patterns(pattern: str, url: str, matches: bool) -> None:
    assert BaseUrlPattern.parse(pattern).matches(url) is matches


@pytest.mark.parametrize(
    "pattern",
    [
        "ftp://x.example/*",
        "https:///v1",
        "https://a*b.example/",
        "https://x.example/v*/y",
        "https://u@x.example/",
    ],
)
def test_a_bad_pattern_says_why(pattern: str) -> None:
    with pytest.raises(ValueError, match="pattern|host"):
        BaseUrlPattern.parse(pattern)
