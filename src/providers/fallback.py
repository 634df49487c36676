"""When another model answers for the one chosen, and what the caller is told then.

Pure decisions for :class:`~exai.providers.calls.ModelCalls`: which failures let the
next model of ``EXAI_FALLBACK_MODELS`` take over (the provider down, busy or
limiting after its retries; an account out of balance or quota, which no retry
cures but another vendor may not share; a model the vendor no longer serves),
which providers count as failed, and the note an answer from a fallback carries.
"""

from __future__ import annotations

from typing import Any

from exai.errors import ExaiError, OverCapacityError, ProviderError, RateLimitedError
from exai.providers.catalogue import ModelInfo

__all__ = ["attempt_of", "failed_providers", "fallback_note", "falls_back", "with_attempts"]

# Failures of one vendor that no retry cures but another vendor's model may not share:
# an account out of balance or quota, a model the vendor no longer serves.
_FALLBACK_KINDS = frozenset({"balance", "not_found"})


def falls_back(exc: ExaiError) -> bool:
    """Whether another model might answer: the provider is down, busy or limiting, the
    account is out of balance, or the vendor no longer serves the model."""
    if isinstance(exc, (RateLimitedError, OverCapacityError)):
        return True
    if not isinstance(exc, ProviderError):
        return False
    return exc.retryable or (exc.details or {}).get("kind") in _FALLBACK_KINDS


def fallback_note(first: ModelInfo, answered: ModelInfo, exc: ExaiError) -> dict[str, str]:
    """What the caller should know when another model answered: which, why, at what price."""
    price = answered.price
    rates = (f"{price.currency} {price.input:g} in / {price.output:g} out per 1M tokens"
             if price is not None else "no published price")  # fmt: skip
    return {
        "param": "model",
        "message": (
            f"{first.name} could not answer ({exc.code.value}: {exc.message}); "
            f"{answered.name} answered instead, at its own price ({rates})"
        ),
    }


def failed_providers(attempts: list[dict[str, Any]]) -> set[str]:
    """Providers that failed (a model skipped for its parameters does not count)."""
    return {a["provider"] for a in attempts if a["code"] != "VALIDATION_ERROR"}


def attempt_of(info: ModelInfo, exc: ExaiError) -> dict[str, Any]:
    return {"model": info.name, "provider": info.provider, "code": exc.code.value,
            "message": exc.message}  # fmt: skip


def with_attempts(exc: ExaiError, attempts: list[dict[str, Any]]) -> ExaiError:
    if len(attempts) > 1:
        exc.details = {**(exc.details or {}), "attempts": attempts}
    return exc
