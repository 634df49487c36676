"""structlog configuration, done once at the edge (``exai serve``, ``exai shim``).

Call-scoped fields (``session_id``, ``request_id``, ``tool``) are bound on the
logger handed to each call, so every line a call writes carries them. Output goes
to stderr: stdout belongs to the MCP stdio transport when running as a shim.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Literal

import structlog

__all__ = ["configure_logging", "get_logger"]

_LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING,
           "error": logging.ERROR}  # fmt: skip


def configure_logging(
    fmt: Literal["console", "json"] = "console", level: str = "info", stream=None
) -> None:
    renderer: structlog.typing.Processor
    if fmt == "json":
        renderer = structlog.processors.JSONRenderer()
    else:
        renderer = structlog.dev.ConsoleRenderer(colors=False)
    structlog.configure(
        processors=[
            structlog.contextvars.merge_contextvars,
            structlog.processors.add_log_level,
            structlog.processors.TimeStamper(fmt="iso", utc=True),
            structlog.processors.format_exc_info,
            renderer,
        ],
        wrapper_class=structlog.make_filtering_bound_logger(_LEVELS.get(level, logging.INFO)),
        logger_factory=structlog.PrintLoggerFactory(file=stream or sys.stderr),
        cache_logger_on_first_use=False,
    )


def get_logger(name: str = "exai", **bound: object) -> Any:
    # A lazy proxy: module-level loggers pick up the configuration made later at start-up.
    return structlog.get_logger(name, **bound)
