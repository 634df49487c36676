"""The one retry policy for provider requests (tenacity underneath).

Retried: rate limits (429), server failures (5xx) and connection failures, after
exponential backoff with jitter, or after exactly what the vendor asked for with
``Retry-After``. Never retried: anything the caller must change first (400, 401,
403, balance, context length) and timeouts (a request that already ran for the
whole timeout is not worth running again inside the same call). A rate limit
that asks for a longer wait than ``max_retry_after_s`` is handed straight to the
caller, so a fallback model can answer instead of the call sleeping.

SDK retries are turned off in every plugin so that this is the only mechanism.
"""

from __future__ import annotations

import random
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeVar

from tenacity import AsyncRetrying, RetryCallState, retry_if_exception, stop_after_attempt
from tenacity.wait import wait_exponential_jitter

from exai import tracing
from exai.errors import ExaiError, ProviderError, RateLimitedError

if TYPE_CHECKING:
    from exai.settings import Settings

__all__ = ["RetryPolicy"]

T = TypeVar("T")

_RETRIED_KINDS = frozenset({"server", "connection"})


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    max_retries: int = 3
    initial_backoff_s: float = 0.5
    max_backoff_s: float = 8.0
    max_retry_after_s: float = 60.0

    @classmethod
    def from_settings(cls, settings: Settings) -> RetryPolicy:
        return cls(max_retries=settings.provider_max_retries)

    def should_retry(self, exc: BaseException) -> bool:
        if isinstance(exc, RateLimitedError):
            wait = exc.retry_after_s
            return wait is None or wait <= self.max_retry_after_s
        if isinstance(exc, ProviderError) and exc.retryable:
            return (exc.details or {}).get("kind") in _RETRIED_KINDS
        return False

    async def run(self, attempt: Callable[[], Awaitable[T]]) -> tuple[T, int]:
        """``(result, retries)``. On failure the exception's ``details["retries"]``
        says how many retries were spent before giving up."""
        attempts = 0

        async def counted() -> T:
            nonlocal attempts
            attempts += 1
            return await attempt()

        retrying = AsyncRetrying(
            stop=stop_after_attempt(self.max_retries + 1),
            wait=self._wait,
            retry=retry_if_exception(self.should_retry),
            reraise=True,
        )
        try:
            result: T = await retrying(counted)
        except ExaiError as exc:
            exc.details = {**(exc.details or {}), "retries": max(0, attempts - 1)}
            raise
        return result, attempts - 1

    def _wait(self, state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome is not None else None
        asked = getattr(exc, "retry_after_s", None)
        if asked is not None:
            # Exactly what was asked, plus a little so that many callers told the
            # same thing do not return in the same instant.
            wait = float(asked) + random.uniform(0.0, min(1.0, 0.1 * float(asked)))
        else:
            backoff = wait_exponential_jitter(multiplier=self.initial_backoff_s,
                                              max=self.max_backoff_s,
                                              jitter=self.initial_backoff_s)  # fmt: skip
            wait = float(backoff(state))
        # A retry is an event on the provider request's span, when tracing is on.
        code = getattr(getattr(exc, "code", None), "value", type(exc).__name__)
        tracing.event("retry", {"exai.attempt": state.attempt_number, "error.type": code,
                                "exai.retry.wait_s": round(wait, 3)})  # fmt: skip
        return wait
