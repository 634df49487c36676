"""What an error says on a span and in the log: bounded, and free of content unless content is on.

A vendor's error message may quote the prompt ("the message '...' is not
allowed"), and the exai error built from it carries those words on (``Kimi
rejected the request (HTTP 400 ...: <the vendor's words>)``). The caller gets
that message whole; a span's status and the ``call failed`` log line get
:func:`describe_error` instead:

- with content off (``EXAI_TRACE_CONTENT``, the default): the exai error code
  and what the error's details say about the vendor's answer (provider, HTTP
  status, the vendor's error code when it looks like a code, the kind), e.g.
  ``PROVIDER_ERROR (kimi, HTTP 400, invalid_request_error, bad_request)``; a bug
  (an exception that is not an exai error) by its type alone;
- with content on: the code and the message.

Either way at most :data:`ERROR_TEXT_MAX` characters. Pure: no OpenTelemetry here.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Mapping
from typing import Any, Final

__all__ = ["ERROR_TEXT_MAX", "describe_error", "error_code", "stack_without_message"]

ERROR_TEXT_MAX: Final = 500
# A vendor's error code is an identifier ("invalid_request_error", "1301"); anything
# else in that field is left out, as it could be text.
_CODE_SHAPE: Final = re.compile(r"[A-Za-z0-9_.:-]{1,64}")


def error_code(error: Any) -> str | None:
    """The exai error code of an :class:`~exai.errors.ExaiError` or an ``ErrorInfo``
    (anything with a string ``code`` or an enum of one); None for anything else."""
    code = getattr(error, "code", None)
    code = getattr(code, "value", code)
    return code if isinstance(code, str) else None


def describe_error(error: Any, *, content: bool) -> str:
    code = error_code(error)
    if code is None:
        name = type(error).__qualname__
        return (f"{name}: {error}" if content else name)[:ERROR_TEXT_MAX]
    if content:
        message = getattr(error, "message", None) or str(error)
        return f"{code}: {message}"[:ERROR_TEXT_MAX]
    facts = _vendor_facts(getattr(error, "details", None))
    return (f"{code} ({', '.join(facts)})" if facts else code)[:ERROR_TEXT_MAX]


def stack_without_message(error: BaseException) -> str:
    """Where ``error`` was raised, frame by frame, ending in its type but not its message."""
    frames = traceback.format_tb(error.__traceback__)
    return "".join(["Traceback (most recent call last):\n", *frames, type(error).__qualname__])


def _vendor_facts(details: Any) -> list[str]:
    if not isinstance(details, Mapping):
        return []
    facts = []
    provider = details.get("provider")
    if isinstance(provider, str) and _CODE_SHAPE.fullmatch(provider):
        facts.append(provider)
    status = details.get("status")
    if isinstance(status, int) and not isinstance(status, bool):
        facts.append(f"HTTP {status}")
    for key in ("vendor_code", "kind"):
        value = details.get(key)
        if isinstance(value, int) and not isinstance(value, bool):
            value = str(value)
        if isinstance(value, str) and _CODE_SHAPE.fullmatch(value):
            facts.append(value)
    return facts
