"""structlog configuration, done once at the edge (``exai serve``, ``exai shim``).

Call-scoped fields (``session_id``, ``request_id``, ``tool``) are set once per
call with :func:`bind_call`, in a context variable of the call's task, so every
line written while the call runs carries them, from any module, with no logger
passed around. One variable holding the three, rather than structlog's one
variable per key, because the daemon sets it on every call. Output goes to
stderr: stdout belongs to the MCP stdio transport when running as a shim.

Every line passes through the scrubber the edge hands in, the audit trail's
(configured secrets, credential shapes, the credentials in URLs), since log
lines leave the machine as often as audit events do. The console renderer also
gets every control character escaped: a client chooses some of what is logged
(a ``request_id``, a tool's arguments), and ESC, BEL or backspace written raw
would reach the terminal of whoever reads the log. The JSON renderer escapes
them itself.
"""

from __future__ import annotations

import logging
import re
import sys
from collections.abc import Callable, MutableMapping
from contextvars import ContextVar
from typing import Any, Literal

import structlog

__all__ = ["bind_call", "configure_logging", "escape_unprintable", "get_logger"]

_CALL: ContextVar[tuple[str, str, str] | None] = ContextVar("exai_call", default=None)


def bind_call(session_id: str, request_id: str, tool: str) -> None:
    """Mark the current context (a call's task) as running this call."""
    _CALL.set((session_id, request_id, tool))


def _add_call_fields(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    call = _CALL.get()
    if call is not None:
        event.setdefault("session_id", call[0])
        event.setdefault("request_id", call[1])
        event.setdefault("tool", call[2])
    return event


# C0 and C1 control characters and DEL, and the format characters that reorder or
# hide text on a terminal: bidirectional overrides and isolates, zero-width ones,
# line and paragraph separators, the byte order mark.
_UNPRINTABLE = re.compile("[\x00-\x1f\x7f-\x9f\u200b-\u200f\u2028-\u202e\u2066-\u2069\ufeff]")
_MULTILINE = ("exception", "stack")  # tracebacks keep their line breaks


def _escape_char(match: re.Match[str]) -> str:
    code = ord(match.group())
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def escape_unprintable(text: str, keep: str = "") -> str:
    """``text`` with every control character, and every character that reorders or
    hides text (bidirectional overrides, zero-width), written as ``\\xNN`` or
    ``\\uNNNN``; the characters in ``keep`` (a line break, a tab) stay as they are."""
    return _UNPRINTABLE.sub(lambda m: m.group() if m.group() in keep else _escape_char(m), text)


def _escape_unprintable(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
    """Console only: write control characters in string values as ``\\xNN``.

    Nested values need nothing: the console renderer shows them with ``repr``.
    """
    for key, value in event.items():
        if isinstance(value, str) and _UNPRINTABLE.search(value):
            if key in _MULTILINE:
                event[key] = "\n".join(_UNPRINTABLE.sub(_escape_char, line)
                                       for line in value.split("\n"))  # fmt: skip
            else:
                event[key] = _UNPRINTABLE.sub(_escape_char, value)
    return event


_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}  # fmt: skip


def configure_logging(
    fmt: Literal["console", "json"] = "console",
    level: str = "info",
    stream=None,
    scrubber: Callable[[MutableMapping[str, Any]], Any] | None = None,
) -> None:
    """Configure structlog; ``scrubber`` masks secrets in every line (the edge passes the
    audit trail's, :func:`exai.audit.scrub.log_scrubber`, so logs and audit mask alike)."""

    def scrub(_logger: Any, _method: str, event: MutableMapping[str, Any]) -> Any:
        return scrubber(event) if scrubber is not None else event

    rendering: list[structlog.typing.Processor]
    if fmt == "json":
        rendering = [structlog.processors.JSONRenderer()]
    else:
        rendering = [_escape_unprintable, structlog.dev.ConsoleRenderer(colors=False)]
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            _add_call_fields,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            scrub,
            *rendering,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "exai", **bound: object) -> Any:
    # A lazy proxy: module-level loggers pick up the configuration made later at start-up.
    return structlog.get_logger(name, **bound)
