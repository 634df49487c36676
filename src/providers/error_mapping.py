"""Vendor failures turned into :mod:`exai.errors`, with ``retryable`` told truthfully.

Every vendor reports failures as an HTTP status plus a JSON body whose shape and
codes are its own (Moonshot names an error ``type``; Z.ai gives a numeric business
``code``). A plugin extracts status, headers and body from its SDK's exception
and hands them here with a classifier for its vendor; this module decides what
the failure means for the caller. ``details["kind"]`` records that decision and
is what the retry policy reads, so "retry this?" is answered in one place.
"""

from __future__ import annotations

import email.utils
import json
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from exai.errors import (
    ContextTooLongError,
    ExaiError,
    ProviderError,
    RateLimitedError,
)

__all__ = [
    "Classifier",
    "ErrorKind",
    "VendorFailure",
    "classify_generic",
    "connection_error",
    "parse_error_body",
    "retry_after_s",
    "status_error",
    "stream_error",
]

ErrorKind = Literal[
    "context_length",
    "auth",
    "balance",
    "permission",
    "not_found",
    "rate_limit",
    "server",
    "bad_request",
    "connection",
    "timeout",
    "stream",
]


@dataclass(frozen=True, slots=True)
class VendorFailure:
    """What the vendor said, before interpretation."""

    status: int
    code: str | None  # Moonshot's error ``type`` or Z.ai's business ``code``
    message: str


Classifier = Callable[[VendorFailure], "ErrorKind | None"]

_CONTEXT_RE = re.compile(
    r"context[ _-]?length|token limit|too many tokens|maximum context|context window"
    r"|prompt (?:is )?too long|exceeds? (?:the )?max(?:imum)? length|input token length",
    re.IGNORECASE,
)
_BALANCE_RE = re.compile(
    r"balance|quota|billing|arrears|recharge|insufficient (?:credit|fund)", re.IGNORECASE
)
_TRY_AGAIN_RE = re.compile(r"try again (?:after|in) (\d+(?:\.\d+)?) ?s", re.IGNORECASE)


def classify_generic(failure: VendorFailure) -> ErrorKind:
    """What an HTTP failure means when the vendor's own codes say nothing more."""
    status = failure.status
    if status in (400, 413, 422) and _CONTEXT_RE.search(failure.message):
        return "context_length"
    if status == 401:
        return "auth"
    if status == 402 or (status in (403, 429) and _BALANCE_RE.search(failure.message)):
        return "balance"
    if status == 403:
        return "permission"
    if status == 404:
        return "not_found"
    if status == 429:
        return "rate_limit"
    if status in (408, 425) or status >= 500:
        return "server"
    return "bad_request"


def parse_error_body(body: Any) -> tuple[str | None, str]:
    """``(code, message)`` from an error body (dict, JSON text or anything else)."""
    if isinstance(body, (bytes, bytearray)):
        body = body.decode("utf-8", "replace")
    if isinstance(body, str):
        try:
            body = json.loads(body)
        except ValueError:
            return None, body.strip()[:500]
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        if isinstance(inner, Mapping):
            code = inner.get("code") or inner.get("type")
            message = inner.get("message") or body.get("message") or ""
            return (str(code) if code is not None else None), str(message)
        if isinstance(inner, str):
            return None, inner
    return None, "" if body is None else str(body)[:500]


def retry_after_s(headers: Mapping[str, str] | None, message: str = "") -> float | None:
    """Seconds the vendor asked us to wait: ``retry-after-ms``, ``Retry-After``
    (seconds or an HTTP date), or a "try again after N seconds" in the message."""
    if headers:
        lowered = {k.lower(): v for k, v in headers.items()}
        ms = lowered.get("retry-after-ms")
        if ms is not None:
            try:
                return max(0.0, float(ms) / 1000.0)
            except ValueError:
                pass
        value = lowered.get("retry-after")
        if value is not None:
            try:
                return max(0.0, float(value))
            except ValueError:
                when = email.utils.parsedate_to_datetime(value) if value else None
                if when is not None:
                    return max(0.0, when.timestamp() - time.time())
    match = _TRY_AGAIN_RE.search(message)
    return float(match.group(1)) if match else None


def status_error(
    *,
    provider: str,
    label: str,
    status: int,
    headers: Mapping[str, str] | None,
    body: Any,
    classify: Classifier | None = None,
    setup_hint: str = "",
) -> ExaiError:
    """The exception for an HTTP error response from ``label`` (e.g. "Kimi")."""
    code, message = parse_error_body(body)
    failure = VendorFailure(status=status, code=code, message=message)
    kind: ErrorKind = (classify(failure) if classify else None) or classify_generic(failure)
    said = f"HTTP {status}" + (f" {code}" if code else "") + (f": {message}" if message else "")
    details = {"provider": provider, "status": status, "vendor_code": code, "kind": kind}
    if kind == "context_length":
        return ContextTooLongError(
            f"the prompt does not fit the model's context window ({label} said {said})",
            details=details,
        )
    if kind == "rate_limit":
        return RateLimitedError(
            f"{label} is rate limiting requests ({said})",
            retry_after_s=retry_after_s(headers, message),
            details=details,
        )
    if kind == "server":
        return ProviderError(f"{label} failed ({said}); try again later", retryable=True,
                             details=details)  # fmt: skip
    hint = f"; {setup_hint}" if setup_hint else ""
    explanations = {
        "auth": f"{label} rejected the API key ({said}){hint}",
        "balance": f"{label} refused the request for lack of balance or quota ({said}); "
        "top up the account or check its plan",
        "permission": f"{label} does not allow this request ({said})",
        "not_found": f"{label} does not know this model or endpoint ({said})",
    }
    text = explanations.get(kind, f"{label} rejected the request ({said})")
    return ProviderError(text, retryable=False, details=details)


def connection_error(
    *, provider: str, label: str, base_url: str, timeout_s: float | None, cause: BaseException
) -> ProviderError:
    """No usable HTTP answer: unreachable, reset, or no answer within the timeout."""
    if timeout_s is not None:
        return ProviderError(
            f"{label} did not answer within {timeout_s:g}s ({base_url})",
            retryable=True,
            details={"provider": provider, "kind": "timeout"},
        )
    reason = str(cause.__cause__ or cause) or type(cause).__name__
    return ProviderError(
        f"cannot reach {label} at {base_url}: {reason}",
        retryable=True,
        details={"provider": provider, "kind": "connection"},
    )


def stream_error(*, provider: str, label: str, body: Any) -> ProviderError:
    """An error event inside a stream that had started well."""
    code, message = parse_error_body(body)
    said = (f"{code}: " if code else "") + (message or "no details")
    return ProviderError(
        f"{label} broke off the streamed reply ({said})",
        retryable=True,
        details={"provider": provider, "vendor_code": code, "kind": "stream"},
    )
