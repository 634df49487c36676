"""exai's errors as Anthropic clients expect them: one table, status and body.

Claude Code (and the ``anthropic`` SDKs) decide from the HTTP status whether to
retry (429, 5xx and 529 are retried) and read ``{"type": "error", "error":
{"type", "message"}}``. Every exai :class:`~exai.protocol.ErrorCode` maps to one
row of :data:`ERRORS`; the body also carries exai's own view under ``exai``
(``code``, ``retryable``, the field at fault), and ``x-should-retry``, which the
SDKs obey over their own guess from the status, says whether to retry.
Anthropic's errors have no field for the parameter at fault, so a refusal's
message starts with it.

Pure functions: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from exai.protocol import ErrorCode, ErrorInfo
from exai.web.model_call import RequestRefused

__all__ = ["ERRORS", "error_body", "error_response", "refusal_response"]

# (status, Anthropic error type); a retryable provider error is overloaded instead.
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
    ErrorCode.PROVIDER_ERROR: (502, "api_error"),
    ErrorCode.TIMEOUT: (504, "timeout_error"),
    ErrorCode.OVER_CAPACITY: (529, "overloaded_error"),
    # Only a shutdown cancels a call whose caller is still there to be told.
    ErrorCode.CANCELLED: (529, "overloaded_error"),
}
_OVERLOADED = (529, "overloaded_error")


def _row(info: ErrorInfo) -> tuple[int, str]:
    if info.code == ErrorCode.VALIDATION_ERROR and "known_models" in (info.details or {}):
        return 404, "not_found_error"
    if info.code == ErrorCode.PROVIDER_ERROR and info.retryable:
        return _OVERLOADED
    return ERRORS.get(info.code, ERRORS[ErrorCode.INTERNAL_ERROR])


def error_body(info: ErrorInfo) -> dict[str, Any]:
    """``{"type": "error", "error": {...}}`` for ``info``."""
    exai: dict[str, Any] = {"code": info.code.value, "retryable": info.retryable}
    if info.retry_after_s is not None:
        exai["retry_after_s"] = info.retry_after_s
    param = (info.details or {}).get("param")
    if isinstance(param, str):
        exai["param"] = param
    return {
        "type": "error",
        "error": {"type": _row(info)[1], "message": info.message},
        "exai": exai,
    }


def error_response(info: ErrorInfo) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` of the HTTP answer for ``info``."""
    headers = {"x-should-retry": "true" if info.retryable else "false"}
    if info.retry_after_s is not None and info.retry_after_s >= 0:
        headers["retry-after"] = str(max(1, math.ceil(info.retry_after_s)))
        headers["retry-after-ms"] = str(round(info.retry_after_s * 1000))
    return _row(info)[0], error_body(info), headers


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
