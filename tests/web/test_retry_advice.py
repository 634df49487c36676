"""What each model face tells its client about retrying an error (exai.web.retry_advice),
and the status every face gives an error no retry can cure."""

from __future__ import annotations

import re

import pytest

from exai.protocol import ErrorCode, ErrorInfo
from exai.web import anthropic_errors, openai_errors
from exai.web.retry_advice import client_message, exai_view, is_final, retry_headers

# What opencode 1.18.33 takes for a passing failure in an error's message or body
# (its SessionRetry), and retries five times whatever the status says.
OPENCODE_TRANSIENT = [
    r"429|500|502|503|504|524",
    r"rate increased too quickly|rate limit|rate-limit|rate_limit|too many requests",
    r"overloaded|service unavailable|service_unavailable|service-unavailable|internal error"
    r"|internal_error|internal server error|server error|server_error|server-error"
    r"|provider returned error|provider_returned_error|provider-returned-error",
    r"terminated|fetch failed|failed to fetch|network[-_\s]error|upstream connect"
    r"|connection error|connection refused|connection lost|socket connection was closed"
    r"|socket hang up|reset before headers|getaddrinfo|enotfound|eai_again|econnrefused"
    r"|econnreset|etimedout",
    r"^timeout$"
    r"|\b(?:request|response|connection|network|stream|read) (?:timeout|timed out|time out)\b",
    r"try your request again|retry your request|resource exhausted|resource_exhausted",
    r"\btry again (?:later|in\b)|\b(?:currently|temporarily) at capacity\b",
]


def _retried(kind: str, **details: object) -> ErrorInfo:
    code = ErrorCode.RATE_LIMITED if kind == "rate_limit" else ErrorCode.PROVIDER_ERROR
    message = "Kimi failed (HTTP 500 server_error: busy); try again later"
    details = {"provider": "kimi", "kind": kind, "retries": 2, **details}
    return ErrorInfo(code=code, message=message, retryable=True, retry_after_s=2.0,
                     details=details)  # fmt: skip


DOWN = ErrorInfo(code=ErrorCode.PROVIDER_ERROR, message="Kimi failed (HTTP 503)", retryable=True,
                 details={"provider": "kimi", "kind": "server", "retries": 0})  # fmt: skip
LIMITED = ErrorInfo(code=ErrorCode.RATE_LIMITED, message="slow down", retryable=True,
                    retry_after_s=120.0, details={"retries": 0})  # fmt: skip
SPENT = ErrorInfo(code=ErrorCode.BUDGET_EXCEEDED, message="spent; it resets at 2026-12-01",
                  retry_after_s=21620.0)  # fmt: skip
BAD_KEY = ErrorInfo(code=ErrorCode.PROVIDER_ERROR, message="Kimi rejected the API key (HTTP 401)",
                    details={"provider": "kimi", "kind": "auth", "retries": 0})  # fmt: skip
RETRIED = _retried("server", status=500)


def test_an_error_exai_retried_is_final_though_it_was_retryable():
    assert is_final(RETRIED) and is_final(SPENT) and is_final(BAD_KEY)
    assert not is_final(DOWN) and not is_final(LIMITED)
    assert retry_headers(RETRIED) == {"x-should-retry": "false"}
    assert exai_view(RETRIED) == {"code": "PROVIDER_ERROR", "retryable": False, "retries": 2}


def test_a_final_error_says_no_retry_and_no_wait():
    assert retry_headers(SPENT) == {"x-should-retry": "false"}
    assert exai_view(SPENT) == {"code": "BUDGET_EXCEEDED", "retryable": False}


def test_a_retryable_error_exai_did_not_retry_keeps_the_vendors_wait():
    assert retry_headers(LIMITED) == {"x-should-retry": "true", "retry-after": "120",
                                      "retry-after-ms": "120000"}  # fmt: skip
    assert exai_view(LIMITED) == {"code": "RATE_LIMITED", "retryable": True, "retry_after_s": 120.0}


@pytest.mark.parametrize("kind", ["server", "connection", "timeout", "stream", "rate_limit", "x"])
def test_a_failure_exai_retried_is_told_in_words_no_agent_takes_for_passing(kind):
    info = _retried(kind, status=502 if kind in ("server", "rate_limit") else None)
    message = client_message(info)
    assert message.startswith("kimi failed on all 3 attempts exai made (")
    assert "will not send it again" in message
    for body in (
        message,
        str(openai_errors.error_body(info)),
        str(anthropic_errors.error_body(info)),
    ):
        hits = [p for p in OPENCODE_TRANSIENT if re.search(p, body, re.I)]
        # exai's own code for a vendor's rate limit is the one word left; see docs/agents.md.
        assert hits == ([OPENCODE_TRANSIENT[1]] if kind == "rate_limit" and body != message
                        else []), body  # fmt: skip


def test_other_errors_keep_their_message():
    assert client_message(DOWN) == DOWN.message and client_message(SPENT) == SPENT.message


@pytest.mark.parametrize(
    ("info", "chat", "responses", "messages"),
    [
        (SPENT, 402, 400, 402),
        (RETRIED, 424, 400, 424),
        (BAD_KEY, 424, 400, 424),
        (_retried("rate_limit"), 424, 400, 424),
        (DOWN, 503, 503, 503),
        (LIMITED, 429, 429, 429),
        (ErrorInfo(code=ErrorCode.OVER_CAPACITY, message="busy", retryable=True), 503, 503, 529),
        (ErrorInfo(code=ErrorCode.VALIDATION_ERROR, message="no such model",
                   details={"known_models": ["kimi-k2.6"]}), 404, 404, 404),
    ],
)  # fmt: skip
def test_each_face_gives_a_final_error_a_status_its_agents_do_not_retry(
    info, chat, responses, messages
):
    answers = {
        "chat": openai_errors.error_response(info),
        "responses": openai_errors.responses_error_response(info),
        "messages": anthropic_errors.error_response(info),
    }
    assert {face: a[0] for face, a in answers.items()} == {
        "chat": chat, "responses": responses, "messages": messages}  # fmt: skip
    for _, body, headers in answers.values():
        assert headers["x-should-retry"] == ("false" if is_final(info) else "true")
        assert ("retry-after" in headers) == (not is_final(info) and info.retry_after_s is not None)
        assert "overloaded_error" not in str(body) or not is_final(info)
