"""Whether a model face's client should retry a failed call: decided once, for every face.

Agents retry failed model requests themselves, each by its own rules (read in
their code and measured with the pinned agents, docs/agents.md#errors):

- the ``openai`` and ``anthropic`` SDKs and Claude Code obey ``x-should-retry``;
- qwen-code and opencode do not: they retry every 5xx and 429 (qwen-code seven
  times, then a 429 or 503 ten more times a minute apart; opencode five times),
  and wait out a ``Retry-After`` of hours without a word;
- opencode also retries an error whose text mentions 429, 500, 502, 503, 504,
  524, a rate limit, overloading, a server error or "try again later";
- Codex retries every status but 400 and 429 five times.

So an error no retry can cure goes out *final*: with a status no client retries
(each face picks its own), ``x-should-retry: false``, no ``Retry-After``, and a
message that does not read as transient. An error is final when exai says it is
not retryable, and also once exai has retried it (its details carry
``retries``): the agent's retries would multiply with exai's, each sending the
request to the vendor again. A retryable error exai did not retry (the vendor
asked for a longer wait than exai takes) stays retryable for the client, with
the vendor's ``Retry-After``.

Pure functions: no I/O.
"""

from __future__ import annotations

import math
from typing import Any

from exai.protocol import ErrorInfo

__all__ = ["client_message", "exai_retries", "exai_view", "is_final", "retry_headers"]

# What a vendor did, for each failure exai retries (details["kind"], see
# exai.providers.error_mapping), in words none of the agents takes for a transient error.
_WHAT_FAILED = {
    "server": "its servers failed",
    "connection": "it could not be reached",
    "timeout": "it did not answer in time",
    "stream": "it broke off its streamed reply",
    "rate_limit": "it kept throttling the requests",
}


def exai_retries(info: ErrorInfo) -> int:
    """How many times exai retried the provider request before giving up."""
    retries = (info.details or {}).get("retries")
    return retries if isinstance(retries, int) and retries > 0 else 0


def is_final(info: ErrorInfo) -> bool:
    """True when the client must not retry: nothing it can resend will be served."""
    return not info.retryable or exai_retries(info) > 0


def client_message(info: ErrorInfo) -> str:
    """The message the client shows. A failure exai retried is told as exai's last
    word on it; the vendor's own status line and text stay in exai's log and audit
    trail, since agents read words such as "500" or "try again later" in it as a
    reason to send the request again."""
    retries = exai_retries(info)
    if not info.retryable or not retries:
        return info.message
    details = info.details or {}
    provider = details.get("provider") or "the provider"
    what = _WHAT_FAILED.get(str(details.get("kind")), "it failed")
    status = details.get("status")
    if isinstance(status, int) and not isinstance(status, bool):
        what += f", HTTP {status // 100}xx"
    return (
        f"{provider} failed on all {retries + 1} attempts exai made ({what}); exai has "
        "given up on this request and will not send it again: ask later, or use another model"
    )


def exai_view(info: ErrorInfo) -> dict[str, Any]:
    """exai's own view in an error body: its code, whether a retry can help, how long
    to wait first, and how often exai already retried."""
    final = is_final(info)
    view: dict[str, Any] = {"code": info.code.value, "retryable": not final}
    if not final and info.retry_after_s is not None:
        view["retry_after_s"] = info.retry_after_s
    if exai_retries(info):
        view["retries"] = exai_retries(info)
    return view


def retry_headers(info: ErrorInfo) -> dict[str, str]:
    """``x-should-retry``, and for a retryable error that says how long to wait,
    ``Retry-After`` (and ``retry-after-ms``, which the SDKs prefer)."""
    if is_final(info):
        return {"x-should-retry": "false"}
    headers = {"x-should-retry": "true"}
    if info.retry_after_s is not None and info.retry_after_s >= 0:
        headers["retry-after"] = str(max(1, math.ceil(info.retry_after_s)))
        headers["retry-after-ms"] = str(round(info.retry_after_s * 1000))
    return headers
