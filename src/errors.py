"""The exceptions exai raises, one per protocol error code.

Anything below the daemon (tools, providers, stores) raises one of these; the
daemon turns it into the ``error`` of a ``call_tool_res`` with :meth:`ExaiError.info`.
Any other exception escaping a tool is a bug and becomes ``INTERNAL_ERROR``.

A message is often built from another library's exception text, which may
quote a URL with its credentials (the OpenAI SDK and httpx do); it goes to the
client, the log, the audit trail and ``/ready``, so those credentials are
masked here, once, whoever built the message.
"""

from __future__ import annotations

from typing import Any

from exai.protocol import ErrorCode, ErrorInfo
from exai.redact import mask_url_credentials

__all__ = [
    "BudgetExceededError",
    "CancelledError",
    "ContextTooLongError",
    "ConversationNotFoundError",
    "ExaiError",
    "ForbiddenError",
    "InternalError",
    "OverCapacityError",
    "ProviderError",
    "RateLimitedError",
    "RequestIdReusedError",
    "TimeoutError_",
    "ToolNotFoundError",
    "UnauthorizedError",
    "UnavailableError",
    "ValidationError_",
]


class ExaiError(Exception):
    code: ErrorCode = ErrorCode.INTERNAL_ERROR
    retryable: bool = False

    def __init__(
        self,
        message: str,
        *,
        retryable: bool | None = None,
        retry_after_s: float | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        message = mask_url_credentials(message)
        super().__init__(message)
        self.message = message
        if retryable is not None:
            self.retryable = retryable
        self.retry_after_s = retry_after_s
        self.details = details

    def info(self) -> ErrorInfo:
        return ErrorInfo(
            code=self.code,
            message=self.message,
            retryable=self.retryable,
            retry_after_s=self.retry_after_s,
            details=self.details,
        )


class ToolNotFoundError(ExaiError):
    code = ErrorCode.TOOL_NOT_FOUND


class ValidationError_(ExaiError):
    code = ErrorCode.VALIDATION_ERROR


class UnauthorizedError(ExaiError):
    code = ErrorCode.UNAUTHORIZED


class ForbiddenError(ExaiError):
    code = ErrorCode.FORBIDDEN


class OverCapacityError(ExaiError):
    code = ErrorCode.OVER_CAPACITY
    retryable = True


class RateLimitedError(ExaiError):
    code = ErrorCode.RATE_LIMITED
    retryable = True


class TimeoutError_(ExaiError):
    code = ErrorCode.TIMEOUT
    retryable = True


class CancelledError(ExaiError):
    code = ErrorCode.CANCELLED


class ProviderError(ExaiError):
    code = ErrorCode.PROVIDER_ERROR


class ContextTooLongError(ExaiError):
    code = ErrorCode.CONTEXT_TOO_LONG


class ConversationNotFoundError(ExaiError):
    code = ErrorCode.CONVERSATION_NOT_FOUND


class RequestIdReusedError(ExaiError):
    """A ``request_id`` this session already used, sent again for a different call.

    A retry is the same call under the same id; anything else under that id is
    refused rather than answered with what the earlier call produced.
    """

    code = ErrorCode.REQUEST_ID_REUSED

    def __init__(self, request_id: str) -> None:
        super().__init__(
            f"request_id {request_id!r} was already used in this session for a different "
            "call (another tool or other arguments); send a new call with a new request_id",
            details={"request_id": request_id},
        )


class BudgetExceededError(ExaiError):
    """The principal's spending budget for the period is used up; nothing was sent.

    ``retry_after_s`` is the time until the budget resets.
    """

    code = ErrorCode.BUDGET_EXCEEDED


class UnavailableError(ExaiError):
    """A service the call needs is not up on this daemon yet; the same call will
    work once it is. ``retry_after_s`` says when to try again."""

    code = ErrorCode.UNAVAILABLE
    retryable = True


class InternalError(ExaiError):
    code = ErrorCode.INTERNAL_ERROR
