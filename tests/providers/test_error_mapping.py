"""Vendor failures to exai errors, and the retry decision, without a network."""

from __future__ import annotations

import email.utils
import time

import pytest

from exai.errors import ContextTooLongError, ExaiError, ProviderError, RateLimitedError
from exai.providers.error_mapping import (
    connection_error,
    parse_error_body,
    retry_after_s,
    status_error,
)
from exai.providers.retry import RetryPolicy


def test_retry_after_sources_in_order_of_precision() -> None:
    assert retry_after_s({"retry-after-ms": "250", "Retry-After": "9"}) == 0.25
    assert retry_after_s({"Retry-After": "3"}) == 3.0
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 25 <= (retry_after_s({"Retry-After": when}) or 0) <= 31
    assert retry_after_s({}, "please try again after 4 seconds") == 4.0
    assert retry_after_s(None) is None


def test_parse_error_body_shapes() -> None:
    assert parse_error_body('{"error": {"code": "1261", "message": "x"}}') == ("1261", "x")
    assert parse_error_body({"error": {"type": "t", "message": "m"}}) == ("t", "m")
    assert parse_error_body({"type": "t", "message": "m"}) == ("t", "m")
    assert parse_error_body("<html>bad gateway</html>") == (None, "<html>bad gateway</html>")
    assert parse_error_body(None) == (None, "")


@pytest.mark.parametrize(
    ("status", "body", "expected", "retry"),
    [
        (
            400,
            {"error": {"message": "prompt is too long: 9000 tokens"}},
            ContextTooLongError,
            False,
        ),
        (413, "Request Entity Too Large: context length exceeded", ContextTooLongError, False),
        (429, {"error": {"message": "slow down"}}, RateLimitedError, True),
        (402, {"error": {"message": "no credits"}}, ProviderError, False),
        (403, {"error": {"message": "forbidden"}}, ProviderError, False),
        (502, "bad gateway", ProviderError, True),
        (404, {"error": {"message": "no such model"}}, ProviderError, False),
    ],
)
def test_generic_mapping(status: int, body: object, expected: type[ExaiError], retry: bool) -> None:
    error = status_error(provider="p", label="P", status=status, headers={}, body=body)
    assert type(error) is expected
    assert error.retryable is retry
    assert error.details["status"] == status


def test_retry_policy_decisions() -> None:
    policy = RetryPolicy(max_retry_after_s=60)

    def mapped(status: int, headers: dict[str, str] | None = None) -> Exception:
        return status_error(provider="p", label="P", status=status, headers=headers, body="")

    assert policy.should_retry(mapped(429))
    assert policy.should_retry(mapped(500)) and policy.should_retry(mapped(503))
    assert not policy.should_retry(mapped(429, {"Retry-After": "600"}))
    for status in (400, 401, 402, 403, 404):
        assert not policy.should_retry(mapped(status))
    timeout = ProviderError("t", retryable=True, details={"kind": "timeout"})
    assert not policy.should_retry(timeout)
    assert not policy.should_retry(ValueError("a bug"))


def test_a_url_with_credentials_is_masked_in_the_error_it_appears_in() -> None:
    base_url = "http://user:pw-in-url@127.0.0.1:9/v1"
    unreachable = connection_error(
        provider="openai_compat", label="the endpoint", base_url=base_url, timeout_s=None,
        cause=OSError(f"connect to {base_url}/chat/completions refused"),
    )  # fmt: skip
    body = {"error": {"message": f"no route {base_url}"}}
    echoed = status_error(provider="openai_compat", label="the endpoint", status=404,
                          headers=None, body=body)  # fmt: skip
    for error in (unreachable, echoed):
        assert "pw-in-url" not in error.message and "pw-in-url" not in str(error)
        assert "user:****@127.0.0.1" in error.message
