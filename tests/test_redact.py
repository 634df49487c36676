"""Credentials in URLs, masked wherever the URL appears in a text."""

from __future__ import annotations

import pytest

from exai.redact import mask_url, mask_url_credentials

CASES = [
    ("http://user:PASS@host:8080/v1", "http://user:****@host:8080/v1"),
    ("postgresql://u:p@ss:w@rd@db.example:5432/x", "postgresql://u:****@db.example:5432/x"),
    ("https://ghp_tokenAsUser@git.example/repo", "https://****@git.example/repo"),
    ("https://host/v1?api_key=k3y&model=m", "https://host/v1?api_key=****&model=m"),
    ("wss://h/?access_token=abc#frag", "wss://h/?access_token=****#frag"),
    (
        "https://h/?sslpassword=x&monkey=1&author=me",
        "https://h/?sslpassword=****&monkey=1&author=me",
    ),
    (
        "cannot reach X at http://a:b@h/v1: [Errno 111] refused; also https://c:d@i",
        "cannot reach X at http://a:****@h/v1: [Errno 111] refused; also https://c:****@i",
    ),
    ('{"url": "http://a:secret@h/x"}', '{"url": "http://a:****@h/x"}'),
    ("Redirect for url 'http://u:p@h/path'", "Redirect for url 'http://u:****@h/path'"),
]


@pytest.mark.parametrize(("text", "masked"), CASES, ids=[c[0][:40] for c in CASES])
def test_credentials_in_urls_are_masked(text: str, masked: str) -> None:
    assert mask_url_credentials(text) == masked


@pytest.mark.parametrize(
    "text",
    [
        "https://api.moonshot.ai/v1",
        "mail me at someone@example.com about http://host/path",
        "http://host/path/with@sign",
        "no url here, key=value",
        "",
    ],
)
def test_text_without_url_credentials_is_unchanged(text: str) -> None:
    assert mask_url_credentials(text) == text


@pytest.mark.parametrize(("url", "masked"), [
    ("https://u:p@ntfy.sh/topic?auth=tk&x=1", "https://u:****@ntfy.sh/topic?auth=****&x=****"),
    ("https://tok@hooks.example/h?t=abc#frag", "https://****@hooks.example/h?t=****#****"),
    ("https://hooks.example/h?ghp_BARETOKEN", "https://hooks.example/h?****"),
    ("https://ntfy.sh/my-topic", "https://ntfy.sh/my-topic"),
])  # fmt: skip
def test_a_shown_url_has_its_user_information_and_every_query_value_masked(
    url: str, masked: str
) -> None:
    assert mask_url(url) == masked
