"""exai's errors as OpenAI clients expect them: one table, status and body.

An OpenAI client decides what to do from the HTTP status (the ``openai`` SDK
raises ``BadRequestError`` for 400, ``AuthenticationError`` for 401,
``RateLimitError`` for 429...) and reads ``{"error": {"message", "type",
"param", "code"}}``. Every exai :class:`~exai.protocol.ErrorCode` maps to one
row of :data:`ERRORS`. The body also carries exai's own view under
``error.exai`` (``code``, ``retryable``, ``retry_after_s``, ``retries``), and the
headers say whether to retry (:mod:`exai.web.retry_advice`).

An error no retry can cure (a spent budget, a provider that refused for good or
that exai already retried) has a status that no agent on these faces retries,
whatever the headers say: 402 for the budget and 424 (failed dependency) for the
provider on ``/v1/chat/completions``, where qwen-code and opencode retry every
5xx and 429; and 400 for both on ``/v1/responses``, since Codex retries every
status but 400 and 429 (:func:`responses_error_response`).

Pure functions: no I/O, tested without a daemon.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from exai.protocol import ErrorCode, ErrorInfo
from exai.web.model_call import RequestRefused
from exai.web.retry_advice import client_message, exai_retries, exai_view, is_final, retry_headers

__all__ = [
    "ERRORS",
    "ErrorShape",
    "error_body",
    "error_response",
    "refusal_response",
    "responses_error_response",
]


@dataclass(frozen=True, slots=True)
class ErrorShape:
    status: int
    type: str
    code: str | None = None
    status_if_retryable: int | None = None  # a transient failure of the same kind
    param: str | None = None  # the request field at fault when the error names none


ERRORS: dict[ErrorCode, ErrorShape] = {
    ErrorCode.INVALID_REQUEST: ErrorShape(400, "invalid_request_error"),
    ErrorCode.VALIDATION_ERROR: ErrorShape(400, "invalid_request_error"),
    ErrorCode.CONTEXT_TOO_LONG: ErrorShape(400, "invalid_request_error",
                                           "context_length_exceeded"),
    ErrorCode.UNAUTHORIZED: ErrorShape(401, "authentication_error", "invalid_api_key"),
    ErrorCode.FORBIDDEN: ErrorShape(403, "permission_error", "forbidden"),
    # The tool behind the request is switched off on this daemon (EXAI_TOOLS_DENY).
    ErrorCode.TOOL_NOT_FOUND: ErrorShape(404, "not_found_error", "unavailable"),
    ErrorCode.CONVERSATION_NOT_FOUND: ErrorShape(404, "not_found_error", "thread_not_found",
                                                 param="metadata.exai_thread"),
    ErrorCode.RATE_LIMITED: ErrorShape(429, "rate_limit_error", "rate_limit_exceeded"),
    # OpenAI's code for a spent quota, not its 429: agents wait out a 429's Retry-After
    # (the hours until the budget resets) in silence, and retry a 429 without one.
    ErrorCode.BUDGET_EXCEEDED: ErrorShape(402, "insufficient_quota", "insufficient_quota"),
    ErrorCode.OVER_CAPACITY: ErrorShape(503, "server_overloaded", "over_capacity"),
    ErrorCode.UNAVAILABLE: ErrorShape(503, "server_error", "service_unavailable"),
    # A provider that refused for good (bad key, no balance) or that exai already
    # retried: the request depended on it, and no retry will change that. One that is
    # down or busy for now and that exai did not retry: unavailable.
    ErrorCode.PROVIDER_ERROR: ErrorShape(424, "upstream_error", "provider_error",
                                         status_if_retryable=503),
    ErrorCode.TIMEOUT: ErrorShape(504, "timeout_error", "timeout"),
    # Only a shutdown cancels a call whose caller is still there to be told.
    ErrorCode.CANCELLED: ErrorShape(503, "server_error", "cancelled"),
    # Never from this face: each HTTP request has a session of its own.
    ErrorCode.REQUEST_ID_REUSED: ErrorShape(409, "invalid_request_error", "request_id_reused"),
    ErrorCode.INTERNAL_ERROR: ErrorShape(500, "server_error", "internal_error"),
}  # fmt: skip

# VALIDATION_ERROR for a model the catalogue does not know: OpenAI answers 404.
_UNKNOWN_MODEL = ErrorShape(404, "invalid_request_error", "model_not_found")
# Any failure exai already retried (a provider down, or rate limiting, throughout).
_RETRIED = ErrorShape(424, "upstream_error", "provider_error")
# The final statuses Codex would retry five times anyway; 400 is one it does not.
_RESPONSES_FINAL = {402: 400, 424: 400}

# A tool's argument, as the OpenAI request names what it came from.
_PARAM_OF_ARGUMENT = {
    "prompt": "messages",
    "system_prompt": "messages",
    "continuation_id": "metadata.exai_thread",
}


def refusal_response(refused: RequestRefused) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` for a request refused before any call."""
    error = {"message": refused.message, "type": "invalid_request_error",
             "param": refused.param, "code": refused.code}  # fmt: skip
    return refused.status, {"error": error}, {"x-should-retry": "false"}


def _shape(info: ErrorInfo) -> ErrorShape:
    if info.retryable and exai_retries(info):
        return _RETRIED
    if info.code == ErrorCode.VALIDATION_ERROR and "known_models" in (info.details or {}):
        return _UNKNOWN_MODEL
    return ERRORS.get(info.code, ERRORS[ErrorCode.INTERNAL_ERROR])


def _param(info: ErrorInfo) -> str | None:
    """The request field at fault, from a validation error's first field."""
    if _shape(info) is _UNKNOWN_MODEL:
        return "model"
    named = (info.details or {}).get("param")
    if isinstance(named, str):  # the provider layer names the parameter it could not serve
        return named
    fields = (info.details or {}).get("fields") or []
    if not fields or not isinstance(fields[0], dict):
        return _shape(info).param
    location = str(fields[0].get("field", ""))
    head, _, rest = location.partition(".")
    if not head or head.startswith("("):  # the arguments as a whole
        return None
    if head in _PARAM_OF_ARGUMENT:
        return _PARAM_OF_ARGUMENT[head]
    return head + re.sub(r"\.(\d+)", r"[\1]", "." + rest if rest else "")


def error_body(info: ErrorInfo) -> dict[str, Any]:
    """``{"error": {...}}`` for ``info``."""
    shape = _shape(info)
    return {
        "error": {
            "message": client_message(info),
            "type": shape.type,
            "param": _param(info),
            "code": shape.code,
            "exai": exai_view(info),
        }
    }


def error_response(info: ErrorInfo) -> tuple[int, dict[str, Any], dict[str, str]]:
    """``(status, body, headers)`` of the HTTP answer for ``info`` on ``/v1/chat/completions``."""
    shape = _shape(info)
    status = shape.status
    if not is_final(info) and shape.status_if_retryable is not None:
        status = shape.status_if_retryable
    return status, error_body(info), retry_headers(info)


def responses_error_response(info: ErrorInfo) -> tuple[int, dict[str, Any], dict[str, str]]:
    """The same answer on ``/v1/responses``, where a final 402 or 424 is a 400."""
    status, body, headers = error_response(info)
    if is_final(info):
        status = _RESPONSES_FINAL.get(status, status)
    return status, body, headers
