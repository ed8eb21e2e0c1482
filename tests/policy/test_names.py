"""Base URLs under their patterns (names on their confusable skeleton: tests/plan/test_lookalikes.py)."""

from __future__ import annotations

import pytest

from reviewer.policy.names import BaseUrlPattern


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
