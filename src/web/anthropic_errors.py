"""exai's errors as Anthropic clients expect them: one table, status and body.

Claude Code (and the ``anthropic`` SDKs) decide from the HTTP status whether to
retry (429, 5xx and 529 are retried) and read ``{"type": "error", "error":
{"type", "message"}}``. Every exai :class:`~exai.protocol.ErrorCode` maps to one
row of :data:`ERRORS`; the body also carries exai's own view under ``exai``
(``code``, ``retryable``, ``retries``, the field at fault), and the headers say
whether to retry (:mod:`exai.web.retry_advice`). Anthropic's errors have no
field for the parameter at fault, so a refusal's message starts with it.

Claude Code obeys ``x-should-retry: false``, but retries anything whose body says
``overloaded_error``, and other clients of this API (the AI SDK's, qwen-code's)
retry every 5xx; so a provider failure no retry can cure (one that refused for
good, or that exai already retried) is a 424, failed dependency, and only exai
itself being busy is a 529.

Pure functions: no I/O.
"""

from __future__ import annotations

from typing import Any

from exai.protocol import ErrorCode, ErrorInfo
from exai.web.model_call import RequestRefused
from exai.web.retry_advice import client_message, exai_retries, exai_view, is_final, retry_headers

__all__ = ["ERRORS", "error_body", "error_response", "refusal_response"]

# (status, Anthropic error type); see _row for a provider failure that may pass and
# for any failure exai already retried.
ERRORS: dict[ErrorCode, tuple[int, str]] = {
    ErrorCode.INVALID_REQUEST: (400, "invalid_request_error"),
    ErrorCode.VALIDATION_ERROR: (400, "invalid_request_error"),
    ErrorCode.CONTEXT_TOO_LONG: (400, "invalid_request_error"),
    ErrorCode.UNAUTHORIZED: (401, "authentication_error"),
    # A spent budget is not a rate limit: nothing changes until the period turns.
    ErrorCode.BUDGET_EXCEEDED: (402, "billing_error"),
    ErrorCode.FORBIDDEN: (403, "permission_error"),
    ErrorCode.TOOL_NOT_FOUND: (404, "not_found_error"),
    ErrorCode.CONVERSATION_NOT_FOUND: (404, "not_found_error"),
    ErrorCode.REQUEST_ID_REUSED: (409, "invalid_request_error"),
    ErrorCode.RATE_LIMITED: (429, "rate_limit_error"),
    ErrorCode.INTERNAL_ERROR: (500, "api_error"),
    # A provider that refused for good (bad key, no balance): the request depended on it.
    ErrorCode.PROVIDER_ERROR: (424, "api_error"),
    ErrorCode.TIMEOUT: (504, "timeout_error"),
    ErrorCode.OVER_CAPACITY: (529, "overloaded_error"),
    # A service not up yet: retried like an overloaded API, which is what it is to a client.
    ErrorCode.UNAVAILABLE: (529, "overloaded_error"),
    # Only a shutdown cancels a call whose caller is still there to be told.
    ErrorCode.CANCELLED: (529, "overloaded_error"),
}
# A provider down or busy that exai did not retry: Claude Code retries it and then
# shows it as it is, where a 529 would read "the API is at capacity".
_PROVIDER_UNAVAILABLE = (503, "api_error")
# Any failure exai already retried (a provider down, or rate limiting, throughout).
_RETRIED = (424, "api_error")


def _row(info: ErrorInfo) -> tuple[int, str]:
    if info.retryable and exai_retries(info):
        return _RETRIED
    if info.code == ErrorCode.VALIDATION_ERROR and "known_models" in (info.details or {}):
        return 404, "not_found_error"
    if info.code == ErrorCode.PROVIDER_ERROR and not is_final(info):
        return _PROVIDER_UNAVAILABLE
    return ERRORS.get(info.code, ERRORS[ErrorCode.INTERNAL_ERROR])


def error_body(info: ErrorInfo) -> dict[str, Any]:
    """``{"type": "error", "error": {...}}`` for ``info``."""
    exai = exai_view(info)
    param = (info.details or {}).get("param")
    if isinstance(param, str):
        exai["param"] = param
    return {
        "type": "error",
        "error": {"type": _row(info)[1], "message": client_message(info)},
        "exai": exai,
    }


def error_response(info: ErrorInfo) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` of the HTTP answer for ``info``."""
    return _row(info)[0], error_body(info), retry_headers(info)


def refusal_response(refused: RequestRefused) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` for a request refused before any call."""
    kind = {
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
    }.get(refused.status, "invalid_request_error")
    message = f"{refused.param}: {refused.message}" if refused.param else refused.message
    body = {
        "type": "error",
        "error": {"type": kind, "message": message},
        "exai": {"code": "INVALID_REQUEST", "retryable": False, "param": refused.param},
    }
    return refused.status, body, {"x-should-retry": "false"}
